"""Testing helpers in the manner of Storm's ``Testing.completeTopology``.

    result = complete_topology(topology, mocked_sources={"sentences": [["the cat"], ["a dog"]]})
    result.emitted("split")          # [["the"], ["cat"], ["a"], ["dog"]] (in some order)

The mocked spouts emit the given tuples (spread over the spout's tasks) with message ids, so
the run ends exactly when all of them are acked or failed and nothing is left in flight (see
``run.py``).  It works the same in local and multi-process mode (and on Spark, through
``brokerless.spark.complete_on_spark``, built from :func:`finite_topology` and
:func:`run_to_completion`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from .component import DEFAULT_STREAM, ComponentKind, ReplayableSpout, Stream
from .config import Config
from .errorlog import ErrorReport
from .run import TopologyRun, plan_for
from .statistics import Statistics
from .topology import Topology, TopologyError


class FixedTupleSpout(ReplayableSpout):
    """Emits a fixed list of tuples on its default stream, each once, with message ids; the
    task with index i of n emits tuples i, i + n, i + 2n, ...  ``acked`` and ``failed`` hold
    the indices the topology acked and failed (this spout does not replay a failed tuple; a
    checkpointed topology's rollback sends it back to a position: how many it emitted)."""

    def __init__(self, tuples: Sequence[Sequence[Any]], outputs: Sequence[Stream]) -> None:
        self.outputs = list(outputs)
        self._tuples = [list(t) for t in tuples]
        self._mine: list[int] = []
        self._next = 0
        self.acked: list[int] = []
        self.failed: list[int] = []

    def open(self, conf: Config, context: Any) -> None:
        n = len(context.get_component_tasks(context.component_id))
        self._mine = list(range(context.task_index, len(self._tuples), n))

    def next_tuple(self) -> None:
        if self._next < len(self._mine):
            index = self._mine[self._next]
            self._next += 1
            self.emit(self._tuples[index], msg_id=index)

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)

    def exhausted(self) -> bool:
        return self._next >= len(self._mine)

    def position(self) -> int:
        return self._next

    def seek(self, position: int) -> None:
        self._next = position


@dataclass
class CompletedTopology:
    """What ``complete_topology`` returns."""

    #: component -> stream -> values of every tuple it emitted
    tuples: dict[str, dict[str, list[list[Any]]]]
    statistics: Statistics
    errors: list[ErrorReport] = field(default_factory=list)

    def emitted(self, component: str, stream: str = DEFAULT_STREAM) -> list[list[Any]]:
        """The values of the tuples ``component`` emitted on ``stream`` (Storm's readTuples)."""
        return self.tuples.get(component, {}).get(stream, [])


def mock_sources(
    topology: Topology, mocked_sources: Mapping[str, Sequence[Sequence[Any]]]
) -> Topology:
    """``topology`` with each named spout replaced by a :class:`FixedTupleSpout`."""
    plan = topology.build()
    for name, tuples in mocked_sources.items():
        spec = plan.components.get(name)
        if spec is None or spec.kind is not ComponentKind.SPOUT:
            spouts = [c.name for c in plan.components.values() if c.kind is ComponentKind.SPOUT]
            raise TopologyError(
                f"topology {topology.name!r}: mocked source {name!r} is not a spout "
                f"(spouts: {spouts})"
            )
        if DEFAULT_STREAM not in spec.streams:
            raise TopologyError(
                f"topology {topology.name!r}: spout {name!r} has no default stream to mock"
            )
        outputs = list(spec.streams.values())
        topology = topology.with_component(name, partial(FixedTupleSpout, tuples, outputs))
    return topology


def finite_topology(
    topology: Topology,
    mocked_sources: Mapping[str, Sequence[Sequence[Any]]] | None = None,
    workers: int | None = None,
    config: Config | None = None,
) -> Topology:
    """``topology`` with its mocked spouts replaced; raises TopologyError if a spout left
    never says it is exhausted (a run to completion could not end)."""
    if mocked_sources:
        topology = mock_sources(topology, mocked_sources)
    endless = [
        c.name
        for c in plan_for(topology, workers, config).components.values()
        if c.kind is ComponentKind.SPOUT and not c.finite
    ]
    if endless:
        raise TopologyError(
            f"topology {topology.name!r}: spout(s) {endless} never say they are exhausted: "
            "mock them (mocked_sources=...) or implement exhausted()"
        )
    return topology


def run_to_completion(run: TopologyRun, timeout: float = 60.0) -> CompletedTopology:
    """Wait until ``run`` (started with ``capture=True``) is done, stop it, and gather what
    each component emitted."""
    with run:
        run.wait_until_done(timeout)
        run.stop()
        tuples: dict[str, dict[str, list[list[Any]]]] = {}
        for component, stream, values in run.captured():
            tuples.setdefault(component, {}).setdefault(stream, []).append(list(values))
        return CompletedTopology(tuples, run.statistics(), run.errors())


def complete_topology(
    topology: Topology,
    mocked_sources: Mapping[str, Sequence[Sequence[Any]]] | None = None,
    *,
    mode: str = "local",
    workers: int | None = None,
    transport: str = "ipc",
    config: Config | None = None,
    timeout: float = 60.0,
) -> CompletedTopology:
    """Run ``topology`` until every spout is exhausted and every tuple processed, capturing
    every emitted tuple.  ``mode`` is "local" (this process) or "multiprocess" (``workers``
    processes over ``transport``); ``brokerless.spark.complete_on_spark`` does the same on
    Spark.  Spouts not mocked must implement ``exhausted()``."""
    topology = finite_topology(topology, mocked_sources, workers, config)
    if mode == "local":
        from .local import run_local

        run: TopologyRun = run_local(topology, workers=workers, config=config, capture=True)
    elif mode == "multiprocess":
        from .multiprocess import run_multiprocess

        run = run_multiprocess(
            topology, workers=workers, transport=transport, config=config, capture=True
        )
    else:
        raise ValueError(f"mode must be 'local' or 'multiprocess', not {mode!r}")
    return run_to_completion(run, timeout)
