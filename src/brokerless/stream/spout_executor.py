"""The spout executor: ``next_tuple`` rounds, acks and fails, timeouts.

Theory of operation
-------------------
A spout executor alternates between the acks and fails the ackers send it, or that were
decided in its own thread (``settled``: a tree counted in place, a tuple sent to no one),
calling the spout's ``ack``/``fail``; the timeouts of its tuples in flight; and rounds of
``next_tuple`` (up to a batch per task while it keeps emitting) on each task that has fewer
than ``max_spout_pending`` tuples in flight and is not exhausted.  What was decided in its
own thread is settled at the next step, which comes at once.  When no task emitted anything
and nothing waits to be settled it waits on its queue (an ack wakes it at once), backing off
from 1 ms to 100 ms.

A tuple emitted with a ``msg_id`` is the root of a tree (``acker.py``): the collector gives
each copy an edge id and tells the root's acker task ``ACK_INIT`` with their XOR -- a root id
chosen so that its acker task is in this worker when one is -- or, where trees are counted in
place, gives every copy the tree, counted in once per emit (``Emitter.send``); it keeps the
tuple in :class:`~.acker.PendingTrees` until ``ACKED``, ``FAILED`` or its timeout.  The
complete latency is timed for one acked tuple in ``LATENCY_SAMPLE + 1`` (``metrics.py``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

from .acker import CountedTree, PendingTrees
from .component import ComponentKind, Spout, TopologyContext
from .executor import Executor, TaskState
from .host import Host
from .plan import ExecutorPlan
from .protocol import ACK_INIT, ACKED, BATCH, RESET_TIMEOUT
from .queues import BoundedQueue, Shutdown

_new_id = random.getrandbits  # root and edge ids: _new_id(64)
_MIN_WAIT = 0.001
_MAX_WAIT = 0.1


class SpoutCollector:
    """What a spout task's ``emit`` goes through."""

    def __init__(self, executor: SpoutExecutor, state: TaskState[Spout]) -> None:
        self.executor = executor
        self.state = state
        # the tree of the tuple being emitted (XOR acking): its root, its copies' edge ids XORed
        self._root = 0
        self._checksum = 0
        self._make_anchors = self._new_edge  # one bound method for every emit

    def _new_edge(self) -> dict[int, int]:
        """The anchors of one copy of the tuple being emitted: a fresh edge id in its tree."""
        edge = _new_id(64)
        self._checksum ^= edge
        return {self._root: edge}

    def emit(
        self, values: Sequence[Any], stream: str, msg_id: Any, direct_task: int | None
    ) -> list[int]:
        output = self.state.output
        if msg_id is None:
            return output.send(stream, values, direct_task, None)
        executor = self.executor
        task = self.state.task
        if executor.counts_trees:  # every copy carries the tree and counts into it
            root = _new_id(63)
            tree = (CountedTree(root, executor.settled),)
            sent = output.send(stream, values, direct_task, None, tree)
        else:
            self._root = root = executor.new_root()
            self._checksum = 0
            sent = output.send(
                stream, values, direct_task, self._make_anchors if executor.acking else None
            )
        executor.pending_trees.add(root, task, msg_id, time.monotonic())
        if not sent or not executor.acking:  # nothing to track: acked at the next step
            executor.settled.append((ACKED, root))
        elif not executor.counts_trees:
            executor.outbox.control(
                executor.acker_for(root), (ACK_INIT, root, self._checksum, task)
            )
        return sent

    def report_error(self, error: BaseException) -> None:
        self.executor.report(self.state.task, error)

    @property
    def context(self) -> TopologyContext:
        return self.state.context


