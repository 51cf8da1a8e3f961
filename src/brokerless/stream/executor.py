"""Executors: the threads that run a component's tasks, and the tasks' emit paths.

Theory of operation
-------------------
An executor is one thread running one or more tasks of one component, fed by one
:class:`~brokerless.stream.queues.BoundedQueue` whose items are ``(task, tuple or control
message, credit origin)``.

* A **bolt executor** takes a batch, runs ``process`` for each tuple, acks it when
  ``process`` returns (``auto_ack``), fails it and records the error when it raises, hands
  flow-control credits back to the worker a remote tuple came from, and flushes its outbox.
* A **spout executor** alternates between the acks and fails the ackers send it (calling the
  spout's ``ack``/``fail``), the timeouts of its tuples in flight, and rounds of
  ``next_tuple`` (up to a batch per task while it keeps emitting) on each task that has fewer
  than ``max_spout_pending`` tuples in flight and is not exhausted.  When no task emitted
  anything it waits on its queue (an ack wakes it at once), backing off from 1 ms to 100 ms.
* An **acker executor** applies ACK_INIT/ACK/FAIL messages to its ledgers (see ``acker.py``)
  and tells spout tasks which trees are decided.

Items from other workers are checked before they are queued (``inbound.py``); still, no item
can end an executor: one whose handling raises outside the component's own code is reported
and dropped (``_dropped``), and the loop goes on.  What does end one -- a bug, a component
raising a BaseException, or in a checkpointed topology :class:`TaskFailed` (``stateful.py``)
-- is reported and makes the worker *failed* (``Worker.task_failed``): a checkpointed run then
rolls back.

Emitting (``_Output.send``) runs in the emitter's thread: the routes (a chooser per
subscribing component, see ``routing.py``) give the target tasks; the values are serialized
once, and only if some target is in another worker (or ``always_try_serialize``), before
anything is sent, so a value that cannot be serialized (or that serializes into more than
``max_tuple_bytes``) fails that emit alone.  Each target gets
its own anchors (fresh edge ids).  A target in this worker gets a :class:`Tuple` object, a
target elsewhere an encoded payload for the worker's transfer queue; both go into the
executor's *outbox* (``worker.Outbox``), which the executor flushes after each batch it
handles -- one hand-over per destination instead of one per tuple.  The flush waits for room
in a full local queue, or for credits towards another worker: that wait is the back pressure.

Counters that the completion detector reads (``handled``) are bumped only after a batch's
handling is over and its outbox flushed, so a busy executor never looks idle.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .acker import AckerLedger, PendingTrees
from .component import Bolt, Component, Spout, TopologyContext
from .metrics import ExecutorMetrics
from .protocol import ACK, ACK_INIT, ACKED, FAIL, TUPLE, encode
from .queues import BoundedQueue, Shutdown
from .routing import StreamRoute, build_routes
from .serializer import SerializationError, dumps_values
from .topology import ExecutorPlan
from .tuple import Tuple

if TYPE_CHECKING:
    from .worker import Worker

log = logging.getLogger("brokerless.stream")

_new_id = random.getrandbits  # root and edge ids: _new_id(64)
_MIN_WAIT = 0.001
_MAX_WAIT = 0.1
_FLUSH_AT = 4096  # an executor hands over what it emitted at least this often


class TaskFailed(BaseException):
    """A task cannot go on (already reported): its executor ends and its worker is failed.
    A BaseException, so that no ``except Exception`` on the way swallows it."""


class _Output:
    """One task's emit path."""

    def __init__(self, executor: Executor, task: int) -> None:
        worker = executor.worker
        self.worker = worker
        self.component = executor.component
        self.task = task
        self.metrics = executor.metrics
        self.routes = build_routes(worker.plan, executor.component, task, worker.tasks)
        self.local_queues = worker.local_queues
        self.always_serialize = worker.plan.config.always_try_serialize
        self.all_local = {
            stream: route.possible_targets <= worker.tasks for stream, route in self.routes.items()
        }
        self.serializer = worker.plan.config.serializer
        self.max_tuple_bytes = worker.plan.config.max_tuple_bytes
        self.capture = worker.capture
        self.outbox = executor.outbox

    def _route(self, stream: str, values: Sequence[Any]) -> StreamRoute:
        route = self.routes.get(stream)
        if route is None:
            raise ValueError(
                f"{self.component!r} emitted on stream {stream!r}, which it does not declare "
                f"(it declares {sorted(self.routes)}): add it to its outputs"
            )
        if len(values) != len(route.fields):
            raise ValueError(
                f"{self.component!r} emitted {len(values)} value(s) on stream {stream!r}, "
                f"which has {len(route.fields)} field(s) {list(route.fields.names)}"
            )
        return route

    def send(
        self,
        stream: str,
        values: Sequence[Any],
        direct_task: int | None,
        make_anchors: Callable[[], dict[int, int]] | None,
    ) -> list[int]:
        """Route ``values`` and deliver a copy to each target task; returns the task ids.
        ``make_anchors`` gives each copy's anchors ({root: edge}) or is None (unanchored)."""
        route = self._route(stream, values)
        values = tuple(values)
        if direct_task is None:
            if route.direct:
                raise ValueError(
                    f"{self.component!r} emitted on direct stream {stream!r} without a task: "
                    f"use emit_direct(task, values, stream={stream!r})"
                )
            groups = [(choose(values), blocking) for choose, blocking in route.choosers]
        else:
            if not route.direct:
                raise ValueError(
                    f"{self.component!r} used emit_direct on stream {stream!r}, which is not "
                    "direct: declare it Stream(..., direct=True) or use emit"
                )
            blocking = route.direct_targets.get(direct_task)
            if blocking is None:
                raise ValueError(
                    f"{self.component!r} emitted directly to task {direct_task}, which does not "
                    f"subscribe to stream {stream!r}; subscribed tasks: "
                    f"{sorted(route.direct_targets)}"
                )
            groups = [([direct_task], blocking)]
        local = self.local_queues
        blob = None
        if self.always_serialize or not self.all_local[stream]:
            remote = self.always_serialize
            for tasks, _ in groups:
                for task in tasks:
                    if task not in local:
                        remote = True
            if remote:
                blob = dumps_values(
                    self.serializer, values, route.fields.names, self.component, stream
                )
                if len(blob) > self.max_tuple_bytes:
                    raise SerializationError(
                        f"{self.component!r} emitted a tuple of {len(blob)} bytes on stream "
                        f"{stream!r}, more than max_tuple_bytes ({self.max_tuple_bytes}): "
                        "emit smaller values, or raise the topology's max_tuple_bytes"
                    )
        outbox = self.outbox
        sent = []
        for tasks, blocking in groups:
            for task in tasks:
                anchors = make_anchors() if make_anchors is not None else None
                queue = local.get(task)
                if queue is not None:
                    outbox.local(
                        queue,
                        (
                            task,
                            Tuple(values, self.component, stream, self.task, route.fields, anchors),
                            None,
                        ),
                        blocking,
                    )
                else:
                    outbox.remote(task, encode([TUPLE, self.task, stream, anchors, blob]), blocking)
                sent.append(task)
        metrics = self.metrics
        metrics.emitted += 1
        metrics.transferred += len(sent)
        if self.capture is not None:
            self.capture.append((self.component, stream, values))
        return sent


