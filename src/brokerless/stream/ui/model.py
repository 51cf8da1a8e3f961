"""What the topology UI's JSON endpoints say: plain data built from a run.

``/api/topology`` (:func:`describe_topology`) is the plan, which never changes during a run:
components (kind, executors with their tasks, declared streams), the edges between them with
their groupings, and the config.  ``/api/stats`` (:func:`describe_stats`) is the live part:
:class:`~brokerless.stream.statistics.Statistics` as a dict (per component, per executor, per
worker; components and executors with their ``capacity``, a bolt's process latency, and
their figures over each time window, ``windows``), whether the spouts emit (``active``), the
errors with their tracebacks, and the run's attempts (a Spark run restarts the whole topology
when it loses a worker; ``restarts`` says why each earlier attempt ended).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, Protocol

from ..component import ComponentKind
from ..errorlog import ErrorList
from ..plan import TopologyPlan
from ..statistics import Statistics

#: Errors listed by ``/api/stats`` (the newest of those the run keeps, each task's latest;
#: ``errors_total`` counts every error reported).
MAX_ERRORS = 100

#: What a component's latency measures, by kind (Storm's names).
LATENCY = {
    ComponentKind.SPOUT: "complete latency",
    ComponentKind.BOLT: "execute latency",
    ComponentKind.ACKER: "latency",
}
_CONFIG = (
    "num_workers",
    "num_ackers",
    "max_spout_pending",
    "message_timeout_secs",
    "executor_queue_size",
    "executor_batch_size",
)


class ObservedRun(Protocol):
    """What the UI reads of a run, and the three things it may do to it: ``deactivate``,
    ``activate`` and ``rebalance`` (every ``brokerless.stream.run.TopologyRun`` has them)."""

    #: "local", "multiprocess" or "spark"
    mode: str
    #: Whether the spouts emit (Storm's ACTIVE; ``deactivate()`` and ``activate()`` set it).
    active: bool
    #: The run's current set of workers (1 at first; ``max_attempts`` in a row that complete
    #: no checkpoint end it); why each earlier one ended (``restarts``); what each worker of
    #: this one said when it started.
    attempt: int
    max_attempts: int
    restarts: list[str]
    #: What a rebalance under way changes, or None.
    rebalancing: str | None

    @property
    def plan(self) -> TopologyPlan: ...

    @property
    def stopped(self) -> bool: ...

    @property
    def failure(self) -> BaseException | None: ...

    @property
    def worker_info(self) -> Sequence[dict[str, Any]]: ...

    def statistics(self) -> Statistics: ...

    def errors(self) -> ErrorList: ...

    def deactivate(self) -> None: ...

    def activate(self) -> None: ...

    def rebalance(
        self,
        wait: float | None = None,
        workers: int | None = None,
        parallelism: Mapping[str, int] | None = None,
        *,
        block: bool = True,
    ) -> str: ...


def describe_topology(run: ObservedRun) -> dict[str, Any]:
    plan: TopologyPlan = run.plan
    components = []
    for component in plan.components.values():
        components.append(
            {
                "name": component.name,
                "kind": component.kind,
                "system": component.name.startswith("__"),
                "tasks": list(component.tasks),
                "executors": [
                    {"executor": e, "tasks": list(plan.executors[e].tasks)}
                    for e in component.executors
                ],
                "streams": {
                    name: {"fields": list(stream.fields), "direct": stream.direct}
                    for name, stream in component.streams.items()
                },
                "latency": LATENCY[component.kind],
                "finite": component.finite,
            }
        )
    edges = [
        {
            "source": source,
            "stream": stream,
            "target": subscription.component,
            "grouping": repr(subscription.grouping),
            "in_cycle": not subscription.blocking,
        }
        for (source, stream), subscriptions in plan.subscribers.items()
        for subscription in subscriptions
    ]
    return {
        "name": plan.name,
        "mode": run.mode,
        "workers": plan.config.num_workers,
        "config": {key: getattr(plan.config, key) for key in _CONFIG},
        "components": components,
        "edges": edges,
    }


def describe_stats(
    run: ObservedRun, statistics: Statistics, errors: ErrorList, started: float
) -> dict[str, Any]:
    """The live figures (``statistics`` and ``errors`` taken from ``run`` by the caller)."""
    return {
        "time": time.time(),
        "uptime_s": round(time.monotonic() - started, 3),
        "stopped": run.stopped,
        "failure": None if run.failure is None else str(run.failure),
        "active": run.active,
        **statistics.as_dict(),
        "errors_total": errors.total,
        "errors": [asdict(e) for e in errors[-MAX_ERRORS:]],
        "attempts": {
            "attempt": run.attempt,
            "max_attempts": run.max_attempts,
            "restarts": list(run.restarts),
            "workers": list(run.worker_info),
        },
    }
