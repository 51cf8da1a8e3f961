"""A worker: the executors placed on it, one transfer queue, one sender thread, one virtual
port.

Theory of operation
-------------------
Tasks are placed on workers by the deterministic assignment (``assignment.py``); every worker
keeps the whole task -> worker map.  An emit (``emit.py``) gives each target task its copy,
through the emitting executor's :class:`~.transfer.Outbox`, flushed once per batch:

* a task **in this worker** gets the tuple object itself on its executor's queue -- no
  serialization -- waiting for room when the queue is full;
* a task **in another worker** gets ``(worker, task id, payload)`` on this worker's single
  transfer queue, which the worker's *link* (``link.py``: one sender and one receiver
  thread) sends as batches to the other workers, whose links check each pair
  (``inbound.py``) and route it to the task's executor queue; task id 0 is the worker itself
  (credits).

Back pressure without deadlock
------------------------------
Every bolt executor's queue holds at most ``executor_queue_size`` tuples. A local emitter waits
for room in the queue itself (an emitter also holds what it emitted during its current batch,
until it flushes) -- or, when the worker runs its executors in one shared thread (the default,
``shared_thread.py``), is not run again until there is room. A remote emitter cannot see that
queue, and the receiver thread must never wait for one executor -- it carries everyone's
traffic, including the acks that let other executors make progress, so one full queue would
stall unrelated flows and can close a cycle of waits between workers. So remote tuples use
*credits* (as in Flink's credit-based flow control): each bolt executor's bound is split into a
window per other worker (``queue size // workers``) and a local share (the rest). A worker may
have at most one window of tuples in flight to each remote executor: the emitter's flush waits
for credits *before* queueing tuples for the sender, the receiver pushes it without waiting
(its room is reserved), and the executor returns credits to the sender's worker in batches of
half a window as it consumes them. Credits, acks and other control messages never wait
anywhere.

Waits therefore only go downstream (an emitter waits for its consumer, through a queue or
credits), never through the sender or receiver thread; in a topology without cycles that
cannot form a loop.  On an edge inside a cycle of bolts (``TopologyPlan.cycle_edges``) puts
never wait and need no credit -- the cycle's own termination bounds it -- so cycles cannot
deadlock either.

Completion detection (``activity``) reads counters bumped only after work is done: items
queued (``BoundedQueue.puts``) vs. handled, pairs sent vs. received; see ``run.py``.

The metrics' time windows (``metrics.py``) take a thread of the worker's own, which marks its
executors' counters every 30 s (:class:`~.metrics.MetricsRoller`, started and stopped with the
worker), so the executors do nothing for them per tuple.

Checkpoints
-----------
A worker of a checkpointed topology runs the executors of ``stateful.py`` and a writer thread
(:class:`~.stateful.TaskCheckpoints`); the run tells it when to ``checkpoint`` and
``commit``, collects its tasks' acknowledgements, and reads ``failure``: set when an executor
ended on a task failure or a crash, it means the run must roll back (``checkpoint.py``).
When a checkpoint starts, an executor thread still in the same call of a component's code as
when the previous one started held that one up (its task could not take part): the worker
reports the call and its stack as an error, once (``_report_held_checkpoints``) -- the run
sees only that its checkpoints fail, and in multi-process and Spark mode cannot see the
stack.  This looks at the threads once per checkpoint, nothing per tuple.
"""

from __future__ import annotations

import functools
import logging
import sys
import sysconfig
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from .acker_executor import AckerExecutor
from .assignment import Assignment
from .bolt_executor import BoltExecutor
from .component import ComponentKind
from .errorlog import (
    LOG_INTERVAL,
    LOG_PER_INTERVAL,
    MAX_TRACEBACK,
    ErrorLog,
    ErrorReport,
    LogThrottle,
    clip,
    error_report,
)
from .executor import Executor, TaskState
from .inbound import Inbound
from .link import NO_LINK, Link
from .messaging import Messaging
from .metrics import MetricsRoller
from .plan import TopologyPlan
from .protocol import CHECKPOINT, COMMIT, HEADER_ROOM, task_frame
from .queues import BoundedQueue, Shutdown
from .shared_thread import SharedThread
from .spout_executor import SpoutExecutor
from .stateful import CheckpointedBoltExecutor, CheckpointedSpoutExecutor, TaskCheckpoints
from .transfer import Credits, Exchange

log = logging.getLogger("brokerless.stream")

_OWN = str(Path(__file__).resolve().parent.parent)  # brokerless' own code
_STDLIB = str(Path(sysconfig.get_paths()["stdlib"]).resolve())