class SpoutExecutor(Executor[Spout]):
    kind = ComponentKind.SPOUT
    #: Whether its spouts should emit: the worker sets it (``Worker.set_active``, any
    #: thread); the executor's next step calls ``activate``/``deactivate`` when it changed.
    wanted_active = True

    def __init__(
        self, worker: Host, plan: ExecutorPlan, queue: BoundedQueue, bound: int | None
    ) -> None:
        super().__init__(worker, plan, queue, bound)
        #: made here, not in ``open``: the control thread reads it (``pending``) as soon as
        #: the worker is told to start, before this executor's thread has opened anything
        self.pending_trees = PendingTrees(self.config.message_timeout_secs)

    def open(self) -> None:
        #: ACKED and FAILED decided in this thread (a counted tree's, a tuple nobody was sent),
        #: settled at the next step without a trip through the queue
        self.settled: list[tuple[int, int]] = []
        own = self.worker.plan.components[self.component].max_spout_pending
        self.max_pending = own or float("inf")
        self._idle_since: float | None = None  # since when next_tuple has emitted nothing
        self.done = False
        self._topology_active = True
        for task in self.task_ids:
            self._start(task)
        self._active = [s for s in self.states.values() if not s.broken]
        self._local_ackers = [i for i, t in enumerate(self.acker_tasks) if t in self.worker.tasks]

    def _start(self, task: int) -> None:
        state = self._create(task, Spout, SpoutCollector)
        if state is not None:
            self._set_up(state, state.component.open)
            if not state.broken and self._topology_active:
                self._call(state, state.component.activate)

    def _switch_activity(self) -> None:
        """The topology was deactivated or activated (Storm's): tell each started task."""
        self._topology_active = active = self.wanted_active
        for state in self._active:
            spout = state.component
            self._call(state, spout.activate if active else spout.deactivate)

    def close(self) -> None:
        for state in self.states.values():
            if not state.broken:
                if self._topology_active:
                    self._call(state, state.component.deactivate)
                self._call(state, state.component.close)

    def pending(self) -> tuple[int, int]:
        return len(self.pending_trees), self.pending_trees.max_per_task

    def new_root(self) -> int:
        """A random root id whose acker task (``root % ackers``) is in this worker when one
        is: the spout's ACK_INIT and the acker's ACKED then never cross workers."""
        root = _new_id(63)
        local = self._local_ackers
        if local:
            n = len(self.acker_tasks)
            root += local[root % len(local)] - root % n
        return root

    def step(self) -> float | None:
        restart = None
        if self.broken:
            restart = self._restart_broken()
            self._active = [s for s in self.states.values() if not s.broken]
        if self.wanted_active is not self._topology_active:
            self._switch_activity()
        items = self.queue.take(self.batch, 0)
        if items:
            self._handle(items)
        decided = bool(self.settled)
        if decided:
            self._settle_decided()
        self._expire()
        # (settled again: what acks, fails and next_tuple decided is for the next step, soon)
        emitted = self._topology_active and self._next_tuples()
        if emitted or items or decided or self.settled:
            self._idle_since = None
            return 0
        # Nothing came and nothing was emitted: next_tuple polls, less often the longer it has
        # had nothing (as long as it has been idle, from _MIN_WAIT to _MAX_WAIT: time, not
        # steps -- a shared thread steps it at every round, however short), but not past the
        # oldest tuple's timeout.
        now = time.monotonic()
        if self._idle_since is None:
            self._idle_since = now
        timeout = min(max(now - self._idle_since, _MIN_WAIT), _MAX_WAIT)
        expiry = self.pending_trees.next_expiry()
        if expiry is not None:
            timeout = max(0.0, min(timeout, expiry - now))
        return timeout if restart is None else min(timeout, restart)

    def _next_tuples(self) -> bool:
        """Let each task that may emit call next_tuple, up to a batch while it emits; hand
        over what they emitted; True if anything was."""
        metrics = self.metrics
        per_task = self.pending_trees.per_task
        batch = self.batch
        emitted = False
        exhausted = True
        for state in self._active:
            spout = state.component
            if self._call(state, spout.exhausted):
                continue
            exhausted = False
            task = state.task
            next_tuple = spout.next_tuple
            for _ in range(batch):
                if per_task.get(task, 0) >= self.max_pending:
                    break
                before = metrics.emitted
                try:  # what _call does, inline: this is the spout's hot path
                    next_tuple()
                except Shutdown:
                    raise
                except Exception as exc:
                    self._raised(state, next_tuple, exc)
                if metrics.emitted == before:
                    break
                emitted = True
        self.outbox.flush()
        self.done = (
            exhausted and not len(self.pending_trees) and not self.outbox.held and not self.broken
        )
        return emitted

    def _handle(self, items: list[Any]) -> None:
        settle = self._settle
        for task, message, _ in items:
            try:
                if message[0] == BATCH:  # from an executor of this worker
                    for one in message[1]:
                        settle(one)
                else:
                    settle(message)
            except Exception as exc:
                self._dropped(task, exc)
        self.outbox.flush()
        self.count_handled(len(items))

    def _settle_decided(self) -> None:
        """Settle what was decided since the last step -- only that: what settling it decides
        (an ``ack`` that emits a tuple acked at once) waits for the next step, as it would in
        the queue, so such a chain takes turns with the other executors and with a stop."""
        settled = self.settled  # (the same list for good: counted trees hold it)
        count = len(settled)
        settle = self._settle
        for i in range(count):
            settle(settled[i])
        del settled[:count]
        self.outbox.flush()

    def _settle(self, message: Sequence[Any]) -> None:
        """ACKED or FAILED -- from an acker, from the collector that decided a counted tree, or
        for a tuple with nothing to track -- told to the spout (unless its tuple timed out);
        RESET_TIMEOUT starts the tuple's timeout again."""
        if message[0] == RESET_TIMEOUT:
            self.pending_trees.touch(message[1], time.monotonic())
            return
        entry = self.pending_trees.pop(message[1])
        if entry is not None:
            task, msg_id, started = entry
            state = self.states[task]
            if message[0] == ACKED:
                metrics = self.metrics
                if metrics.acked >= metrics.next_sample:
                    metrics.sampled(int((time.monotonic() - started) * 1e9), metrics.acked)
                metrics.acked += 1
                ack = state.component.ack
                try:  # what _call does, inline: every acked tuple comes this way
                    ack(msg_id)
                except Shutdown:
                    raise
                except Exception as exc:
                    self._raised(state, ack, exc)
            else:
                self.metrics.failed += 1
                self._call(state, state.component.fail, msg_id)

    def _expire(self) -> None:
        for task, msg_id, _ in self.pending_trees.expired(time.monotonic()):
            self.metrics.failed += 1
            state = self.states[task]
            self._call(state, state.component.fail, msg_id)
