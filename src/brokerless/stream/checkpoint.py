"""Checkpoints of a topology with stateful bolts: aligned barriers, two-phase commit, rollback.

Theory of operation
-------------------
The design is Flink's asynchronous barrier snapshots (Carbone et al., 2015) with Storm's
names: a topology with a :class:`~brokerless.stream.component.StatefulBolt` is
*checkpointed*; its spouts must be replayable, and it may have no cycle (a barrier would wait
for itself).

*Barriers.*  The driver's :class:`CheckpointCoordinator` triggers checkpoint ``n`` every
``checkpoint_interval_secs``, one at a time.  Each spout task records its ``position()`` and
sends barrier ``n`` to every task downstream of it, behind every tuple it emitted before.  A
bolt task waits for barrier ``n`` from each task upstream of it (*alignment*): what comes
from an upstream task whose barrier has arrived is held back until all have; then the task
snapshots its state, sends barrier ``n`` downstream and goes on with what it held back.  What
one task sends another arrives in order (``queues.py``: one sender's items to one executor
always use the same part of its queue), so the snapshots hold exactly the effects of the
input before the spouts' positions.  The executors' side is ``stateful.py``.

*Prepare.*  A task serializes its snapshot in its own thread (the pause a checkpoint costs
it); its worker's writer thread stores it and only then acknowledges ``n`` to the
coordinator.  Tasks without state acknowledge as the barrier passes.

*Commit.*  When every spout and bolt task has acknowledged ``n``, the coordinator writes
``chk-n/_COMPLETED`` -- the commit point: a checkpoint without it does not exist; one whose
marker is damaged stops a run from starting on it -- deletes the older ones and tells every
task (``notify_checkpoint_complete``).  A checkpoint that a task declines (storing failed,
or alignment held back too much) or that is not complete within ``checkpoint_timeout_secs``
is abandoned; the next has a higher id, and a task still aligning an older one when a newer
barrier comes gives the older up.  More than ``tolerable_failed_checkpoints`` abandoned in a
row (:meth:`CheckpointCoordinator.failing`; the error names the tasks that never answered)
make the run treat its workers as lost: a task hung in ``process`` never answers again, and
only a rollback moves such a run on.

*Rollback.*  A run that loses a worker (its process died, a task failed, ``kill_worker``,
its checkpoints kept failing)
stops every worker and starts them all again from the last complete checkpoint: spouts
``seek`` to its positions, stateful bolts get its state in ``init_state``; ids go on
increasing.  A run started on a location that holds a complete checkpoint resumes from it
(the topology must have the same components and tasks).

What users get: exactly-once state in stateful bolts.  What other parts emit is at-least-once
(a rollback replays it), so a sink that needs exactly-once must be idempotent (keyed, e.g., by
the spout's offset) or transactional (commit in ``notify_checkpoint_complete``).

Storage (``storage.py``) holds ``chk-<id>/task-<task>`` for every spout task and stateful bolt
task (``state.py``) and ``chk-<id>/_COMPLETED``, JSON: the id, the layout (component -> task
ids) and each task's snapshot size.
"""

from __future__ import annotations

import enum
import json
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .component import ComponentKind
from .plan import TopologyPlan
from .serializer import MsgpackSerializer, Serializer
from .state import KeyValueState, decode_snapshot
from .storage import CheckpointStorage, described, open_storage
from .topology import TopologyError

__all__ = [
    "CheckpointCoordinator",
    "CheckpointRecord",
    "CheckpointStatistics",
    "TaskAck",
    "latest_checkpoint",
    "read_state",
]

log = logging.getLogger("brokerless.stream")

_COMPLETED = "_COMPLETED"
_NAME = re.compile(r"chk-(\d+)")
_HISTORY = 100  # completed checkpoints whose figures the coordinator keeps


def checkpoint_name(checkpoint: int) -> str:
    return f"chk-{checkpoint:010d}"


def snapshot_path(checkpoint: int, task: int) -> str:
    return f"{checkpoint_name(checkpoint)}/task-{task}"


class Step(enum.Enum):
    """What the run tells every worker about a checkpoint: take it (the spouts inject its
    barriers), or it is complete (commit).  The value is the control channel's command."""

    CHECKPOINT = "checkpoint"
    COMMIT = "commit"


class TaskAck(NamedTuple):
    """A task's answer to checkpoint ``checkpoint``: stored (``error`` None) or declined."""

    checkpoint: int
    task: int
    bytes: int = 0  # the snapshot's size
    alignment_ns: int = 0  # from the first barrier to the last
    pause_ns: int = 0  # the task's own time spent on the snapshot
    error: str | None = None


