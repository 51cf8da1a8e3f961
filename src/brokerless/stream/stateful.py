"""The executors of a checkpointed topology, and a worker's part in its checkpoints.

Theory of operation
-------------------
The protocol is in ``checkpoint.py``; this is the executors' side.  A worker of a
checkpointed topology runs these in place of the plain ones (the plain ones never see a
barrier, so a topology without stateful bolts pays nothing for checkpoints).

* :class:`CheckpointedSpoutExecutor` -- on ``[CHECKPOINT, n]`` (its worker pushes it when the
  driver says so) each task records its ``position()`` and sends :class:`~.protocol.Barrier`
  ``n`` to every task downstream, through the same outbox and the same path as its tuples, so
  the barrier is behind everything it emitted before.  After ``open``, a run that restores a
  checkpoint ``seek``-s each task to its recorded position.
* :class:`CheckpointedBoltExecutor` -- aligns each task's input.  A task's *channels* are the
  tasks of the components it subscribes to.  When barrier ``n`` arrives from a channel, what
  comes after it on that channel is held back until barrier ``n`` has come from every channel;
  then the task snapshots (a batching bolt processes its batches, a stateful task calls
  ``pre_prepare`` and serializes its :class:`~.state.KeyValueState`, a windowed one its
  windows, a stateful windowed one both), sends barrier ``n`` downstream and processes what it
  held back, in order.  A barrier of a newer checkpoint while aligning gives the older one up
  (declined); one of an older or finished checkpoint is dropped.  Holding back more than
  ``_MAX_HELD`` queues' worth of tuples declines the checkpoint too, so neither a slow channel
  nor a forged barrier makes a task hold input without bound.  On a restore, a stateful task
  gets the checkpoint's state in ``init_state`` (an empty one on a fresh start), after
  ``pre_rollback()`` when it is a rollback (a restore, or a later attempt of the run); a
  commit's news is ``pre_commit(n)`` then ``notify_checkpoint_complete(n)`` (Storm's
  ``IStatefulBolt`` hooks; ``pre_prepare(n)`` comes before the snapshot).
* Failures: an exception from a component (a bolt's ``process``, ``init_state`` and hooks, a
  spout's methods; all but ``close``/``cleanup``), a task that could not start, or a snapshot
  that cannot be made or restored is reported and raises :class:`~.executor.TaskFailed`: the
  executor ends, its worker is failed and the run rolls back.  So does a bolt's ``fail`` of a
  tuple no spout tracks (a replayable spout's tuples need no ``msg_id``): the rollback is how
  such a tuple is replayed, as a tracked one is by its spout.
* :class:`TaskCheckpoints` -- per worker: reads the snapshots its tasks restore, and stores
  the ones they take in a thread of its own (the executors only serialize: that is the pause a
  checkpoint costs them), keeping each task's acknowledgement for the run to collect.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from .batching import BatchingBolt
from .bolt_executor import BoltCollector, BoltExecutor
from .checkpoint import TaskAck, snapshot_path
from .component import Bolt, Component, ReplayableSpout, Spout, StatefulBolt
from .executor import Executor, TaskFailed, TaskState
from .host import Host
from .plan import TopologyPlan
from .protocol import BARRIER, CHECKPOINT, COMMIT, Barrier, encode
from .queues import BoundedQueue, Shutdown
from .spout_executor import SpoutExecutor
from .state import KeyValueState, decode_snapshot, encode_snapshot
from .storage import described, open_storage
from .tuple import Fields, Tuple
from .windowing import WindowedBolt

__all__ = ["CheckpointedBoltExecutor", "CheckpointedSpoutExecutor", "TaskCheckpoints"]

_C = TypeVar("_C", bound=Component)

#: An aligning task declines its checkpoint when it holds back more than this many queues'
#: worth (``executor_queue_size``) of tuples.
_MAX_HELD = 4
_WRITE_BATCH = 64


class TaskCheckpoints:
    """A worker's part in checkpoints: restoring its tasks from checkpoint ``restore`` (None:
    start afresh; ``rollback``: the tasks' state goes back -- to that checkpoint, or to empty
    in a later attempt of the run -- undoing what an earlier run or attempt did), storing
    their snapshots (a failure is reported with ``report(component, task, error)`` and
    declines the checkpoint), collecting their acknowledgements."""

    def __init__(
        self,
        plan: TopologyPlan,
        restore: int | None,
        rollback: bool,
        name: str,
        report: Callable[[str, int, BaseException], None],
    ) -> None:
        location = plan.config.checkpoint_dir
        if location is None:
            raise ValueError(
                f"topology {plan.name!r} has stateful bolts: its workers need a checkpoint "
                "location every one of them reaches (Config.checkpoint_dir)"
            )
        self.storage = open_storage(location)
        self.serializer = plan.config.serializer
        self.restore = restore
        self.rollback = rollback
        self._report = report
        self._task_component = plan.task_component
        self._queue = BoundedQueue()
        self._acks: list[TaskAck] = []
        self._lock = threading.Lock()
        self.thread = threading.Thread(
            target=self._write_loop, name=f"{name}:checkpoints", daemon=True
        )

    def load(self, component: str, task: int, stateful: bool, windows: bool = False) -> Any:
        """``task``'s snapshot in the checkpoint being restored (``decode_snapshot``)."""
        assert self.restore is not None
        data = self.storage.read(snapshot_path(self.restore, task))
        return decode_snapshot(
            self.serializer, data, component, task, self.restore, stateful, windows
        )

    def save(self, ack: TaskAck, snapshot: bytes | None) -> None:
        """Store ``snapshot`` (None: nothing to store) and then acknowledge ``ack``."""
        self._queue.push((ack, snapshot))

    def take_acks(self) -> list[TaskAck]:
        """The acknowledgements since the last call."""
        with self._lock:
            acks, self._acks = self._acks, []
        return acks

    def close(self) -> None:
        """Stop the writer (snapshots not stored yet are dropped: their checkpoint is
        abandoned)."""
        self._queue.close()

    def _write_loop(self) -> None:
        take = self._queue.take
        try:
            while True:
                for ack, snapshot in take(_WRITE_BATCH):
                    if snapshot is not None:
                        try:
                            self.storage.write(snapshot_path(ack.checkpoint, ack.task), snapshot)
                            ack = ack._replace(bytes=len(snapshot))
                        except Exception as exc:
                            self._report(self._task_component[ack.task], ack.task, exc)
                            why = f"storing its snapshot failed: {described(exc)}"
                            ack = ack._replace(error=why)
                    with self._lock:
                        self._acks.append(ack)
        except Shutdown:
            pass