@functools.lru_cache(maxsize=4096)
def _whose(filename: str) -> str:
    """Whose code a file of code is: ``"own"`` (brokerless'), ``"stdlib"`` or ``"component"``."""
    where = str(Path(filename).resolve())
    return (
        "own" if where.startswith(_OWN) else "stdlib" if where.startswith(_STDLIB) else "component"
    )


def component_call(frame: FrameType | None) -> tuple[FrameType, TaskState[Any]] | None:
    """The call of a component's code (code from neither brokerless nor the standard library)
    that a thread whose innermost frame is ``frame`` is in -- its outermost frame from a
    component -- and the task it was made for; None if the thread is in brokerless' own code,
    even if called by a component (waiting to emit, say: held up, not holding up)."""
    call = None
    while frame is not None:
        whose = _whose(frame.f_code.co_filename)
        if whose == "own":
            if call is None:
                return None  # in brokerless' code, not in a component's
            state = frame.f_locals.get("state")  # an executor's call of a component method
            if isinstance(state, TaskState):
                return call, state
        elif whose == "component":
            call = frame
        frame = frame.f_back
    return None


_EXECUTORS: dict[ComponentKind, type[Executor[Any]]] = {
    ComponentKind.SPOUT: SpoutExecutor,
    ComponentKind.BOLT: BoltExecutor,
    ComponentKind.ACKER: AckerExecutor,
}
_CHECKPOINTED_EXECUTORS: dict[ComponentKind, type[Executor[Any]]] = {
    ComponentKind.SPOUT: CheckpointedSpoutExecutor,
    ComponentKind.BOLT: CheckpointedBoltExecutor,
    ComponentKind.ACKER: AckerExecutor,
}


@dataclass(frozen=True)
class Activity:
    """A worker's progress counters, for completion detection."""

    spouts_done: bool
    enqueued: int
    dequeued: int
    sent: int
    received: int


