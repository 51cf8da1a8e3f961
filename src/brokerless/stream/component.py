"""What users write: spouts and bolts, their declared output streams, and their context.

A component declares its outputs as a class attribute, like streamparse::

    class SplitBolt(Bolt):
        outputs = ["word"]                      # the default stream, one field

    class Router(Bolt):
        outputs = [Stream(["word"]), Stream(["line"], name="errors"),
                   Stream(["word"], name="to-one", direct=True)]

Each task gets its own instance (the component's class or zero-argument factory is called once
per task).  ``emit`` returns the ids of the tasks the tuple went to.

A topology with a :class:`StatefulBolt` is *checkpointed* (see ``checkpoint.py``): its state
is snapshotted together with the positions of its spouts, which must be
instances of :class:`ReplayableSpout`, and a failure rolls every task back to the last complete
checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from brokerless._strenum import StrEnum

if TYPE_CHECKING:
    from .config import Config
    from .state import KeyValueState
    from .tuple import Tuple

DEFAULT_STREAM = "default"


class ComponentKind(StrEnum):
    """What a component of a topology is: a user's spout or bolt, or the system's acker.  Its
    value is the name metrics and the UI show."""

    SPOUT = "spout"
    BOLT = "bolt"
    ACKER = "acker"


@dataclass(frozen=True)
class Stream:
    """An output stream: its field names, its name, and whether it is a direct stream (whose
    tuples go only where ``emit_direct`` sends them)."""

    fields: Sequence[str]
    name: str = DEFAULT_STREAM
    direct: bool = False


def declared_streams(outputs: Sequence[str | Stream]) -> dict[str, Stream]:
    """Normalise an ``outputs`` declaration; raises ValueError saying what is wrong."""
    if isinstance(outputs, str | Stream):
        outputs = [outputs]
    names = [item for item in outputs if isinstance(item, str)]
    if len(names) == len(outputs):
        outputs = [Stream(names)] if names else []
    streams: dict[str, Stream] = {}
    for item in outputs:
        if not isinstance(item, Stream):
            raise ValueError(
                "outputs must be a list of field names (the default stream) or a list of "
                f"Stream(...), not a mix containing {item!r}"
            )
        if not item.name or not isinstance(item.name, str):
            raise ValueError(f"stream name {item.name!r} must be a non-empty string")
        if item.name.startswith("__"):
            raise ValueError(f"stream name {item.name!r}: names starting with '__' are reserved")
        if item.name in streams:
            raise ValueError(f"stream {item.name!r} is declared twice")
        names = list(item.fields)
        if isinstance(item.fields, str) or not all(isinstance(n, str) and n for n in names):
            raise ValueError(
                f"stream {item.name!r}: fields must be a list of non-empty strings, "
                f"not {item.fields!r}"
            )
        if len(set(names)) != len(names):
            raise ValueError(f"stream {item.name!r} declares a field twice: {names}")
        streams[item.name] = Stream(tuple(names), item.name, bool(item.direct))
    return streams


class CountMetric:
    """A counter of the component's own (Storm's ``CountMetric``), from
    ``TopologyContext.register_counter``: ``incr()`` it; ``statistics()[component].metrics``
    has its count, summed over the component's tasks."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def incr(self, by: int = 1) -> None:
        self.count += by


@dataclass(frozen=True)
class TopologyContext:
    """Where a task runs: its ids, its component's tasks, and its worker."""

    topology: str
    component_id: str
    task_id: int
    worker_index: int
    num_workers: int
    component_tasks: Mapping[str, tuple[int, ...]] = field(repr=False)
    worker_tasks: frozenset[int] = field(repr=False)
    #: The (component, stream) pairs this component subscribes to (Storm's
    #: ``getThisSources``).
    sources: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    #: Each component's declared output streams, by name.
    component_streams: Mapping[str, Mapping[str, Stream]] = field(default_factory=dict, repr=False)
    counter: Callable[[str], CountMetric] | None = field(default=None, repr=False, compare=False)

    def register_counter(self, name: str) -> CountMetric:
        """A counter of this component's own (Storm's ``registerCounter``): call its
        ``incr()``; ``run.statistics()[component].metrics[name]`` sums it over the tasks."""
        if self.counter is None:
            raise RuntimeError("counters are registered by a running task (in open/prepare)")
        return self.counter(name)

    @property
    def task_index(self) -> int:
        """This task's position among its component's tasks (0-based)."""
        return self.component_tasks[self.component_id].index(self.task_id)

    def get_component_tasks(self, component: str) -> tuple[int, ...]:
        return self.component_tasks[component]

    def get_component_output_fields(
        self, component: str, stream: str = DEFAULT_STREAM
    ) -> tuple[str, ...]:
        """The fields of ``component``'s output ``stream`` (Storm's
        ``getComponentOutputFields``); KeyError, saying what there is, if it has no such
        stream."""
        streams = self.component_streams.get(component)
        if streams is None:
            raise KeyError(
                f"no component {component!r}; the components are {sorted(self.component_streams)}"
            )
        declared = streams.get(stream)
        if declared is None:
            raise KeyError(
                f"{component!r} declares no stream {stream!r}; it declares {sorted(streams)}"
            )
        return tuple(declared.fields)


