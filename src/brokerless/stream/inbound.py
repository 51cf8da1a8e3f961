"""The receive side of a worker's virtual port: a batch in, checked queue items out.

Theory of operation
-------------------
With ``security="none"`` whoever reaches a worker's virtual port can send it batches (in
Spark mode it listens on every interface); with CURVE (the default, ``security.py``) only the
run's own workers can, but a worker's bug must not break another's executors either.  Every
executor thread assumes its queue holds only what it can handle.  So :meth:`Inbound.read`
checks each ``[task, payload]`` pair against the executor that the task belongs to, and
against the topology, *before* anything is queued:

* ``TUPLE`` only to a bolt task, from a task of a component that the bolt subscribes to, on a
  stream it subscribes to; anchors None or ``{root: edge id}`` of integers; values that the
  serializer decodes into as many values as the stream has fields;
* ``BARRIER [source, checkpoint]`` only to a bolt task of a checkpointed topology, from a task
  upstream of it, with an integer checkpoint id >= 1 (what a forged one can do to a task's
  alignment is bounded: ``stateful.py``);
* ``ACK_INIT [root, xor, spout task]``, ``ACK [root, xor]``, ``FAIL [root]`` and
  ``RESET_TIMEOUT [root]`` only to an acker task: integers, the spout task one of the
  topology's spout tasks;
* ``ACKED [root]``, ``FAILED [root]`` and ``RESET_TIMEOUT [root]`` only to a spout task: an
  integer root;
* ``BATCH [[message, ...]]``: one or more of those for one acker or spout task, each checked as
  above (one bad message in it makes the whole pair a bad message);
* ``CREDIT [executor, count]`` only to task 0 (the worker itself), for a bolt executor in
  another worker that this worker sends tuples to, with ``0 < count <= window``.

A pair that fails a check is a *bad message*: it is dropped with its reason and the rest of the
batch goes on.  A batch whose frames do not make pairs, or that has more pairs than a worker
ever sends at once (MAX_BATCH), is one bad message.  The worker counts bad messages
(``bad_messages`` in its metrics) and reports the first from each sender in ``errors()``
(``Link.deliver``, ``link.py``).  Without CURVE, messages that pass are still not
authenticated: a peer that forges well-formed traffic is beyond what these checks can see (see
the README's security notes).

Cost: the checks are type tests and dict lookups on what decoding produced anyway, through
tables built once per worker (a pair's task frame itself is the key that finds its executor);
a bolt's checks are inline in ``read``, the hot path of remote tuples, and a batch of good
pairs raises nothing.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import msgpack

from .component import ComponentKind
from .plan import TopologyPlan
from .protocol import (
    ACK,
    ACK_INIT,
    ACKED,
    BARRIER,
    BATCH,
    CREDIT,
    FAIL,
    FAILED,
    KIND_NAMES,
    MAX_BATCH,
    RESET_TIMEOUT,
    TUPLE,
    WORKER_TASK,
    Barrier,
    task_frame,
)
from .queues import BoundedQueue
from .tuple import Fields, Tuple

_repr = reprlib.Repr()  # bounded: a hostile payload's repr costs little and stays short
_repr.maxstring = _repr.maxother = 40
_repr.maxlist = _repr.maxdict = 4
_repr.maxlevel = 2
_brief = _repr.repr

_Check = Callable[[int, list[Any], Any], Any]

#: source task -> stream -> (source component, the stream's fields, how many, the worker to
#: return a credit to or None on an edge inside a cycle)
_Sources = dict[int, dict[str, tuple[str, Fields, int, int | None]]]


class Receiver(Protocol):
    """An executor as the receive side sees it (``executor.Executor`` is one)."""

    kind: ComponentKind
    component: str
    task_ids: tuple[int, ...]
    queue: BoundedQueue


class BadMessage(ValueError):
    """A message that a worker received and dropped; says what was wrong with it."""


@dataclass(slots=True)
class Accepted:
    """What :meth:`Inbound.read` made of one batch."""

    items: dict[BoundedQueue, list[Any]]  # queue -> its new items, in order
    credits: list[tuple[int, int]]  # (executor, count)
    pairs: int  # pairs accepted
    bad: list[str]  # why each bad message was dropped


class Inbound:
    """Checks the batches that reach one worker (see the module doc)."""

    def __init__(
        self,
        plan: TopologyPlan,
        task_worker: dict[int, int],
        executors: Iterable[Receiver],
        credited: Iterable[int],
        window: int,
    ) -> None:
        self._loads = plan.config.serializer.loads
        self._checkpointed = plan.checkpointed
        self._spout_tasks = frozenset(
            t for c in plan.components.values() if c.kind is ComponentKind.SPOUT for t in c.tasks
        )
        self._credited = frozenset(credited)
        self._window = window
        checks: dict[ComponentKind, _Check | None] = {
            ComponentKind.BOLT: None,  # checked in read(), the hot path of remote tuples
            ComponentKind.SPOUT: self._to_spout,
            ComponentKind.ACKER: self._to_acker,
        }
        sources: dict[str, _Sources] = {}
        #: task frame -> (task, its check (None: a bolt's), its queue (None: the worker's),
        #: a bolt's sources)
        self._targets: dict[bytes, tuple[int, _Check | None, BoundedQueue | None, Any]] = {
            task_frame(WORKER_TASK): (WORKER_TASK, self._credit, None, None),
        }
        for executor in executors:
            table = None
            if executor.kind is ComponentKind.BOLT:
                table = sources.get(executor.component)
                if table is None:
                    table = sources[executor.component] = _sources(
                        plan, task_worker, executor.component
                    )
            for task in executor.task_ids:
                self._targets[task_frame(task)] = (
                    task,
                    checks[executor.kind],
                    executor.queue,
                    table,
                )

    def read(self, frames: list[bytes]) -> Accepted:
        """Check one batch; what passes is grouped by queue (items) or is a credit."""
        items: dict[BoundedQueue, list[Any]] = {}
        credits: list[tuple[int, int]] = []
        bad: list[str] = []
        n = len(frames)
        if n & 1 or n > 2 * MAX_BATCH:
            bad.append(f"a batch of {n} frames: a batch is up to {MAX_BATCH} [task, payload] pairs")
            return Accepted(items, credits, 0, bad)
        targets = self._targets
        unpackb = msgpack.unpackb
        loads = self._loads
        for i in range(0, n, 2):
            try:
                target = targets.get(frames[i])
                if target is None:
                    raise BadMessage(_not_a_task(frames[i]))
                task, check, queue, sources = target
                try:
                    message = unpackb(frames[i + 1], raw=False, strict_map_key=False)
                except Exception as exc:
                    raise BadMessage(
                        f"a payload for task {task} that is not msgpack: {_brief(exc)}"
                    ) from None
                if message.__class__ is not list or not message or message[0].__class__ is not int:
                    raise BadMessage(
                        f"a payload for task {task} that is not a [kind, ...] message: "
                        f"{_brief(message)}"
                    )
                if check is not None:
                    item = check(task, message, sources)
                elif message[0] != TUPLE or len(message) != 5:
                    item = self._to_bolt(task, message, sources)
                else:  # a bolt's tuple: the hot path of remote tuples, so checked here, inline
                    _, source, stream, anchors, blob = message
                    streams = sources.get(source) if source.__class__ is int else None
                    route = (
                        streams.get(stream)
                        if streams is not None and stream.__class__ is str
                        else None
                    )
                    if route is None:
                        raise BadMessage(
                            f"TUPLE for task {task} from task {_brief(source)} on "
                            f"stream {_brief(stream)}, which it does not "
                            "subscribe to"
                        )
                    if anchors is not None:
                        if anchors.__class__ is not dict:
                            raise BadMessage(
                                f"TUPLE for task {task} with anchors "
                                f"{_brief(anchors)}: anchors are None or "
                                "{root: edge id}"
                            )
                        for root, edge in anchors.items():
                            if root.__class__ is not int or edge.__class__ is not int:
                                raise BadMessage(
                                    f"TUPLE for task {task} with anchors "
                                    f"{_brief(anchors)}: roots and edge ids are "
                                    "integers"
                                )
                    if blob.__class__ is not bytes:
                        raise BadMessage(
                            f"TUPLE for task {task} with values {_brief(blob)}: "
                            "values are serialized bytes"
                        )
                    component, fields, width, origin = route
                    try:
                        values = loads(blob)
                    except Exception as exc:
                        raise BadMessage(
                            f"TUPLE for task {task} whose values do not decode: {_brief(exc)}"
                        ) from None
                    if (values.__class__ is not list and not isinstance(values, tuple)) or len(
                        values
                    ) != width:
                        raise BadMessage(
                            f"TUPLE for task {task} with values {_brief(values)}: "
                            f"stream {stream!r} of {component!r} has {width} "
                            "field(s)"
                        )
                    item = (
                        task,
                        Tuple(tuple(values), component, stream, source, fields, anchors),
                        origin,
                    )
            except BadMessage as exc:
                bad.append(str(exc))
                continue
            if queue is None:
                credits.append(item)
            else:
                queued = items.get(queue)
                if queued is None:
                    items[queue] = [item]
                else:
                    queued.append(item)
        return Accepted(items, credits, (n >> 1) - len(bad), bad)

    # -- the other receivers' checks: each returns the item to queue or raises BadMessage ----

    def _to_bolt(self, task: int, message: list[Any], sources: _Sources) -> Any:
        """What a bolt takes besides tuples: a barrier, when the topology is checkpointed."""
        if not self._checkpointed or message[0] != BARRIER or len(message) != 3:
            barrier = " or BARRIER [source, checkpoint]" if self._checkpointed else ""
            raise BadMessage(
                f"{_kind(message)} for bolt task {task}: a bolt takes only TUPLE [source, "
                f"stream, anchors, values]{barrier}"
            )
        _, source, checkpoint = message
        streams = sources.get(source) if source.__class__ is int else None
        if streams is None:
            raise BadMessage(
                f"BARRIER for task {task} from task {_brief(source)}, which is not upstream of it"
            )
        if checkpoint.__class__ is not int or checkpoint < 1:
            raise BadMessage(
                f"BARRIER for task {task} of checkpoint {_brief(checkpoint)}: checkpoint ids "
                "are integers >= 1"
            )
        origin = next(iter(streams.values()))[3]  # one per source: every stream's is the same
        return task, Barrier(source, checkpoint), origin

    def _to_acker(self, task: int, message: list[Any], _: None) -> Any:
        if message[0] == BATCH:
            return task, [BATCH, self._each(task, message, self._acker_message)], None
        return task, self._acker_message(task, message), None

    def _to_spout(self, task: int, message: list[Any], _: None) -> Any:
        if message[0] == BATCH:
            return task, [BATCH, self._each(task, message, self._spout_message)], None
        return task, self._spout_message(task, message), None

    def _each(
        self, task: int, message: list[Any], check: Callable[[int, list[Any]], list[Any]]
    ) -> list[Any]:
        """The messages of a BATCH for ``task``, each passed by ``check``."""
        if len(message) != 2 or message[1].__class__ is not list or not message[1]:
            raise BadMessage(
                f"BATCH for task {task} that is not [BATCH, [message, ...]] of one or more "
                f"messages: {_brief(message)}"
            )
        for inner in message[1]:
            if inner.__class__ is not list or not inner or inner[0].__class__ is not int:
                raise BadMessage(
                    f"BATCH for task {task} holding {_brief(inner)}: it holds [kind, ...] "
                    "messages"
                )
            check(task, inner)
        batch: list[Any] = message[1]
        return batch

    def _acker_message(self, task: int, message: list[Any]) -> list[Any]:
        kind, n = message[0], len(message)
        if not (
            (kind == ACK and n == 3)
            or (kind == ACK_INIT and n == 4)
            or (kind in (FAIL, RESET_TIMEOUT) and n == 2)
        ):
            raise BadMessage(
                f"{_kind(message)} of {n - 1} field(s) for acker task {task}: an "
                "acker takes ACK_INIT [root, xor, spout task], ACK [root, xor], "
                "FAIL [root] or RESET_TIMEOUT [root]"
            )
        for value in message:
            if value.__class__ is not int:
                raise BadMessage(
                    f"{_kind(message)} for acker task {task} with "
                    f"{_brief(value)}: its fields are integers"
                )
        if kind == ACK_INIT and message[3] not in self._spout_tasks:
            raise BadMessage(
                f"ACK_INIT for acker task {task} names task {message[3]}, which is not a spout task"
            )
        return message

    def _spout_message(self, task: int, message: list[Any]) -> list[Any]:
        kind = message[0]
        if len(message) != 2 or (kind != ACKED and kind != FAILED and kind != RESET_TIMEOUT):
            raise BadMessage(
                f"{_kind(message)} of {len(message) - 1} field(s) for spout task "
                f"{task}: a spout takes only ACKED [root], FAILED [root] or RESET_TIMEOUT [root]"
            )
        if message[1].__class__ is not int:
            raise BadMessage(
                f"{_kind(message)} for spout task {task} with root "
                f"{_brief(message[1])}: roots are integers"
            )
        return message

    def _credit(self, task: int, message: list[Any], _: None) -> Any:
        if message[0] != CREDIT or len(message) != 3:
            raise BadMessage(
                f"{_kind(message)} for task 0 (the worker): it takes only CREDIT [executor, count]"
            )
        _, executor, count = message
        if executor.__class__ is not int or executor not in self._credited:
            raise BadMessage(
                f"CREDIT for executor {_brief(executor)}, which this worker does not send tuples to"
            )
        if count.__class__ is not int or not 0 < count <= self._window:
            raise BadMessage(
                f"CREDIT of {_brief(count)} for executor {executor}: a credit is "
                f"1 to {self._window} (the window)"
            )
        return executor, count


def _not_a_task(frame: Any) -> str:
    if len(frame) != 4:
        return f"a task frame of {len(frame)} bytes: task ids are 4 bytes"
    return f"a message for task {int.from_bytes(frame, 'little')}, which is not in this worker"


def _kind(message: list[Any]) -> str:
    kind = message[0]
    return KIND_NAMES[kind] if 0 <= kind < len(KIND_NAMES) else f"a message of kind {kind}"


def _sources(plan: TopologyPlan, task_worker: dict[int, int], component: str) -> _Sources:
    """Where ``component``'s tuples may come from (see ``_Sources``)."""
    sources: _Sources = {}
    for source, stream in plan.components[component].inputs:
        credited = (source, component) not in plan.cycle_edges
        fields = plan.schema(source, stream)
        for task in plan.components[source].tasks:
            origin = task_worker[task] if credited else None
            sources.setdefault(task, {})[stream] = (source, fields, len(fields), origin)
    return sources
