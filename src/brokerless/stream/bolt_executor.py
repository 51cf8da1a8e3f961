"""The bolt executor: ``process`` for each tuple, acks and fails, credits back.

Theory of operation
-------------------
A bolt executor takes a batch, runs ``process`` for each tuple, acks it when ``process``
returns (``auto_ack``), fails it and records the error when it raises, hands flow-control
credits back to the worker a remote tuple came from (in batches of half a window, see
``worker.py``), and flushes its outbox.

Acking is Storm's XOR scheme (``acker.py``): a tuple emitted anchored to inputs gets a fresh
edge id per root, XORed into each anchor's ``_ack_val``; acking an input sends its acker task
``ACK(root, edge ^ ack_val)`` for each root it belongs to, failing it ``FAIL(root)``.  Where
trees are counted in place (``acker.py``) the tuple gets its anchors' trees instead, and each
copy sent counts into them (``Emitter.send``); acking it counts it out of each, and the
collector that empties a tree tells the spout executor ``ACKED(root)`` itself, in its
``settled`` list (failing, ``FAILED(root)``).

A :class:`~.component.BufferingBolt` (batches, windows) keeps its input: its tuples are not
acked when ``process`` returns, and the executor is not *done* (``run.py``) while the bolt
holds some -- it says so before the items count as handled, so no completion round sees them
gone.

With a tick tuple frequency (``Config.tick_tuple_freq_secs`` or the bolt's own), the executor
gives each task a tick tuple in ``process_tick`` when it is due -- checked at each step, and
an idle step asks to run again then -- as Storm's system component sends ``__tick`` tuples.

The execute latency is timed for one tuple in ``LATENCY_SAMPLE + 1`` (``metrics.py``), and
the process latency of the same tuples (``process`` called to acked: the collector's ack
takes it); the counters count every tuple.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from .acker import CountedTree
from .component import Bolt, BufferingBolt, ComponentKind, TopologyContext
from .executor import Executor, TaskState
from .protocol import ACK, ACKED, FAIL, FAILED, RESET_TIMEOUT
from .queues import Shutdown
from .tuple import Anchors, Fields, Tuple

_new_id = random.getrandbits  # edge ids: _new_id(64)
_FLUSH_AT = 4096  # an executor hands over what it emitted at least this often
#: Where tick tuples come from, as in Storm
TICK_COMPONENT = "__system"
TICK_STREAM = "__tick"
_TICK_FIELDS = Fields(["rate_secs"])


class BoltCollector:
    """What a bolt task's ``emit``, ``ack`` and ``fail`` go through."""

    def __init__(self, executor: BoltExecutor, state: TaskState[Bolt]) -> None:
        self.executor = executor
        self.state = state
        self.component = executor.component
        # the common case, one anchor in one tree: that anchor and its root
        self._parent: Tuple | None = None
        self._root = 0
        self._one_tree = self._edge_in_one_tree  # one bound method for every emit

    def _edge_in_one_tree(self) -> dict[int, int]:
        """The anchors of one copy of a tuple anchored to ``_parent`` alone, of one tree."""
        edge = _new_id(64)
        self._parent._ack_val ^= edge  # type: ignore[union-attr]  # set before it is used
        return {self._root: edge}

    def emit(
        self,
        values: Sequence[Any],
        anchors: Tuple | Sequence[Tuple] | None,
        stream: str,
        direct_task: int | None,
    ) -> list[int]:
        if anchors is None:
            current = self.state.current
            if current is None or not self.state.component.auto_anchor:
                anchors = ()
            else:
                roots = current._anchors
                if roots and not current._settled:  # the common cases
                    if isinstance(roots, tuple):  # counted in place: the copies share its trees
                        return self.state.output.send(stream, values, direct_task, None, roots)
                    if len(roots) == 1:
                        self._parent = current
                        (self._root,) = roots
                        return self.state.output.send(stream, values, direct_task, self._one_tree)
                anchors = (current,)
        elif isinstance(anchors, Tuple):
            anchors = (anchors,)
        tracked = []
        for anchor in anchors:
            if not isinstance(anchor, Tuple):
                raise TypeError(
                    f"{self.component!r} emitted with anchors={anchors!r}: anchors are input "
                    "tuples (Bolt.emit(values, anchors, stream)); pass a stream by name: "
                    "emit(values, stream=...)"
                )
            if anchor._settled:
                raise ValueError(
                    f"{self.component!r} emitted anchored to {anchor!r}, which it already acked "
                    "or failed: emit before acking, or pass anchors=[] for an unanchored tuple"
                )
            if anchor._anchors:
                tracked.append(anchor)
        if not tracked:
            return self.state.output.send(stream, values, direct_task, None)
        make_anchors: Callable[[], Anchors]
        # The ignores below: tracked holds only tuples whose _anchors is not None (checked
        # above), and all of one kind (a topology counts all its trees in place or none).
        if isinstance(tracked[0]._anchors, tuple):  # counted in place: each tree once
            trees: tuple[CountedTree, ...] = tuple(
                dict.fromkeys(tree for anchor in tracked for tree in anchor._anchors)  # type: ignore[union-attr,misc]
            )
            return self.state.output.send(stream, values, direct_task, None, trees)
        if len(tracked) == 1 and len(tracked[0]._anchors) == 1:  # type: ignore[arg-type]
            self._parent = parent = tracked[0]
            (self._root,) = parent._anchors  # type: ignore[misc,assignment]
            make_anchors = self._one_tree
        else:

            def make_anchors() -> dict[int, int]:
                out: dict[int, int] = {}
                for parent in tracked:
                    edge = _new_id(64)
                    parent._ack_val ^= edge
                    for r in parent._anchors:  # type: ignore[union-attr]
                        out[r] = out.get(r, 0) ^ edge  # type: ignore[index,arg-type]
                return out

        return self.state.output.send(stream, values, direct_task, make_anchors)

    def ack(self, tup: Tuple) -> None:
        if tup._settled:
            return
        tup._settled = True
        executor = self.executor
        roots = tup._anchors
        if isinstance(roots, tuple):  # counted in place: the last tuple out completes a tree
            for tree in roots:
                tree.pending -= 1
                if not tree.pending and not tree.failed:
                    tree.settled.append((ACKED, tree.root))
        elif roots:
            send, ack_val = executor.outbox.control, tup._ack_val
            ackers = executor.acker_tasks
            for root, edge in roots.items():
                send(ackers[root % len(ackers)], (ACK, root, edge ^ ack_val))
        metrics = executor.metrics
        metrics.acked += 1
        if metrics.arrived:  # (a sampled tuple is held: this may be it)
            metrics.settle(tup, True)

    def fail(self, tup: Tuple) -> None:
        if tup._settled:
            return
        tup._settled = True
        executor = self.executor
        roots = tup._anchors
        if isinstance(roots, tuple):  # counted in place: the spout is told once per tree
            for tree in roots:
                if not tree.failed:
                    tree.failed = True
                    tree.settled.append((FAILED, tree.root))
        elif roots:
            for root in roots:
                executor.outbox.control(executor.acker_for(root), (FAIL, root))
        metrics = executor.metrics
        metrics.failed += 1
        if metrics.arrived:
            metrics.settle(tup, False)

    def reset_timeout(self, tup: Tuple) -> None:
        """Start the timeouts of ``tup``'s spout tuples again (Storm's ``resetTimeout``)."""
        if tup._settled:
            return
        roots = tup._anchors
        if isinstance(roots, tuple):  # counted in place: the spout executor is told directly
            for tree in roots:
                if not tree.failed:
                    tree.settled.append((RESET_TIMEOUT, tree.root))
        elif roots:  # through each root's acker, which knows its spout task (acker.py)
            executor = self.executor
            for root in roots:
                executor.outbox.control(executor.acker_for(root), (RESET_TIMEOUT, root))

    def report_error(self, error: BaseException) -> None:
        self.executor.report(self.state.task, error)

    @property
    def context(self) -> TopologyContext:
        return self.state.context