class Collector(Protocol):
    """What a running component's emits, acks and errors go through (its executor's)."""

    def report_error(self, error: BaseException) -> None: ...

    @property
    def context(self) -> TopologyContext: ...


class SpoutCollector(Collector, Protocol):
    def emit(
        self, values: Sequence[Any], stream: str, msg_id: Any, direct_task: int | None
    ) -> list[int]: ...


class BoltCollector(Collector, Protocol):
    def emit(
        self,
        values: Sequence[Any],
        anchors: Tuple | Sequence[Tuple] | None,
        stream: str,
        direct_task: int | None,
    ) -> list[int]: ...

    def ack(self, tup: Tuple) -> None: ...

    def fail(self, tup: Tuple) -> None: ...

    def reset_timeout(self, tup: Tuple) -> None: ...


class _NotRunning:
    """Stands in for the collector until the component runs in a topology."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(
            f"{name}() needs a running topology: call it from open/next_tuple/ack/fail "
            "(spouts) or prepare/process (bolts)"
        )


_NOT_RUNNING = _NotRunning()
#: streamparse's log levels
_LEVELS = {
    "trace": logging.DEBUG - 5,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


@dataclass(frozen=True, eq=False)
class ComponentSpec:
    """A component of a topology written in streamparse's class-based DSL
    (``Component.spec``; see ``sparse.py``): what to run, and how.  Compared by identity: a
    spec stands for one component, and other specs' ``inputs`` name it by itself."""

    component: Callable[[], Component]
    name: str | None = None
    inputs: Any = None
    par: Any = None
    config: Mapping[str, Any] | None = None

    def __getitem__(self, stream: str) -> StreamRef:
        """This component's output stream ``stream``, as an input of another."""
        return StreamRef(self, stream)


@dataclass(frozen=True)
class StreamRef:
    """One output stream of a :class:`ComponentSpec` (streamparse's ``spec["stream"]``)."""

    spec: ComponentSpec
    stream: str


class Component:
    """Base of spouts and bolts.  Their ``emit``, ``ack`` and ``fail`` may be called only in
    the thread that calls the component (``process``, ``next_tuple``, ...): the executor's."""

    #: Output declaration: field names of the default stream, or a list of :class:`Stream`.
    outputs: Sequence[str | Stream] = ()

    _collector: Collector = _NOT_RUNNING

    def report_error(self, error: BaseException) -> None:
        """Record an error (with component, task and traceback) in the topology's error log."""
        self._collector.report_error(error)

    @classmethod
    def spec(
        cls,
        name: str | None = None,
        inputs: Any = None,
        par: int | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> ComponentSpec:
        """This component in a topology written in streamparse's DSL
        (:class:`brokerless.stream.sparse.Topology`): ``inputs`` (bolts) a list of specs or a
        dict of spec (or ``spec["stream"]``) to grouping, ``par`` its parallelism, ``config``
        its Storm settings."""
        return ComponentSpec(cls, name, inputs, par, config)

    @cached_property
    def logger(self) -> logging.Logger:
        """This component's logger (streamparse's ``self.logger``):
        ``brokerless.stream.<topology>.<component>``."""
        context = self._collector.context
        return logging.getLogger(f"brokerless.stream.{context.topology}.{context.component_id}")

    def log(self, message: str, level: str | None = None) -> None:
        """Log ``message`` on :attr:`logger` (streamparse's ``log``): ``level`` is "trace",
        "debug", "info" (the default), "warn" or "error"."""
        number = _LEVELS.get(level or "info")
        if number is None:
            raise ValueError(f"level must be one of {sorted(_LEVELS)}, not {level!r}")
        self.logger.log(number, message)


class Spout(Component):
    """A source of tuples.  The executor calls ``next_tuple`` repeatedly (not while
    ``max_spout_pending`` tuples are in flight); ``ack``/``fail`` get the ``msg_id`` of a spout
    tuple once its whole tree is processed, or when it failed or timed out."""

    _collector: SpoutCollector

    def open(self, conf: Config, context: TopologyContext) -> None:
        """Called once per task before anything else."""

    def next_tuple(self) -> None:
        """Emit zero or more tuples; return quickly (the executor waits when nothing came)."""

    def ack(self, msg_id: Any) -> None:
        """The tuple emitted with ``msg_id`` was fully processed."""

    def fail(self, msg_id: Any) -> None:
        """The tuple emitted with ``msg_id`` failed or timed out; emit it again to replay it."""

    def activate(self) -> None:
        """Called once the task is open, before its first ``next_tuple`` (Storm's: the
        topology is active)."""

    def deactivate(self) -> None:
        """Called when the topology stops, before ``close``: ``next_tuple`` is called no more
        (Storm's: the topology is deactivated, as ``storm kill`` does first)."""

    def close(self) -> None:
        """Called once when the topology stops."""

    def exhausted(self) -> bool:
        """True when this spout will emit nothing more (it has run out of input and has nothing
        left to replay).  Runs "to completion" end when every spout is exhausted and every
        tuple is processed; the default, False, is right for endless sources."""
        return False

    def emit(
        self,
        values: Sequence[Any],
        stream: str = DEFAULT_STREAM,
        msg_id: Any = None,
        direct_task: int | None = None,
    ) -> list[int]:
        """Emit a tuple; with ``msg_id`` it is tracked (acked or failed back to this spout)."""
        return self._collector.emit(values, stream, msg_id, direct_task)

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = DEFAULT_STREAM, msg_id: Any = None
    ) -> list[int]:
        """Emit to exactly ``task`` on a direct stream."""
        return self._collector.emit(values, stream, msg_id, task)


