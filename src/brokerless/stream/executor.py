"""Executors: the threads that run a component's tasks.  This module has what every kind
shares; ``spout_executor.py``, ``bolt_executor.py`` and ``acker_executor.py`` have the kinds,
``emit.py`` a task's emit path, ``stateful.py`` the checkpointed kinds.

Theory of operation
-------------------
An executor is one thread running one or more tasks of one component, fed by one
:class:`~brokerless.stream.queues.BoundedQueue` whose items are ``(task, tuple or control
message, credit origin)``.  It sees its worker only through :class:`Host` (the worker's
plan, its tables and where errors go), and hands what its tasks emit to an
:class:`~brokerless.stream.transfer.Outbox`, flushed once per batch.

Items from other workers are checked before they are queued (``inbound.py``); still, no item
can end an executor: one whose handling raises outside the component's own code is reported
and dropped (``_dropped``), and the loop goes on.  What does end one -- a bug, a component
raising a BaseException, or in a checkpointed topology :class:`TaskFailed` (``stateful.py``)
-- is reported and makes the worker *failed* (``Host.task_failed``): a checkpointed run then
rolls back.

A component's own methods are called through :meth:`Executor._call`: an exception there is
the component's error, reported with its task, and the executor goes on (``_call_failed``
says how; a checkpointed executor fails the task instead).

A task whose component cannot be made, or whose ``open``/``prepare`` raises, is *broken*: the
error is reported and the task started again -- a new component, ``open``/``prepare`` again --
after a back-off (1 s, doubling up to 30 s), as Storm's supervisor restarts a worker whose
component died, so a database that was not up yet heals.  Meanwhile it takes no part: a
spout's broken task emits nothing and its executor is never done, a bolt executor with a
broken task takes nothing from its queue (what is sent to it waits there, and the queue's
bound holds its upstream back).  A checkpointed executor fails the task instead (a rollback).

Counters that the completion detector reads (``handled``) are bumped only after a batch's
handling is over and its outbox flushed (:meth:`Executor.count_handled`), so a busy executor
never looks idle -- nor one whose outbox still holds tuples for want of credits: those items
count once a flush gets them out (:meth:`Executor.flush_held`).

Every kind does its work in :meth:`Executor.step`, which never waits for input: it handles
what the queue holds and says when it wants to run again (0: at once; a number of seconds: a
timer of its own, such as a spout's back-off or an acker's rotation; None: when input comes).
An executor with a thread of its own (``Config.executor_threads == "per_executor"``) loops on
``step`` and waits on its queue in between; the executors of a shared thread are stepped in
turn by it (``shared_thread.py``).  Either way an executor ends through :meth:`Executor.end`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .component import Component, ComponentKind, TopologyContext
from .emit import Emitter
from .host import Host
from .metrics import ExecutorMetrics
from .plan import ExecutorPlan
from .queues import BoundedQueue, Shutdown
from .transfer import Outbox

log = logging.getLogger("brokerless.stream")

#: A broken task is started again after the first, doubling up to the second (seconds).
RESTART_BACKOFF = (1.0, 30.0)

_C = TypeVar("_C", bound=Component)
_R = TypeVar("_R")


class TaskFailed(BaseException):
    """A task cannot go on (already reported): its executor ends and its worker is failed.
    A BaseException, so that no ``except Exception`` on the way swallows it."""


class TaskState(Generic[_C]):
    """One task: its component instance, context and emit path."""

    __slots__ = (
        "ack_on_return",
        "broken",
        "collector",
        "component",
        "context",
        "current",
        "output",
        "task",
    )

    def __init__(self, task: int, context: TopologyContext, output: Emitter) -> None:
        self.task = task
        self.context = context
        self.output = output
        self.component: _C = None  # type: ignore[assignment]  # set by Executor._create
        self.collector: Any = None
        self.current: Any = None  # the tuple a bolt is processing
        self.broken = False  # its component could not be created or opened
        self.ack_on_return = False  # a bolt's: ack its input when ``process`` returns


class Executor(Generic[_C]):
    """Base: one thread, one queue, the tasks of one component."""

    kind: ComponentKind

    def __init__(
        self, worker: Host, plan: ExecutorPlan, queue: BoundedQueue, bound: int | None
    ) -> None:
        self.worker = worker
        self.id = plan.id
        self.component = plan.component
        self.task_ids = plan.tasks
        self.queue = queue
        self.queue_bound = bound  # the most this queue may hold (None: not bounded)
        self.config = worker.plan.config
        self.metrics = ExecutorMetrics()
        self.handled = 0  # queue items whose handling is over
        self._unsent = 0  # items handled whose output the outbox still holds (see count_handled)
        #: Nothing left to do on its own (spouts: opened, exhausted, nothing pending): a
        #: spout that has not opened yet is not done, or a completion round taken while a
        #: worker starts could see a finished topology.
        self.done = self.kind is not ComponentKind.SPOUT
        self.stopping = False
        acker_tasks = worker.plan.acker_tasks
        self.acking = bool(acker_tasks)
        self.acker_tasks = acker_tasks
        #: Trees are counted in place (``acker.py``): the topology runs in this one thread.
        self.counts_trees = (
            self.acking and worker.num_workers == 1 and self.config.executor_threads == "shared"
        )
        self.states: dict[int, TaskState[_C]] = {}
        #: Broken tasks: when each is started again, and how many times each failed to start.
        self.broken: dict[int, float] = {}
        self._start_failures: dict[int, int] = {}
        self.batch = self.config.executor_batch_size  # items a step takes from the queue
        # (an outbox waits only in a thread of the executor's own: see shared_thread.py)
        self.outbox = Outbox(worker.exchange, waits=self.config.executor_threads == "per_executor")

    def acker_for(self, root: int) -> int:
        return self.acker_tasks[root % len(self.acker_tasks)]

    def report(self, task: int, error: BaseException) -> None:
        self.metrics.errors += 1
        self.worker.record_error(self.component, task, error)

    def _dropped(self, task: int, error: Exception) -> None:
        """An item of the queue could not be handled (not an error of the component's own
        code, which fails its tuple): a bug in the stream layer, or input that slipped past
        the worker's checks.  It is reported and dropped; the executor goes on."""
        log.error(
            "executor %s of %r dropped an item it could not handle",
            self.id,
            self.component,
            exc_info=error,
        )
        self.report(task, error)

    def own_thread(self) -> threading.Thread:
        """A thread of the executor's own to run it in (not started)."""
        name = f"{self.worker.plan.name}:{self.component}:{self.id}"
        return threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        """The executor's own thread."""
        try:
            self.open()
            wait, step = self.queue.wait, self.step
            while not self.stopping:
                pause = step()
                if pause != 0:
                    if pause is not None and self.holds_input:
                        self.queue.pause(pause)  # (items or not: they must wait)
                    else:
                        wait(pause)
        except BaseException as exc:
            self.end(exc)
        finally:
            self.finish()

    def count_handled(self, items: int) -> None:
        """``items`` queue items were handled and the outbox flushed: they count as handled,
        unless the outbox holds some of their output (only when it does not wait)."""
        if self.outbox.held:
            self._unsent += items
        else:
            self.handled += items

    def flush_held(self) -> bool:
        """Flush what the outbox holds for want of credits; True while it still holds some."""
        self.outbox.flush()
        if self.outbox.held:
            return True
        self.handled += self._unsent
        self._unsent = 0
        return False

    def finish(self) -> None:
        """``close``, and what escapes it (a component's BaseException: ``close`` reports
        Exceptions itself) ends the executor as a crash."""
        try:
            self.close()
        except BaseException as exc:
            self.end(exc)

    def end(self, exc: BaseException) -> None:
        """The executor ends on ``exc``, raised by ``open`` or ``step``: the worker stopping
        (:class:`Shutdown`), a task failure, or a bug in the stream layer (said loudly)."""
        if isinstance(exc, Shutdown):
            return
        if not isinstance(exc, TaskFailed):
            log.error("executor %s of %r crashed", self.id, self.component, exc_info=exc)
            self.report(self.task_ids[0], exc)
        self.worker.task_failed(self.component, exc)

    def _create(
        self, task: int, kind: type[_C], collector: Callable[[Any, TaskState[_C]], Any]
    ) -> TaskState[_C] | None:
        """Make ``task``'s component and collector; returns its state, or None (the error
        reported, the task broken) when the component cannot be made."""
        worker = self.worker
        plan = worker.plan
        context = TopologyContext(
            topology=plan.name,
            component_id=self.component,
            task_id=task,
            worker_index=worker.index,
            num_workers=worker.num_workers,
            component_tasks=plan.component_tasks,
            worker_tasks=worker.tasks,
            sources=tuple(plan.components[self.component].inputs),
            component_streams=plan.component_streams,
            counter=self.metrics.counter,
        )
        state: TaskState[_C] = TaskState(
            task, context, Emitter(worker, self.component, task, self.metrics, self.outbox)
        )
        state.collector = collector(self, state)
        self.states[task] = state
        try:
            factory = plan.components[self.component].factory
            assert factory is not None, "spouts and bolts have a factory (ackers do not)"
            component = factory()
            if not isinstance(component, kind):
                raise TypeError(f"{component!r} is not a {kind.__name__}")
            component._collector = state.collector
            state.component = component
        except Exception as exc:
            self._start_failed(state, exc)
            return None
        return state

    def _set_up(self, state: TaskState[_C], setup: Callable[[Any, TopologyContext], None]) -> None:
        """Call the component's ``open`` or ``prepare``; if it raises, the error is reported
        and the task is broken."""
        try:
            setup(self.config, state.context)
        except Exception as exc:
            self._start_failed(state, exc)

    def _start_failed(self, state: TaskState[_C], error: Exception) -> None:
        """``state``'s task could not start: reported, broken, started again after a back-off
        (see the module doc)."""
        state.broken = True
        self.report(state.task, error)
        failures = self._start_failures.get(state.task, 0) + 1
        self._start_failures[state.task] = failures
        first, most = RESTART_BACKOFF
        self.broken[state.task] = time.monotonic() + min(first * 2 ** (failures - 1), most)

    def _start(self, task: int) -> None:
        """Make ``task``'s component and open (prepare) it."""
        raise NotImplementedError

    @property
    def holds_input(self) -> bool:
        """Whether it takes nothing from its queue for now (a bolt with a broken task)."""
        return False

    def _restart_broken(self) -> float | None:
        """Start again each broken task whose back-off is over; returns the seconds until the
        next one is due (None: none is broken)."""
        now = time.monotonic()
        for task, due in list(self.broken.items()):
            if due <= now:
                del self.broken[task]
                log.info("executor %s of %r: starting task %d again", self.id, self.component, task)
                self._start(task)
        if not self.broken:
            return None
        return max(0.0, min(self.broken.values()) - time.monotonic())

    def _call(self, state: TaskState[_C], method: Callable[..., _R], *args: Any) -> _R | None:
        """Call a method of ``state``'s component; an exception is reported (see
        ``_call_failed``)."""
        try:
            return method(*args)
        except Shutdown:
            raise
        except Exception as exc:
            self._raised(state, method, exc)
            return None

    def _raised(self, state: TaskState[_C], method: Callable[..., Any], error: Exception) -> None:
        """A method of ``state``'s component raised ``error``: report it (see ``_call``)."""
        self.report(state.task, error)
        self._call_failed(state, method.__name__, error)

    def _call_failed(self, state: TaskState[_C], method: str, error: Exception) -> None:
        """A component method raised ``error`` (reported): go on, it returned None."""

    def open(self) -> None:
        raise NotImplementedError

    def step(self) -> float | None:
        """Handle what is queued without waiting for more; returns when to step again (0:
        at once, seconds: at the latest then, None: once input comes).  See the module doc."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop the components (in this executor's thread), Storm's ``close`` for spouts and
        ``cleanup`` for bolts, for each task that started."""

    def pending(self) -> tuple[int, int]:
        return 0, 0

    def snapshot(self) -> dict[str, Any]:
        m = self.metrics
        pending, pending_max = self.pending()
        return {
            "executor": self.id,
            "component": self.component,
            "kind": self.kind,
            "tasks": len(self.task_ids),
            "emitted": m.emitted,
            "transferred": m.transferred,
            "acked": m.acked,
            "failed": m.failed,
            "processed": m.processed,
            "errors": m.errors,
            "latency": m.latency.snapshot(),
            "process_latency": m.process_latency.snapshot(),
            "queue_depth": self.queue.depth,
            "queue_depth_max": self.queue.max_depth,
            "queue_capacity": self.queue_bound,
            "pending": pending,
            "pending_max": pending_max,
            "metrics": {name: c.count for name, c in m.counters.items()},
            "windows": m.windows(),
        }