def downstream_tasks(plan: TopologyPlan, component: str) -> tuple[int, ...]:
    """Every task that ``component``'s tasks may send tuples to: where barriers go."""
    return tuple(
        sorted(
            {
                task
                for (source, _), subscriptions in plan.subscribers.items()
                if source == component
                for subscription in subscriptions
                for task in plan.components[subscription.component].tasks
            }
        )
    )


class CheckpointingHost(Host, Protocol):
    """What a checkpointed executor needs of its worker: its part in checkpoints too."""

    checkpoints: TaskCheckpoints | None


class _Checkpointed(Executor[_C]):
    """What both checkpointed executors add: fail-fast component calls, restoring, barriers."""

    _closing = False
    worker: CheckpointingHost

    def _call_failed(self, state: TaskState[_C], method: str, error: Exception) -> None:
        """A component method raised: the task fails (except while closing, when there is
        nothing left to roll back)."""
        if self._closing:
            return None
        raise TaskFailed(f"task {state.task}: {method}() raised {error!r}") from error

    def close(self) -> None:
        self._closing = True
        super().close()

    def _start_checkpointing(self) -> TaskCheckpoints:
        """After the tasks are created: every one must have started; the barriers' way."""
        broken = [s.task for s in self.states.values() if s.broken]
        if broken:
            raise TaskFailed(f"task(s) {broken} could not start (see their errors)")
        self._downstream = downstream_tasks(self.worker.plan, self.component)
        checkpoints = self.worker.checkpoints
        assert checkpoints is not None
        return checkpoints

    def _restore(
        self, checkpoints: TaskCheckpoints, task: int, stateful: bool, windows: bool = False
    ) -> Any:
        try:
            return checkpoints.load(self.component, task, stateful, windows)
        except Exception as exc:
            self.report(task, exc)
            raise TaskFailed(
                f"task {task} cannot restore checkpoint {checkpoints.restore}: {described(exc)}"
            ) from exc

    def _snapshot(
        self,
        checkpoints: TaskCheckpoints,
        task: int,
        checkpoint: int,
        state: Any,
        windows: Any = None,
    ) -> bytes:
        try:
            return encode_snapshot(
                checkpoints.serializer, self.component, task, checkpoint, state, windows
            )
        except Exception as exc:
            self.report(task, exc)
            raise TaskFailed(
                f"task {task}: its state cannot be serialized for checkpoint {checkpoint}: {exc!r}"
            ) from exc

    def _send_barrier(self, task: int, checkpoint: int) -> None:
        """Barrier ``checkpoint`` from ``task`` to every task downstream, behind its tuples."""
        local = self.worker.exchange.local_queues
        outbox = self.outbox
        barrier = Barrier(task, checkpoint)
        payload = None
        for target in self._downstream:
            queue = local.get(target)
            if queue is not None:
                outbox.local(queue, (target, barrier, None), True)
            else:
                if payload is None:
                    payload = encode([BARRIER, task, checkpoint])
                outbox.remote(target, payload, True)