class _TaskState:
    """One task: its component instance, context and emit path."""

    __slots__ = ("broken", "collector", "component", "context", "current", "output", "task")

    def __init__(self, task: int, context: TopologyContext, output: _Output) -> None:
        self.task = task
        self.context = context
        self.output = output
        self.component: Any = None
        self.collector: Any = None
        self.current: Tuple | None = None  # the tuple a bolt is processing
        self.broken = False  # its component could not be created or opened


class _SpoutCollector:
    def __init__(self, executor: SpoutExecutor, state: _TaskState) -> None:
        self.executor = executor
        self.state = state

    def emit(
        self, values: Sequence[Any], stream: str, msg_id: Any, direct_task: int | None
    ) -> list[int]:
        output = self.state.output
        if msg_id is None:
            return output.send(stream, values, direct_task, None)
        executor = self.executor
        task = self.state.task
        root = executor.new_root()
        checksum = 0

        def anchors() -> dict[int, int]:
            nonlocal checksum
            edge = _new_id(64)
            checksum ^= edge
            return {root: edge}

        sent = output.send(stream, values, direct_task, anchors if executor.acking else None)
        executor.pending_trees.add(root, task, msg_id, time.monotonic())
        if sent and executor.acking:
            executor.outbox.control(executor.acker_for(root), [ACK_INIT, root, checksum, task])
        else:  # nothing to track: acked at once (after next_tuple returns)
            executor.outbox.control(task, [ACKED, root])
        return sent

    def report_error(self, error: BaseException) -> None:
        self.executor.report(self.state.task, error)