@dataclass(frozen=True)
class CheckpointRecord:
    """The figures of one completed checkpoint."""

    id: int
    duration_s: float  # trigger to commit
    bytes: int  # all its snapshots
    alignment_ms_max: float  # the longest a task held input back
    pause_ms_max: float  # the longest a task spent snapshotting
    pause_ms_total: float


@dataclass
class CheckpointStatistics:
    completed: int = 0
    aborted: int = 0
    latest: int | None = None  # the last complete checkpoint
    restored_from: int | None = None  # what the current workers started from
    history: list[CheckpointRecord] = field(default_factory=list)  # the last 100
    last_failure: str | None = None  # why the last abandoned checkpoint was abandoned
    #: checkpoints abandoned since the last one completed or the workers started again
    failed_in_a_row: int = 0


def _layout(plan: TopologyPlan) -> dict[str, list[int]]:
    return {
        name: list(c.tasks)
        for name, c in plan.components.items()
        if c.kind is not ComponentKind.ACKER
    }


def _ids(storage: CheckpointStorage) -> list[int]:
    return sorted(int(m[1]) for m in map(_NAME.fullmatch, storage.list()) if m)


def latest_checkpoint(storage: CheckpointStorage) -> tuple[int, dict[str, Any]] | None:
    """The last complete checkpoint in ``storage`` and its metadata, or None.  A damaged
    commit marker is an error: skipping it would start a run from the beginning, and delete
    the checkpoint as a leftover."""
    for checkpoint in reversed(_ids(storage)):
        path = f"{checkpoint_name(checkpoint)}/{_COMPLETED}"
        try:
            data = storage.read(path)
        except FileNotFoundError:
            continue  # prepared, never committed
        try:
            metadata = json.loads(data)
            if not isinstance(metadata, dict):
                raise ValueError(f"a JSON {type(metadata).__name__}, not an object")
        except ValueError as exc:
            raise ValueError(
                f"checkpoint {checkpoint} at {storage.url} is damaged: {path} is not what a "
                f"commit writes ({exc}); put the file back from a copy, or remove "
                f"{checkpoint_name(checkpoint)} to start from the checkpoint before it (from "
                "the beginning if there is none)"
            ) from None
        return checkpoint, metadata
    return None


def read_state(
    location: str, component: str, serializer: Serializer | None = None
) -> dict[int, KeyValueState]:
    """The state of each task of stateful bolt ``component`` in the last complete checkpoint
    at ``location`` (task id -> state); ``serializer`` is the topology's (default msgpack)."""
    storage = open_storage(location)
    found = latest_checkpoint(storage)
    if found is None:
        raise FileNotFoundError(f"no complete checkpoint at {location}")
    checkpoint, metadata = found
    tasks = metadata["layout"].get(component)
    if tasks is None:
        raise KeyError(f"checkpoint {checkpoint} at {location} has no component {component!r}")
    serializer = serializer or MsgpackSerializer()
    return {
        task: decode_snapshot(
            serializer,
            storage.read(snapshot_path(checkpoint, task)),
            component,
            task,
            checkpoint,
            stateful=True,
        )
        for task in tasks
    }


@dataclass
class _InFlight:
    id: int
    started: float
    waiting: set[int]
    acks: list[TaskAck] = field(default_factory=list)