class CheckpointedSpoutExecutor(_Checkpointed[Spout], SpoutExecutor):
    def open(self) -> None:
        super().open()
        self._checkpoints = checkpoints = self._start_checkpointing()
        if checkpoints.restore is not None:
            for state in self._active:
                spout = state.component
                assert isinstance(spout, ReplayableSpout)  # checked when the plan was built
                self._call(state, spout.seek, self._restore(checkpoints, state.task, False))

    def _settle(self, message: Sequence[Any]) -> None:
        kind = message[0]
        if kind == CHECKPOINT:
            self._checkpoint(message[1])
        elif kind == COMMIT:
            for state in self._active:
                self._call(state, _replayable(state).notify_checkpoint_complete, message[1])
        else:
            super()._settle(message)

    def _checkpoint(self, checkpoint: int) -> None:
        """Record each task's position and send the barrier after what it emitted."""
        checkpoints = self._checkpoints
        for state in self._active:
            started = time.perf_counter_ns()
            position = self._call(state, _replayable(state).position)
            snapshot = self._snapshot(checkpoints, state.task, checkpoint, position)
            pause = time.perf_counter_ns() - started
            checkpoints.save(TaskAck(checkpoint, state.task, pause_ns=pause), snapshot)
            self._send_barrier(state.task, checkpoint)


def _replayable(state: TaskState[Spout]) -> ReplayableSpout:
    spout = state.component
    assert isinstance(spout, ReplayableSpout)  # a checkpointed topology's spouts are (its plan)
    return spout


class _Alignment:
    """One bolt task's progress through the checkpoints (see the module doc)."""

    __slots__ = ("arrived", "checkpoint", "done", "held", "started", "state")

    def __init__(self, state: KeyValueState | None) -> None:
        self.state = state  # a stateful task's state
        self.arrived: set[int] = set()  # channels whose barrier ``checkpoint`` came
        self.held: list[Any] = []  # what came after it on them
        self.checkpoint = 0  # the one being aligned, while ``arrived``
        self.started = 0  # when its first barrier came (ns)
        self.done = 0  # the newest one this task finished or gave up


_process = BoltExecutor._execute  # what a tuple not held back gets (cheaper than super())


class CheckpointedBoltCollector(BoltCollector):
    def fail(self, tup: Tuple) -> None:
        """A tuple no spout tracks is replayed by rolling back (see the module doc)."""
        if not tup._anchors and not tup._settled:
            raise TaskFailed(
                f"task {self.state.task}: fail() of a tuple no spout tracks (emitted without "
                "a msg_id): the run rolls back to replay it"
            )
        super().fail(tup)