class _BoltCollector:
    def __init__(self, executor: BoltExecutor, state: _TaskState) -> None:
        self.executor = executor
        self.state = state
        self.component = executor.component

    def emit(
        self,
        values: Sequence[Any],
        anchors: Tuple | Sequence[Tuple] | None,
        stream: str,
        direct_task: int | None,
    ) -> list[int]:
        if anchors is None:
            current = self.state.current
            anchors = (current,) if current is not None and self.state.component.auto_anchor else ()
        elif isinstance(anchors, Tuple):
            anchors = (anchors,)
        tracked = []
        for anchor in anchors:
            if anchor._settled:
                raise ValueError(
                    f"{self.component!r} emitted anchored to {anchor!r}, which it already acked "
                    "or failed: emit before acking, or pass anchors=[] for an unanchored tuple"
                )
            if anchor._anchors:
                tracked.append(anchor)
        if not tracked:
            return self.state.output.send(stream, values, direct_task, None)
        # The ignores below: tracked holds only tuples whose _anchors is a dict (checked above).
        if len(tracked) == 1 and len(tracked[0]._anchors) == 1:  # type: ignore[arg-type]
            parent = tracked[0]
            (root,) = parent._anchors  # type: ignore[misc]

            def make_anchors() -> dict[int, int]:
                edge = _new_id(64)
                parent._ack_val ^= edge
                return {root: edge}
        else:

            def make_anchors() -> dict[int, int]:
                out: dict[int, int] = {}
                for parent in tracked:
                    edge = _new_id(64)
                    parent._ack_val ^= edge
                    for r in parent._anchors:  # type: ignore[union-attr]
                        out[r] = out.get(r, 0) ^ edge
                return out

        return self.state.output.send(stream, values, direct_task, make_anchors)

    def ack(self, tup: Tuple) -> None:
        if tup._settled:
            return
        tup._settled = True
        executor = self.executor
        roots = tup._anchors
        if roots:
            send, ack_val = executor.outbox.control, tup._ack_val
            for root, edge in roots.items():
                send(executor.acker_for(root), [ACK, root, edge ^ ack_val])
        executor.metrics.acked += 1

    def fail(self, tup: Tuple) -> None:
        if tup._settled:
            return
        tup._settled = True
        executor = self.executor
        roots = tup._anchors
        if roots:
            for root in roots:
                executor.outbox.control(executor.acker_for(root), [FAIL, root])
        executor.metrics.failed += 1

    def report_error(self, error: BaseException) -> None:
        self.executor.report(self.state.task, error)