class Bolt(Component):
    """Processes tuples.  By default every emit in ``process`` is anchored to the input tuple
    (``auto_anchor``), the input is acked when ``process`` returns (``auto_ack``), and failed
    when it raises (``auto_fail``; the error is recorded either way)."""

    _collector: BoltCollector

    #: Ack the input tuple when ``process`` returns (unless it was acked or failed already).
    auto_ack: ClassVar[bool] = True
    #: Anchor emits made during ``process`` to the input tuple when no ``anchors`` are given.
    auto_anchor: ClassVar[bool] = True
    #: Fail the input tuple when ``process`` raises; without it, it is left to time out (and
    #: be replayed then).  In a checkpointed topology an exception rolls back either way.
    auto_fail: ClassVar[bool] = True
    #: This bolt's own tick tuple frequency, in seconds (Storm's ``getComponentConfiguration``
    #: setting ``topology.tick.tuple.freq.secs``): a class attribute, or set in ``__init__``
    #: from its arguments.  ``Topology.bolt(..., tick_tuple_freq_secs=)`` overrides it; None:
    #: the topology's ``Config.tick_tuple_freq_secs``.
    tick_tuple_freq_secs: float | None = None

    def prepare(self, conf: Config, context: TopologyContext) -> None:
        """Called once per task before the first tuple."""

    def process(self, tup: Tuple) -> None:
        """Handle one input tuple."""

    def process_tick(self, tup: Tuple) -> None:
        """Handle a tick tuple (streamparse's ``process_tick``): one comes every
        ``tick_tuple_freq_secs`` (its declaration's, the bolt's own attribute, or
        ``Config.tick_tuple_freq_secs``), from
        component ``"__system"`` on stream ``"__tick"``, with the frequency as its one value;
        no spout tuple waits for it.  For periodic work: flushing a batch, a window."""

    def cleanup(self) -> None:
        """Called once when the topology stops."""

    def emit(
        self,
        values: Sequence[Any],
        anchors: Tuple | Sequence[Tuple] | None = None,
        stream: str = DEFAULT_STREAM,
        direct_task: int | None = None,
    ) -> list[int]:
        """Emit a tuple anchored to ``anchors`` (default: the tuple being processed).
        ``anchors=[]`` emits an unanchored tuple, which no spout tuple waits for."""
        return self._collector.emit(values, anchors, stream, direct_task)

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        anchors: Tuple | Sequence[Tuple] | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> list[int]:
        """Emit to exactly ``task`` on a direct stream (anchored as ``emit``)."""
        return self.emit(values, anchors, stream, task)

    def ack(self, tup: Tuple) -> None:
        """Mark ``tup`` processed (once; later acks and fails of it are ignored)."""
        self._collector.ack(tup)

    def reset_timeout(self, tup: Tuple) -> None:
        """Start the message timeout of ``tup``'s spout tuples again, from now (Storm's
        ``OutputCollector.resetTimeout``): for work on a tuple that takes longer than
        ``message_timeout_secs``, called now and then while it goes on."""
        self._collector.reset_timeout(tup)

    def fail(self, tup: Tuple) -> None:
        """Fail ``tup``: its spout tuple fails at once (and may be replayed).  In a
        checkpointed topology a tuple no spout tracks (emitted without a ``msg_id``) rolls the
        run back to its last checkpoint instead, which replays it."""
        self._collector.fail(tup)