class CheckpointedBoltExecutor(_Checkpointed[Bolt], BoltExecutor):
    collector = CheckpointedBoltCollector

    def open(self) -> None:
        super().open()
        self._checkpoints = checkpoints = self._start_checkpointing()
        plan = self.worker.plan
        spec = plan.components[self.component]
        self._channels = len({t for source, _ in spec.inputs for t in plan.component_tasks[source]})
        self._max_held = _MAX_HELD * self.config.executor_queue_size
        self._alignments: dict[int, _Alignment] = {}
        for task, state in self.states.items():
            kv = None
            bolt = state.component
            windows = None
            if isinstance(bolt, StatefulBolt):
                if checkpoints.rollback:
                    self._call(state, bolt.pre_rollback)
                if checkpoints.restore is None:
                    kv = KeyValueState()
                elif isinstance(bolt, WindowedBolt):  # its state and its windows
                    kv, windows = self._restore(checkpoints, task, True, True)
                else:
                    kv = self._restore(checkpoints, task, True)
                self._call(state, bolt.init_state, kv)
            elif isinstance(bolt, WindowedBolt) and checkpoints.restore is not None:
                windows = self._restore(checkpoints, task, False)
            if windows is not None and isinstance(bolt, WindowedBolt):
                self._call(state, bolt.restore_windows, windows, self._fields)
            self._alignments[task] = _Alignment(kv)

    def _fields(self, component: str, stream: str) -> Fields:
        return self.worker.plan.components[component].schemas[stream]

    def _execute(self, state: TaskState[Bolt], tup: Any) -> None:
        align = self._alignments[state.task]
        if tup.__class__ is not Tuple:
            self._control(align, state, tup)
        elif align.arrived and tup.task in align.arrived:
            align.held.append(tup)
            if len(align.held) > self._max_held:
                self._give_up(
                    align,
                    state,
                    f"alignment held back over {self._max_held} tuples ({_MAX_HELD} x "
                    "executor_queue_size) waiting for the barrier from every input task: a "
                    "larger executor_queue_size lets input tasks run further apart",
                )
        else:
            _process(self, state, tup)

    def _process_failed(self, state: TaskState[Bolt], tup: Tuple, error: Exception) -> None:
        self.report(state.task, error)
        raise TaskFailed(f"task {state.task}: process() raised {error!r}") from error

    def _control(self, align: _Alignment, state: TaskState[Bolt], item: Any) -> None:
        if item.__class__ is not Barrier:  # [COMMIT, n], once for the executor's tasks
            for other in self.states.values():
                bolt = other.component
                if self._alignments[other.task].state is not None:
                    assert isinstance(bolt, StatefulBolt)  # it has a state: it is one
                    self._call(other, bolt.pre_commit, item[1])
                    self._call(other, bolt.notify_checkpoint_complete, item[1])
            return
        checkpoint = item.checkpoint
        if checkpoint <= align.done:
            return  # of a checkpoint this task finished or gave up
        if align.arrived and checkpoint != align.checkpoint:
            if checkpoint < align.checkpoint:
                return
            self._give_up(align, state, f"barrier {checkpoint} came first")
        if not align.arrived:
            align.checkpoint = checkpoint
            align.started = time.perf_counter_ns()
        align.arrived.add(item.task)
        if len(align.arrived) >= self._channels:
            self._aligned(align, state)

    def _aligned(self, align: _Alignment, state: TaskState[Bolt]) -> None:
        """Barrier ``align.checkpoint`` came from every channel: snapshot, pass it on, go on."""
        checkpoint = align.checkpoint
        alignment = time.perf_counter_ns() - align.started
        align.arrived.clear()
        align.done = checkpoint
        checkpoints = self._checkpoints
        ack = TaskAck(checkpoint, state.task, alignment_ns=alignment)
        snapshot = None
        bolt = state.component
        if isinstance(bolt, BatchingBolt):  # its batches belong to this checkpoint
            self._call(state, bolt.process_batches)  # (its emits go before the barrier)
        if align.state is not None:
            started = time.perf_counter_ns()
            assert isinstance(bolt, StatefulBolt)  # it has a state: it is one
            self._call(state, bolt.pre_prepare, checkpoint)
            windows = bolt.windows_snapshot() if isinstance(bolt, WindowedBolt) else None
            snapshot = self._snapshot(checkpoints, state.task, checkpoint, align.state, windows)
            ack = ack._replace(pause_ns=time.perf_counter_ns() - started)
        elif isinstance(bolt, WindowedBolt):
            started = time.perf_counter_ns()
            windows = bolt.windows_snapshot()
            snapshot = self._snapshot(checkpoints, state.task, checkpoint, windows)
            ack = ack._replace(pause_ns=time.perf_counter_ns() - started)
        checkpoints.save(ack, snapshot)
        self._send_barrier(state.task, checkpoint)
        self._release(align, state)

    def _give_up(self, align: _Alignment, state: TaskState[Bolt], reason: str) -> None:
        """Decline the checkpoint being aligned and process what was held back."""
        align.arrived.clear()
        align.done = align.checkpoint
        self._checkpoints.save(TaskAck(align.checkpoint, state.task, error=reason), None)
        self._release(align, state)

    def _release(self, align: _Alignment, state: TaskState[Bolt]) -> None:
        held = align.held
        if held:
            align.held = []
            for tup in held:
                self._execute(state, tup)