class Worker:
    """The executors of one worker and the transfer machinery between it and the others."""

    def __init__(
        self,
        plan: TopologyPlan,
        assignment: Assignment,
        index: int,
        messaging: Messaging | None = None,
        *,
        capture: bool = False,
        restore: int | None = None,
        attempt: int = 1,
    ) -> None:
        """``restore``: the checkpoint a checkpointed topology's tasks start from (None: from
        the start); ``attempt``: the run's set of workers this worker belongs to (a later one
        is a rollback)."""
        n = assignment.num_workers
        if n > 1 and messaging is None:
            raise ValueError("a worker of a multi-worker topology needs a messaging")
        self.plan = plan
        self.index = index
        self.num_workers = n
        self.messaging = messaging
        self.tasks = assignment.tasks(index)
        self.task_worker = assignment.task_worker
        self.task_executor = {t: e.id for e in plan.executors for t in e.tasks}
        self.capture: list[tuple[str, str, tuple[Any, ...]]] | None = [] if capture else None
        #: The latest error reports of each of its tasks, numbered; ``total`` counts them all.
        self.errors = ErrorLog()
        self._log_errors = LogThrottle()
        #: Why the worker failed (a task failed, an executor crashed), or None.
        self.failure: str | None = None
        self.checkpoints = (
            TaskCheckpoints(
                plan,
                restore,
                restore is not None or attempt > 1,
                f"{plan.name}:worker{index}",
                self.record_error,
            )
            if plan.checkpointed
            else None
        )
        kinds = _CHECKPOINTED_EXECUTORS if plan.checkpointed else _EXECUTORS
        size = plan.config.executor_queue_size
        self.credit_window = max(1, size // n)
        local_share = max(1, size - (n - 1) * self.credit_window)
        bolt_bound = local_share + (n - 1) * self.credit_window
        self.local_queues: dict[int, BoundedQueue] = {}
        #: what a shared executor thread sleeps on (None: a thread per executor)
        self._bell = threading.Event() if plan.config.executor_threads == "shared" else None
        self.credits = Credits(
            self.credit_window,
            [
                e.id
                for e in plan.executors
                if plan.components[e.component].kind is ComponentKind.BOLT
                and assignment.executor_worker[e.id] != index
            ],
            self._bell,
        )
        self.transfer = BoundedQueue()
        self.frames = {t: task_frame(t) for t in plan.task_component}
        self.exchange = Exchange(
            self.local_queues,
            self.task_worker,
            self.task_executor,
            self.frames,
            self.transfer,
            self.credits,
        )
        self.executors: list[Executor[Any]] = []
        for executor_id in assignment.executors(index):
            spec = plan.executors[executor_id]
            kind = plan.components[spec.component].kind
            bolt = kind is ComponentKind.BOLT
            queue = BoundedQueue(local_share if bolt else None, self._bell)
            self.local_queues.update(dict.fromkeys(spec.tasks, queue))
            self.executors.append(kinds[kind](self, spec, queue, bolt_bound if bolt else None))
        self.inbound = Inbound(
            plan, self.task_worker, self.executors, self.credits.executors, self.credit_window
        )
        #: the sender and receiver threads (None: a worker alone, with no messaging)
        self.link: Link | None = None
        if messaging is not None:
            self.link = Link(
                index, messaging, self.transfer, self.inbound, self.credits, self.record_error
            )
        self._started = False
        self._stopped = False
        self._threads: list[threading.Thread] = []
        self._roller: MetricsRoller | None = None
        #: the threads that run the executors (where a hung component hangs)
        self.executor_threads: list[threading.Thread] = []
        #: thread id -> the component call it was in at the last checkpoint, since when, and
        #: whether it was reported (:meth:`_report_held_checkpoints`)
        self._calls: dict[int, tuple[FrameType, float, bool]] = {}
        self._previous = 0  # the checkpoint started before

    def __repr__(self) -> str:
        return (
            f"<Worker {self.index}/{self.num_workers} of {self.plan.name!r}: "
            f"{len(self.executors)} executors, {self.transfer.depth} to send>"
        )

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._started

    def bind(self) -> str:
        """Open this worker's virtual port; returns its endpoint ('' with a single worker)."""
        if self.messaging is None:
            return ""
        return self.messaging.bind(self.plan.config.max_tuple_bytes + HEADER_ROOM)

    def start(self, endpoints: list[str]) -> None:
        """Connect to the other workers (``endpoints`` indexed by worker) and run."""
        if self._started:
            raise RuntimeError("worker already started")
        self._started = True
        name = f"{self.plan.name}:worker{self.index}"
        if self.link is not None:
            self.link.messaging.connect(endpoints)
            self._threads += self.link.threads(name)
        if self.checkpoints is not None:
            self._threads.append(self.checkpoints.thread)
        if self._bell is not None:
            self.executor_threads = [SharedThread(name, self.executors, self._bell).thread]
        else:  # consumers first, spouts last
            ordered = sorted(self.executors, key=lambda e: e.kind is ComponentKind.SPOUT)
            self.executor_threads = [e.own_thread() for e in ordered]
        self._threads += self.executor_threads
        self._roller = MetricsRoller(name, [e.metrics for e in self.executors])
        self._threads.append(self._roller.thread)
        for thread in self._threads:
            thread.start()

    def refresh(self, endpoints: list[str]) -> None:
        """The workers' endpoints changed: reconnect (done by the sender thread, in order)."""
        self.transfer.push((None, None, list(endpoints)))

    def stop(self, timeout: float = 5.0) -> list[str]:
        """Stop every thread (tuples still queued are dropped); returns the names of threads
        that did not end within ``timeout`` (stuck in user code)."""
        if self._stopped:
            return []
        self._stopped = True
        if self.link is not None:
            self.link.stopping = True
        for executor in self.executors:
            executor.stopping = True
        for queue in {id(q): q for q in self.local_queues.values()}.values():
            queue.close()
        self.credits.close()
        self.transfer.close()
        if self.checkpoints is not None:
            self.checkpoints.close()
        if self._roller is not None:
            self._roller.close()
        if self.messaging is not None:
            self.messaging.interrupt()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        hung = [t.name for t in self._threads if t.is_alive()]
        if hung:
            log.warning("worker %d: threads still running after stop: %s", self.index, hung)
        if self.messaging is not None and not any(t.is_alive() for t in self._threads[:2]):
            self.messaging.close()
        return hung

    # -- checkpoints (see ``checkpoint.py``) ------------------------------------------------

    def set_active(self, active: bool) -> None:
        """Whether the spouts here emit (a run's ``deactivate``/``activate``; any thread):
        each spout executor sees it at its next step."""
        for executor in self.executors:
            if isinstance(executor, SpoutExecutor):
                executor.wanted_active = active

    def checkpoint(self, checkpoint: int) -> None:
        """Start checkpoint ``checkpoint``: the spouts here inject its barriers (and report a
        component call that held up the previous one: :meth:`_report_held_checkpoints`)."""
        self._report_held_checkpoints(checkpoint)
        self._tell([CHECKPOINT, checkpoint], stateful_bolts=False)

    def component_stacks(self) -> list[str]:
        """The stack of each executor thread that is in a component's code: where a hung
        task hangs."""
        frames = sys._current_frames()
        stacks = []
        for thread in self.executor_threads:
            frame = frames.get(thread.ident or 0)
            if frame is not None and component_call(frame) is not None:
                stack = "".join(traceback.format_stack(frame)).rstrip()
                stacks.append(f"thread {thread.name!r}:\n{stack}")
        return stacks

    def _report_held_checkpoints(self, checkpoint: int) -> None:
        """Report, once each, a call of a component's code that an executor thread was in
        when the previous checkpoint started and is still in as ``checkpoint`` starts: that
        task could not take part in the previous checkpoint, so it failed.  A call that hangs
        holds up every checkpoint, and its stack, in the error reports, says where (the
        driver, in another process, cannot see it)."""
        now = time.monotonic()
        frames = sys._current_frames()
        calls = {}
        for thread in self.executor_threads:
            ident = thread.ident or 0
            found = component_call(frames.get(ident))
            if found is None:
                continue
            call, state = found
            earlier, since, reported = self._calls.get(ident, (None, now, False))
            if earlier is not call:
                since, reported = now, False
            elif not reported:
                reported = True
                error = (
                    f"{call.f_code.co_name}() of task {state.task} has not returned since "
                    f"before checkpoint {self._previous} began, at least {now - since:.1f} s "
                    f"ago, and so held it up: hung? (thread {thread.name!r})"
                )
                log.warning("worker %d: %s", self.index, error)
                stack = clip("".join(traceback.format_stack(frames[ident])), MAX_TRACEBACK)
                component = state.context.component_id
                self.errors.add(ErrorReport(component, state.task, self.index, error, stack))
            calls[ident] = (call, since, reported)
        self._calls = calls
        self._previous = checkpoint

    def commit(self, checkpoint: int) -> None:
        """Checkpoint ``checkpoint`` is complete: tell the spouts and stateful bolts here."""
        self._tell([COMMIT, checkpoint], stateful_bolts=True)

    def _tell(self, message: list[Any], stateful_bolts: bool) -> None:
        components = self.plan.components
        for executor in self.executors:
            if executor.kind is ComponentKind.SPOUT or (
                stateful_bolts and components[executor.component].stateful
            ):
                try:
                    executor.queue.push((executor.task_ids[0], message, None))
                except Shutdown:  # stopping
                    return

    def task_failed(self, component: str, error: BaseException) -> None:
        """An executor of ``component`` ended on ``error`` (already reported)."""
        if self.failure is None:
            self.failure = f"{component}: {error}"
        log.error("worker %d: %s failed: %s", self.index, component, error)

    # -- called from executor threads --------------------------------------------------------

    def record_error(self, component: str, task: int, error: BaseException) -> None:
        report = error_report(component, task, self.index, error)
        self.errors.add(report)
        left_out = self._log_errors.allow(component)
        if left_out is None:
            return
        log.warning(
            "%s task %d (worker %d) failed: %s%s\n%s",
            component,
            task,
            self.index,
            report.error,
            f" ({left_out:,} earlier error(s) of {component} not logged: a worker logs at "
            f"most {LOG_PER_INTERVAL} of a component's every {LOG_INTERVAL:g} s)"
            if left_out
            else "",
            report.traceback.rstrip(),
        )

    # -- observation -------------------------------------------------------------------------------

    def activity(self) -> Activity:
        queues = {id(q): q for q in self.local_queues.values()}.values()
        link = self.link or NO_LINK
        enqueued = self.transfer.puts + sum(q.puts for q in queues)
        dequeued = link.handled + sum(e.handled for e in self.executors)
        return Activity(
            spouts_done=all(e.done for e in self.executors),
            enqueued=enqueued,
            dequeued=dequeued,
            sent=link.sent,
            received=link.received,
        )

    def snapshot(self) -> dict[str, Any]:
        """Raw metrics (plain data; ``Statistics.merge`` combines workers' snapshots)."""
        link = self.link or NO_LINK
        return {
            "worker": {
                "worker": self.index,
                "transfer_depth": self.transfer.depth,
                "transfer_depth_max": self.transfer.max_depth,
                "sent": link.sent,
                "received": link.received,
                "bad_messages": link.bad_messages,
            },
            "executors": [e.snapshot() for e in self.executors],
        }

    def take_captured(self) -> list[tuple[str, str, tuple[Any, ...]]]:
        """The tuples emitted since the last call (when capturing)."""
        captured = self.capture
        if not captured:
            return []
        n = len(captured)
        out = captured[:n]
        del captured[:n]
        return out