class BufferingBolt(Bolt):
    """Base of bolts that keep their input after ``process`` returns and deal with it later,
    on tick tuples (batches, windows: ``batching.py``, ``windowing.py``): the executor does
    not ack a tuple when ``process`` returns, and a run to completion is not over while
    ``holding``.  While ``_anchors`` is set (a batch, a window being processed), what the
    bolt emits is anchored to those tuples (``auto_anchor``)."""

    _anchors: Sequence[Tuple] | None = None

    @property
    def holding(self) -> bool:
        """Whether tuples are kept that a coming tick will deal with."""
        raise NotImplementedError

    def resolve_tick_secs(self, declared: float | None, config: Config) -> float | None:
        """The tick frequency this bolt runs with, given its declaration's
        (``Topology.bolt(..., tick_tuple_freq_secs=)``) and the topology's; raises ValueError
        saying what to change when the bolt cannot work with them (called when the topology
        is built)."""
        return config.tick_tuple_freq_secs if declared is None else declared

    def emit(
        self,
        values: Sequence[Any],
        anchors: Tuple | Sequence[Tuple] | None = None,
        stream: str = DEFAULT_STREAM,
        direct_task: int | None = None,
    ) -> list[int]:
        """Emit a tuple anchored to ``anchors`` (default: while a batch or a window is being
        processed, its tuples; otherwise the tuple being processed)."""
        if anchors is None and self._anchors is not None and self.auto_anchor:
            anchors = self._anchors
        return self._collector.emit(values, anchors, stream, direct_task)


class ReplayableSpout(Spout):
    """A spout over input it can read again from a recorded position: a log with offsets, a
    file, a list.  A checkpointed topology (one with a :class:`StatefulBolt`) takes only these:
    each checkpoint records every spout task's ``position()``, and after a failure each task
    is ``seek``-ed back to the position of the last complete checkpoint and reads on from
    there.  Tuples need no ``msg_id``: replay is by rollback, not per tuple."""

    def position(self) -> Any:
        """Where this task's next tuple comes from (a value the topology's serializer
        encodes): recorded by each checkpoint, between two calls of ``next_tuple``."""
        raise NotImplementedError(f"{type(self).__name__} must implement position()")

    def seek(self, position: Any) -> None:
        """Read on from ``position`` (one that ``position()`` returned); called after
        ``open`` when the run restores a checkpoint."""
        raise NotImplementedError(f"{type(self).__name__} must implement seek()")

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is complete: this task will never be sent back before
        the position it recorded (input before it may be released)."""


class StatefulBolt(Bolt):
    """A bolt whose state the topology checkpoints (Storm's ``IStatefulBolt``): keep what must
    survive a failure in the :class:`~brokerless.stream.state.KeyValueState` that
    ``init_state`` gets.  Its state is exactly-once: after a failure it is the state of the
    last complete checkpoint, and the spouts replay what came after it.

    In a checkpointed topology an exception from ``process`` (of any bolt) or from a spout is a
    task failure: the topology rolls back rather than drop or half-apply a tuple (Flink's
    rule), so catch the errors you mean to skip.
    """

    def init_state(self, state: KeyValueState) -> None:
        """Called once per task after ``prepare`` and before the first tuple, with the state
        of the checkpoint the run restored (empty on a fresh start)."""

    def pre_prepare(self, checkpoint_id: int) -> None:
        """Storm's ``prePrepare``: called just before the state is snapshotted for
        ``checkpoint_id`` (put what you buffered into the state, or emit it: it then belongs
        to this checkpoint)."""

    def pre_commit(self, checkpoint_id: int) -> None:
        """Storm's ``preCommit``: checkpoint ``checkpoint_id``, which this task prepared, is
        committed (the driver's commit point is passed: it holds whatever happens now); called
        just before ``notify_checkpoint_complete``."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is complete (its commit): e.g. make visible what a
        transactional sink wrote up to it."""

    def pre_rollback(self) -> None:
        """Storm's ``preRollback``: the task's state is being rolled back -- the run restores
        a checkpoint, or starts again from nothing after it lost its workers -- so what this
        task did after that checkpoint is undone (e.g. abort what a transactional sink wrote
        since its last commit).  Called after ``prepare``, before ``init_state`` gets the
        restored state; not on a run's first start from nothing."""