class CheckpointCoordinator:
    """The driver's side (see the module doc): when to trigger, what is acknowledged, the
    commit.  Not thread-safe: the run calls it from one thread at a time."""

    def __init__(self, plan: TopologyPlan, storage: CheckpointStorage) -> None:
        config = plan.config
        self.storage = storage
        self.interval = config.checkpoint_interval_secs
        self.timeout = config.checkpoint_timeout_secs
        self.tolerable = config.tolerable_failed_checkpoints
        self._name = plan.name
        self._task_component = plan.task_component
        self._layout = _layout(plan)
        self._tasks = frozenset(
            t
            for c in plan.components.values()
            if c.kind is not ComponentKind.ACKER
            for t in c.tasks
        )
        ids = _ids(storage)
        found = latest_checkpoint(storage)
        self.latest: int | None = None
        if found is not None:
            self.latest, metadata = found
            if metadata.get("layout") != self._layout:
                raise TopologyError(
                    f"topology {plan.name!r}: the checkpoint at {storage.url} was taken by a "
                    f"topology of other components or tasks ({metadata.get('layout')}; this "
                    f"one is {self._layout}): give this topology a checkpoint location of its "
                    "own, or empty that one"
                )
        for leftover in ids:  # prepared by a run that ended before their commit
            if self.latest is None or leftover > self.latest:
                storage.delete(checkpoint_name(leftover))
        self._next = max(ids, default=0) + 1
        self._in_flight: _InFlight | None = None
        self._last_trigger = time.monotonic()
        self._requested = False
        self.stats = CheckpointStatistics(latest=self.latest, restored_from=self.latest)

    def due(self, now: float) -> bool:
        return self._in_flight is None and (
            self._requested or now - self._last_trigger >= self.interval
        )

    def trigger(self, now: float) -> int:
        """Start the next checkpoint; returns its id (the run tells the spouts)."""
        checkpoint = self._next
        self._next += 1
        self._in_flight = _InFlight(checkpoint, now, set(self._tasks))
        self._last_trigger = now
        self._requested = False
        return checkpoint

    def request(self) -> int:
        """Ask for a checkpoint as soon as possible; returns the id that will hold everything
        done so far (a later one may complete instead, if it is abandoned)."""
        self._requested = True
        return self._next if self._in_flight is None else self._next + 1

    def acknowledge(self, ack: TaskAck) -> int | None:
        """Take one task's answer; returns the checkpoint's id when this one committed it."""
        current = self._in_flight
        if current is None or ack.checkpoint != current.id or ack.task not in current.waiting:
            return None  # late, from an abandoned checkpoint or an earlier attempt
        if ack.error is not None:
            self._abandon(f"task {ack.task} declined it: {ack.error}")
            return None
        current.waiting.discard(ack.task)
        current.acks.append(ack)
        if current.waiting:
            return None
        try:
            self._commit(current)
        except Exception as exc:
            self._abandon(f"writing its commit failed: {described(exc)}")
            return None
        return current.id

    def expire(self, now: float) -> None:
        """Abandon the checkpoint in flight if it has taken longer than the timeout."""
        current = self._in_flight
        if current is not None and now - current.started > self.timeout:
            self._abandon(
                f"not complete after {self.timeout:g} s (checkpoint_timeout_secs); never "
                f"answered: {self.describe(current.waiting)}"
            )

    def describe(self, tasks: Iterable[int]) -> str:
        """``tasks`` by component, e.g. ``'split' task 3, 'count' tasks 5, 6``."""
        by_component: dict[str, list[int]] = {}
        for task in sorted(tasks):
            by_component.setdefault(self._task_component[task], []).append(task)
        return ", ".join(
            f"{name!r} task{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}"
            for name, ids in by_component.items()
        )

    def failing(self) -> str | None:
        """Why the current workers are to be treated as lost: more checkpoints in a row than
        ``tolerable_failed_checkpoints`` were abandoned (a task hung, or a worker whose
        checkpoints never complete); None while they are not."""
        failed = self.stats.failed_in_a_row
        if self.tolerable is None or failed <= self.tolerable:
            return None
        return (
            f"{failed} checkpoints in a row failed (tolerable_failed_checkpoints="
            f"{self.tolerable}), the last: {self.stats.last_failure} -- a task hung in a call "
            "is reported in errors() with its stack; checkpoints that are only slow need a "
            "longer checkpoint_timeout_secs"
        )

    def restart(self) -> int | None:
        """The run is starting its workers again: forget the checkpoint in flight; returns the
        checkpoint they restore (None: from the start)."""
        if self._in_flight is not None:
            self._abandon("the run restarted its workers")
        self.stats.failed_in_a_row = 0  # the new workers get the whole tolerance
        self._last_trigger = time.monotonic()
        self.stats.restored_from = self.latest
        return self.latest

    def _abandon(self, why: str) -> None:
        assert self._in_flight is not None
        self.stats.last_failure = why = f"checkpoint {self._in_flight.id}: {why}"
        log.warning("%s: %s", self._name, why)
        self._in_flight = None
        self.stats.aborted += 1
        self.stats.failed_in_a_row += 1

    def _commit(self, current: _InFlight) -> None:
        sizes = {ack.task: ack.bytes for ack in current.acks}
        metadata = {
            "checkpoint": current.id,
            "topology": self._name,
            "layout": self._layout,
            "bytes": sizes,
            "completed_at": time.time(),
        }
        self.storage.write(
            f"{checkpoint_name(current.id)}/{_COMPLETED}", json.dumps(metadata).encode()
        )
        self._in_flight = None
        self.latest = current.id
        for older in _ids(self.storage):
            if older < current.id:
                try:
                    self.storage.delete(checkpoint_name(older))
                except Exception as exc:  # it is no checkpoint any more: only space is lost
                    log.warning("%s: deleting checkpoint %d failed: %r", self._name, older, exc)
        acks = current.acks
        stats = self.stats
        stats.completed += 1
        stats.failed_in_a_row = 0
        stats.latest = current.id
        stats.history.append(
            CheckpointRecord(
                id=current.id,
                duration_s=time.monotonic() - current.started,
                bytes=sum(sizes.values()),
                alignment_ms_max=max(a.alignment_ns for a in acks) / 1e6,
                pause_ms_max=max(a.pause_ns for a in acks) / 1e6,
                pause_ms_total=sum(a.pause_ns for a in acks) / 1e6,
            )
        )
        del stats.history[:-_HISTORY]
