"""A task's emit path: from ``emit(values)`` to a copy for each target task in the outbox.

Theory of operation
-------------------
:meth:`Emitter.send` runs in the emitter's thread: the routes (a chooser per subscribing
component, see ``routing.py``) give the target tasks; the values are serialized once, and only
if some target is in another worker (or ``always_try_serialize``), before anything is sent, so
a value that cannot be serialized (or that serializes into more than ``max_tuple_bytes``)
fails that emit alone.  Each target gets its own anchors (fresh edge ids, from the
``make_anchors`` the collector passes) -- or, where trees are counted in place, every copy
carries the collector's ``trees`` and counts into each (``acker.py``).  A target in this
worker gets a :class:`Tuple` object, a target elsewhere an encoded payload for the worker's
transfer queue; both go into the executor's outbox (``transfer.py``), flushed after each batch
the executor handles.  The common case -- one subscribing component, all its tasks in this
worker, nothing to serialize -- takes a shorter way (the rest is ``_send_routed``).  The flush
waits for room in a full local queue, or for credits towards another worker: that wait is the
back pressure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .acker import CountedTree
from .grouping import Chooser
from .host import Host
from .metrics import ExecutorMetrics
from .protocol import TUPLE
from .routing import StreamRoute, build_routes
from .serializer import (
    SerializationError,
    dumps_through,
    dumps_values,
    new_packer,
    new_value_packer,
)
from .transfer import Outbox
from .tuple import Anchors, Tuple

#: What has a length but is not a list of values: ``emit(word)`` or ``emit({"word": w})`` for
#: ``emit([word])`` would otherwise emit its characters or keys when there are as many as the
#: stream has fields (looked at only when the values are not a list or a tuple).
_NOT_VALUES = (str, bytes, bytearray, memoryview, dict, set, frozenset)


class _StreamOut:
    """One stream's way out of one task, worked out once: the route, and for each target task
    in this worker the outbox list its tuples go into."""

    __slots__ = (
        "all_local",
        "direct",
        "direct_targets",
        "fields",
        "local_one",
        "names",
        "picks",
        "width",
    )

    def __init__(
        self,
        route: StreamRoute,
        local_tasks: frozenset[int],
        lists: Callable[[int, bool], list[Any] | None],
        always_serialize: bool,
    ) -> None:
        self.fields = route.fields
        self.names = route.fields.names
        self.width = len(route.fields)
        self.direct = route.direct
        self.all_local = route.possible_targets <= local_tasks
        #: regular streams: (chooser, blocking, local task -> its outbox list) per subscriber
        self.picks = [
            (choose, blocking, _lists_of(route.possible_targets, blocking, lists))
            for choose, blocking in route.choosers
        ]
        #: one subscribing component, its every task in this worker, nothing to serialize:
        #: (chooser, task -> outbox list), the common case that ``Emitter.send`` takes a shorter
        #: way for; else None
        self.local_one: tuple[Chooser, dict[int, list[Any]]] | None = None
        if not self.direct and self.all_local and len(self.picks) == 1 and not always_serialize:
            choose, _, local = self.picks[0]
            self.local_one = (choose, local)
        #: direct streams: task -> (blocking, its outbox list or None)
        self.direct_targets = {
            task: (blocking, lists(task, blocking))
            for task, blocking in route.direct_targets.items()
        }


def _lists_of(
    tasks: frozenset[int], blocking: bool, lists: Callable[[int, bool], list[Any] | None]
) -> dict[int, list[Any]]:
    found = {task: lists(task, blocking) for task in tasks}
    return {task: items for task, items in found.items() if items is not None}


class Emitter:
    """One task's emit path (see the module doc)."""

    def __init__(
        self, worker: Host, component: str, task: int, metrics: ExecutorMetrics, outbox: Outbox
    ) -> None:
        plan = worker.plan
        self.component = component
        self.task = task
        self.metrics = metrics
        self.routes = build_routes(plan, component, task, worker.tasks)
        local_queues = worker.exchange.local_queues

        def lists(target: int, blocking: bool) -> list[Any] | None:
            queue = local_queues.get(target)
            return None if queue is None else outbox.items_for(queue, blocking)

        self.always_serialize = plan.config.always_try_serialize
        self._streams = {
            stream: _StreamOut(route, worker.tasks, lists, self.always_serialize)
            for stream, route in self.routes.items()
        }
        self.serializer = plan.config.serializer
        # an emitter runs in one thread at a time: packers of its own, for payloads and (with
        # the default serializer) values
        self._pack = new_packer()
        self._dumps = dumps_through(self.serializer, new_value_packer())
        self.max_tuple_bytes = plan.config.max_tuple_bytes
        self.capture = worker.capture
        self.outbox = outbox

    def _refuse(self, stream: str, values: Sequence[Any]) -> NoReturn:
        """Raise what is wrong with emitting ``values`` on ``stream``."""
        route = self.routes.get(stream)
        if route is None:
            raise ValueError(
                f"{self.component!r} emitted on stream {stream!r}, which it does not declare "
                f"(it declares {sorted(self.routes)}): add it to its outputs (a spout's "
                "emit(values, stream, msg_id) takes a message id by name: msg_id=...)"
            )
        if isinstance(values, _NOT_VALUES) or not hasattr(values, "__len__"):
            raise TypeError(
                f"{self.component!r} emits a list of values, one per field of stream "
                f"{stream!r} {list(route.fields.names)}, not {values!r}: emit([value, ...])"
            )
        raise ValueError(
            f"{self.component!r} emitted {len(values)} value(s) on stream {stream!r}, "
            f"which has {len(route.fields)} field(s) {list(route.fields.names)}"
        )

    def send(
        self,
        stream: str,
        values: Sequence[Any],
        direct_task: int | None,
        make_anchors: Callable[[], Anchors] | None,
        trees: tuple[CountedTree, ...] | None = None,
    ) -> list[int]:
        """Route ``values`` and deliver a copy to each target task; returns the task ids.
        ``make_anchors`` gives each copy's anchors (``{root: edge id}``); or every copy
        carries the counted ``trees`` and counts into each; neither: unanchored."""
        out = self._streams.get(stream)
        try:
            width = len(values)
        except TypeError:  # (no len(): not a list of values)
            width = -1
        cls = values.__class__
        if (
            out is None
            or width != out.width
            or (cls is not list and cls is not tuple and isinstance(values, _NOT_VALUES))
        ):
            self._refuse(stream, values)
        values = tuple(values)
        local_one = out.local_one
        if local_one is None or direct_task is not None:
            return self._send_routed(out, stream, values, direct_task, make_anchors, trees)
        # The common case: one subscribing component, its every task in this worker -- one
        # chooser, no serialization, a Tuple object for each target.
        choose, lists = local_one
        chosen = choose(values)
        component, source, fields = self.component, self.task, out.fields
        count = len(chosen)
        if make_anchors is None:
            for task in chosen:
                lists[task].append(
                    (task, Tuple(values, component, stream, source, fields, trees), None)
                )
            if trees is not None:
                for tree in trees:
                    tree.pending += count
        else:
            for task in chosen:
                anchors = make_anchors()
                lists[task].append(
                    (task, Tuple(values, component, stream, source, fields, anchors), None)
                )
        self.outbox.size += count
        metrics = self.metrics
        metrics.emitted += 1
        metrics.transferred += count
        if self.capture is not None:
            self.capture.append((component, stream, values))
        return chosen[:]  # a copy: some choosers answer with a list of their own

    def _send_routed(
        self,
        out: _StreamOut,
        stream: str,
        values: tuple[Any, ...],
        direct_task: int | None,
        make_anchors: Callable[[], Anchors] | None,
        trees: tuple[CountedTree, ...] | None,
    ) -> list[int]:
        """``send`` for everything but its common case: several routes, a direct task,
        targets in other workers, serialization."""
        if direct_task is None:
            if out.direct:
                raise ValueError(
                    f"{self.component!r} emitted on direct stream {stream!r} without a task: "
                    f"use emit_direct(task, values, stream={stream!r})"
                )
            picks = [(choose(values), blocking, lists) for choose, blocking, lists in out.picks]
        else:
            if not out.direct:
                raise ValueError(
                    f"{self.component!r} used emit_direct on stream {stream!r}, which is not "
                    "direct: declare it Stream(..., direct=True) or use emit"
                )
            target = out.direct_targets.get(direct_task)
            if target is None:
                raise ValueError(
                    f"{self.component!r} emitted directly to task {direct_task}, which does not "
                    f"subscribe to stream {stream!r}; subscribed tasks: "
                    f"{sorted(out.direct_targets)}"
                )
            blocking, items = target
            picks = [([direct_task], blocking, {} if items is None else {direct_task: items})]
        blob = None
        if self.always_serialize or not out.all_local:
            remote = self.always_serialize
            for tasks, _, lists in picks:
                for task in tasks:
                    if task not in lists:
                        remote = True
            if remote:
                try:
                    blob = self._dumps(values)
                except Exception:  # again, value by value, to say which one
                    blob = dumps_values(self.serializer, values, out.names, self.component, stream)
                if len(blob) > self.max_tuple_bytes:
                    raise SerializationError(
                        f"{self.component!r} emitted a tuple of {len(blob)} bytes on stream "
                        f"{stream!r}, more than max_tuple_bytes ({self.max_tuple_bytes}): "
                        "emit smaller values, or raise the topology's max_tuple_bytes"
                    )
        outbox, pack = self.outbox, self._pack
        component, source, fields = self.component, self.task, out.fields
        sent = []
        queued = 0
        for tasks, blocking, lists in picks:
            for task in tasks:
                anchors = trees if make_anchors is None else make_anchors()
                items = lists.get(task)
                if items is not None:
                    items.append(
                        (task, Tuple(values, component, stream, source, fields, anchors), None)
                    )
                    queued += 1
                else:
                    outbox.remote(task, pack([TUPLE, source, stream, anchors, blob]), blocking)
                sent.append(task)
        if trees is not None:
            for tree in trees:
                tree.pending += len(sent)
        outbox.size += queued
        metrics = self.metrics
        metrics.emitted += 1
        metrics.transferred += len(sent)
        if self.capture is not None:
            self.capture.append((component, stream, values))
        return sent