class BoltExecutor(Executor[Bolt]):
    kind = ComponentKind.BOLT
    collector: type[BoltCollector] = BoltCollector

    def open(self) -> None:
        self._tick = self.worker.plan.components[self.component].tick_secs
        self._next_tick = None if self._tick is None else time.monotonic() + self._tick
        self._buffering = False  # its tasks are BufferingBolts
        for task in self.task_ids:
            self._start(task)
        self._returns = [0] * self.worker.num_workers
        self._return_at = max(1, self.worker.credit_window // 2)

    def _start(self, task: int) -> None:
        state = self._create(task, Bolt, self.collector)
        if state is not None:
            bolt = state.component
            self._buffering = isinstance(bolt, BufferingBolt)
            state.ack_on_return = bolt.auto_ack and not self._buffering
            self._set_up(state, bolt.prepare)

    @property
    def holds_input(self) -> bool:
        return bool(self.broken)

    def close(self) -> None:
        for state in self.states.values():
            if not state.broken:
                self._call(state, state.component.cleanup)

    def step(self) -> float | None:
        if self.broken:  # nothing is taken until every task has started (the module doc)
            restart = self._restart_broken()
            if restart is not None:
                return restart
        if self._next_tick is not None and time.monotonic() >= self._next_tick:
            self._ticks()
            if self._buffering:
                self._holding()
        items = self.queue.take(self.batch, 0)
        if not items:
            if self._next_tick is None:
                return None
            return max(0.0, self._next_tick - time.monotonic())
        states = self.states
        execute = self._execute
        returns = self._returns
        outbox = self.outbox
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
        if self._buffering:
            self._holding()
        self.count_handled(len(items))
        return 0

    def _holding(self) -> None:
        """Not done while the bolt holds tuples (the module doc)."""
        self.done = not any(
            s.component.holding
            for s in self.states.values()
            if isinstance(s.component, BufferingBolt)
        )

    def _execute(self, state: TaskState[Bolt], tup: Any) -> None:
        collector = state.collector
        bolt = state.component
        state.current = tup
        metrics = self.metrics
        sampled = metrics.processed >= metrics.next_sample
        if sampled:
            start = time.perf_counter_ns()
            metrics.arrive(tup, start)
        try:
            bolt.process(tup)
        except Shutdown:
            raise
        except Exception as exc:
            self._process_failed(state, tup, exc)
        else:
            if state.ack_on_return:
                collector.ack(tup)
        finally:
            state.current = None
        if sampled:
            metrics.sampled(time.perf_counter_ns() - start, metrics.processed)
        metrics.processed += 1

    def _ticks(self) -> None:
        """Each task's tick tuple (``Bolt.process_tick``), then the next one's time."""
        tick = self._tick
        assert tick is not None and self._next_tick is not None  # (ticks are on)
        started = time.perf_counter_ns()  # (a bolt's capacity counts its ticks' time)
        for state in self.states.values():
            tup = Tuple((tick,), TICK_COMPONENT, TICK_STREAM, -1, _TICK_FIELDS)
            state.current = tup  # (an emit is anchored to it: to no spout tuple)
            self._call(state, state.component.process_tick, tup)
            state.current = None
        self.metrics.tick_ns += time.perf_counter_ns() - started
        self.outbox.flush()
        self._next_tick = max(self._next_tick + tick, time.monotonic())

    def _process_failed(self, state: TaskState[Bolt], tup: Tuple, error: Exception) -> None:
        """``process`` raised: report it and fail the tuple (Storm's rule), unless the bolt
        leaves it to time out (``auto_fail``)."""
        self.report(state.task, error)
        if state.component.auto_fail:
            state.collector.fail(tup)
