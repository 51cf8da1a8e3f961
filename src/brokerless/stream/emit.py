"""A task's emit path: from ``emit(values)`` to a copy for each target task in the outbox.

Theory of operation
-------------------
:meth:`Emitter.send` runs in the emitter's thread: the routes (a chooser per subscribing
component, see ``routing.py``) give the target tasks; the values are serialized once, and only
if some target is in another worker (or ``always_try_serialize``), before anything is sent, so
a value that cannot be serialized (or that serializes into more than ``max_tuple_bytes``)
fails that emit alone.  Each target gets its own anchors (fresh edge ids, from the
``make_anchors`` the collector passes).  A target in this worker gets a :class:`Tuple`
object, a target elsewhere an encoded payload for the worker's transfer queue; both go into
the executor's outbox (``transfer.py``), flushed after each batch the executor handles.  The
flush waits for room in a full local queue, or for credits towards another worker: that wait
is the back pressure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .host import Host
from .metrics import ExecutorMetrics
from .protocol import TUPLE, encode
from .routing import StreamRoute, build_routes
from .serializer import SerializationError, dumps_values
from .transfer import Outbox
from .tuple import Tuple


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
        self.local_queues = worker.exchange.local_queues
        self.always_serialize = plan.config.always_try_serialize
        self.all_local = {
            stream: route.possible_targets <= worker.tasks for stream, route in self.routes.items()
        }
        self.serializer = plan.config.serializer
        self.max_tuple_bytes = plan.config.max_tuple_bytes
        self.capture = worker.capture
        self.outbox = outbox

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