class Executor:
    """Base: one thread, one queue, the tasks of one component."""

    kind = ""
    close_method: str | None = None

    def __init__(
        self, worker: Worker, plan: ExecutorPlan, queue: BoundedQueue, bound: int | None
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
        #: Nothing left to do on its own (spouts: opened, exhausted, nothing pending): a
        #: spout that has not opened yet is not done, or a completion round taken while a
        #: worker starts could see a finished topology.
        self.done = self.kind != "spout"
        self.stopping = False
        acker_tasks = worker.plan.acker_tasks
        self.acking = bool(acker_tasks)
        self._acker_tasks = acker_tasks
        self.states: dict[int, _TaskState] = {}
        self.outbox = worker.outbox()
        self.thread = threading.Thread(
            target=self._run, name=f"{worker.plan.name}:{self.component}:{self.id}", daemon=True
        )

    def acker_for(self, root: int) -> int:
        return self._acker_tasks[root % len(self._acker_tasks)]

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

    def _run(self) -> None:
        try:
            self.open()
            self.loop()
        except Shutdown:
            pass
        except TaskFailed as failed:
            self.worker.task_failed(self.component, failed)
        except BaseException as exc:  # a bug in the stream layer: say so loudly
            log.exception("executor %s of %r crashed", self.id, self.component)
            self.report(self.task_ids[0], exc)
            self.worker.task_failed(self.component, exc)
        finally:
            self.close()

    def _create(self, task: int, kind: type[Component], collector: type[Any], setup: str) -> None:
        """Make ``task``'s component and collector and call its ``setup`` method (open or
        prepare); if any of that fails the error is reported and the task is broken."""
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
        )
        state = _TaskState(task, context, _Output(self, task))
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
            getattr(component, setup)(self.config, context)
        except Exception as exc:
            state.broken = True
            self.report(task, exc)

    def _call(self, state: _TaskState, method: str, *args: Any) -> Any:
        """Call a component method; an exception is reported (see ``_call_failed``)."""
        try:
            return getattr(state.component, method)(*args)
        except Shutdown:
            raise
        except Exception as exc:
            self.report(state.task, exc)
            return self._call_failed(state, method, exc)

    def _call_failed(self, state: _TaskState, method: str, error: Exception) -> Any:
        """A component method raised ``error`` (reported): go on, it returned None."""
        return None

    def open(self) -> None:
        raise NotImplementedError

    def loop(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop the components (in this executor's thread): each task that started calls
        ``close_method`` (Storm's ``close`` for spouts, ``cleanup`` for bolts)."""
        if self.close_method is None:
            return
        for state in self.states.values():
            if not state.broken:
                self._call(state, self.close_method)

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
            "queue_depth": self.queue.depth,
            "queue_depth_max": self.queue.max_depth,
            "queue_capacity": self.queue_bound,
            "pending": pending,
            "pending_max": pending_max,
        }


class SpoutExecutor(Executor):
    kind = "spout"
    close_method = "close"

    def open(self) -> None:
        config = self.config
        self.pending_trees = PendingTrees(config.message_timeout_secs)
        self.max_pending = config.max_spout_pending or float("inf")
        self.done = False
        for task in self.task_ids:
            self._create(task, Spout, _SpoutCollector, "open")
        self._active = [s for s in self.states.values() if not s.broken]
        self._local_ackers = [i for i, t in enumerate(self._acker_tasks) if t in self.worker.tasks]

    def pending(self) -> tuple[int, int]:
        return len(self.pending_trees), self.pending_trees.max_per_task

    def new_root(self) -> int:
        """A random root id whose acker task (``root % ackers``) is in this worker when one
        is: the spout's ACK_INIT and the acker's ACKED then never cross workers."""
        root = _new_id(63)
        local = self._local_ackers
        if local:
            n = len(self._acker_tasks)
            root += local[root % len(local)] - root % n
        return root

    def loop(self) -> None:
        take = self.queue.take
        batch = self.config.executor_batch_size
        wait = _MIN_WAIT
        while not self.stopping:
            items = take(batch, 0)
            if items:
                self._handle(items)
            self._expire()
            if self._next_tuples():
                wait = _MIN_WAIT
                continue
            timeout = wait
            expiry = self.pending_trees.next_expiry()
            if expiry is not None:
                timeout = max(0.0, min(timeout, expiry - time.monotonic()))
            items = take(batch, timeout)
            if items:
                self._handle(items)
                wait = _MIN_WAIT
            else:
                wait = min(wait * 2, _MAX_WAIT)

    def _next_tuples(self) -> bool:
        """Let each task that may emit call next_tuple, up to a batch while it emits; hand
        over what they emitted; True if anything was."""
        metrics = self.metrics
        per_task = self.pending_trees.per_task
        batch = self.config.executor_batch_size
        emitted = False
        exhausted = True
        for state in self._active:
            if self._call(state, "exhausted"):
                continue
            exhausted = False
            task = state.task
            for _ in range(batch):
                if per_task.get(task, 0) >= self.max_pending:
                    break
                before = metrics.emitted
                self._call(state, "next_tuple")
                if metrics.emitted == before:
                    break
                emitted = True
        self.outbox.flush()
        self.done = exhausted and not len(self.pending_trees)
        return emitted

    def _handle(self, items: list[Any]) -> None:
        for task, message, _ in items:
            try:
                self._settle(message)
            except Exception as exc:
                self._dropped(task, exc)
        self.outbox.flush()
        self.handled += len(items)

    def _settle(self, message: list[Any]) -> None:
        """ACKED or FAILED from an acker: tell the spout (unless its tuple timed out)."""
        entry = self.pending_trees.pop(message[1])
        if entry is not None:
            task, msg_id, started = entry
            state = self.states[task]
            if message[0] == ACKED:
                self.metrics.acked += 1
                self.metrics.latency.add(int((time.monotonic() - started) * 1e9))
                self._call(state, "ack", msg_id)
            else:
                self.metrics.failed += 1
                self._call(state, "fail", msg_id)

    def _expire(self) -> None:
        for task, msg_id, _ in self.pending_trees.expired(time.monotonic()):
            self.metrics.failed += 1
            self._call(self.states[task], "fail", msg_id)


class BoltExecutor(Executor):
    kind = "bolt"
    close_method = "cleanup"

    def open(self) -> None:
        for task in self.task_ids:
            self._create(task, Bolt, _BoltCollector, "prepare")
        self._returns = [0] * self.worker.num_workers
        self._return_at = max(1, self.worker.credit_window // 2)

    def loop(self) -> None:
        take = self.queue.take
        batch = self.config.executor_batch_size
        states = self.states
        execute = self._execute
        returns = self._returns
        outbox = self.outbox
        while True:
            items = take(batch)
            for task, tup, origin in items:
                try:
                    execute(states[task], tup)
                except Exception as exc:
                    self._dropped(task, exc)
                if origin is not None:
                    returns[origin] += 1
                    if returns[origin] >= self._return_at:
                        outbox.credit(origin, self.id, returns[origin])
                        returns[origin] = 0
                if outbox.size >= _FLUSH_AT:
                    outbox.flush()
            outbox.flush()
            self.handled += len(items)

    def _execute(self, state: _TaskState, tup: Tuple) -> None:
        collector = state.collector
        if state.broken:
            collector.fail(tup)
            return
        bolt = state.component
        state.current = tup
        start = time.perf_counter_ns()
        try:
            bolt.process(tup)
        except Shutdown:
            raise
        except Exception as exc:
            self._process_failed(state, tup, exc)
        else:
            if bolt.auto_ack:
                collector.ack(tup)
        finally:
            state.current = None
        metrics = self.metrics
        metrics.latency.add(time.perf_counter_ns() - start)
        metrics.processed += 1

    def _process_failed(self, state: _TaskState, tup: Tuple, error: Exception) -> None:
        """``process`` raised: report it and fail the tuple (Storm's rule)."""
        self.report(state.task, error)
        state.collector.fail(tup)


class AckerExecutor(Executor):
    kind = "acker"

    def open(self) -> None:
        now = time.monotonic()
        self.ledgers = {
            t: AckerLedger(self.config.message_timeout_secs, now) for t in self.task_ids
        }

    def loop(self) -> None:
        take = self.queue.take
        batch = self.config.executor_batch_size
        ledgers = self.ledgers
        outbox = self.outbox
        metrics = self.metrics
        while True:
            next_rotation = min(ledger.next_rotation for ledger in ledgers.values())
            items = take(batch, max(0.0, next_rotation - time.monotonic()))
            for task, message, _ in items:
                try:
                    decided = ledgers[task].update(message)
                    if decided is not None:
                        kind, root, spout_task = decided
                        if kind == ACKED:
                            metrics.acked += 1
                        else:
                            metrics.failed += 1
                        outbox.control(spout_task, [kind, root])
                except Exception as exc:
                    self._dropped(task, exc)
            outbox.flush()
            metrics.processed += len(items)
            self.handled += len(items)
            now = time.monotonic()
            for ledger in ledgers.values():
                ledger.rotate(now)
