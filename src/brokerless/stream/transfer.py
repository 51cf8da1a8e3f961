"""How an executor hands what it emitted over: its outbox, the worker's transfer queue, and
the credits that bound what may be in flight to another worker.

Theory of operation
-------------------
An executor collects everything it emits while it handles a batch in its :class:`Outbox`,
grouped by destination, and flushes it once per batch -- one hand-over (one lock, at most one
wake-up) per destination instead of one per tuple:

* control messages (acker traffic) and tuples that must not wait (on an edge inside a cycle)
  go first, without waiting: to a local executor's queue, or onto the worker's transfer queue
  as ``(worker, task frame, payload)`` for its sender thread.  The acker traffic for one task
  travels as one ``[BATCH, [message, ...]]`` per flush -- one queue item for a task in this
  worker, one pair for a task in another: an ack costs its consumer a loop step, not a queue
  item or a pair;
* then tuples for executors in this worker, waiting for room in their queues (back pressure);
* then tuples for executors in other workers, waiting for :class:`Credits` towards each (see
  ``worker.py``: a worker has at most one window of tuples in flight to a remote executor).

The :class:`Exchange` is what every outbox of one worker hands over to: the worker's tables
(task -> queue, worker, executor, task frame), its transfer queue and its credits.

An outbox made with ``waits=False`` (the executors of a shared thread, ``shared_thread.py``)
never waits: its local tuples go past a full queue's bound, and what finds no credits stays in
the outbox (``held``) for a later flush, when the credits came back.  Its thread does the
waiting instead, by not running the executor while the outbox is ``blocked``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .protocol import BATCH, CREDIT, WORKER_TASK, encode, task_frame
from .queues import BoundedQueue, Shutdown

_WORKER_FRAME = task_frame(WORKER_TASK)
#: Acker messages in one BATCH pair at most (a few dozen bytes each: far below the virtual
#: port's MAXMSGSIZE, whose headroom is protocol.HEADER_ROOM).
_MAX_WIRE_BATCH = 4096


class Credits:
    """How many more tuples this worker may send to each remote bolt executor: at most a
    window each, however many credits come back (only a forged credit could exceed it)."""

    def __init__(
        self, window: int, executors: list[int], bell: threading.Event | None = None
    ) -> None:
        self.window = window
        self._bell = bell  # set when credits come back (a shared thread sleeps on it)
        self._available = dict.fromkeys(executors, window)
        self._changed = threading.Condition(threading.Lock())
        self._waiting = 0
        self._closed = False

    @property
    def executors(self) -> frozenset[int]:
        """The remote bolt executors this worker may send tuples to."""
        return frozenset(self._available)

    def take(self, executor: int, wanted: int, wait: bool = True) -> int:
        """Take up to ``wanted`` credits for ``executor``, waiting until there is one (with
        ``wait=False``: none, maybe 0)."""
        with self._changed:
            if self._available[executor] == 0 and wait:
                self._waiting += 1
                try:
                    while self._available[executor] == 0 and not self._closed:
                        self._changed.wait()
                finally:
                    self._waiting -= 1
            if self._closed:
                raise Shutdown
            granted = min(wanted, self._available[executor])
            self._available[executor] -= granted
            return granted

    def release(self, executor: int, count: int) -> None:
        with self._changed:
            self._available[executor] = min(self.window, self._available[executor] + count)
            if self._waiting:
                self._changed.notify_all()
        if self._bell is not None:
            self._bell.set()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._bell is not None:
            self._bell.set()


@dataclass(frozen=True)
class Exchange:
    """Where one worker's executors hand tuples over (see the module doc)."""

    #: task -> its executor's queue, for the tasks in this worker
    local_queues: Mapping[int, BoundedQueue]
    #: task -> the worker it runs in; task -> its executor; task -> its 4-byte frame
    task_worker: Mapping[int, int]
    task_executor: Mapping[int, int]
    frames: Mapping[int, bytes]
    #: what the worker's sender thread sends: (worker, task frame, payload)
    transfer: BoundedQueue
    credits: Credits


class Outbox:
    """What one executor emitted since it last flushed, grouped by destination (see the
    module doc)."""

    __slots__ = (
        "_blocking",
        "_control",
        "_credited",
        "_exchange",
        "_lists",
        "_pushed",
        "_remote_control",
        "_transfer",
        "_waits",
        "size",
    )

    def __init__(self, exchange: Exchange, waits: bool = True) -> None:
        self._exchange = exchange
        self._waits = waits  # False: never wait (see the module doc)
        self._control: dict[int, list[Any]] = {}  # local task -> its acker traffic
        self._remote_control: dict[int, list[Any]] = {}  # task in another worker -> the same
        #: (queue, blocking) -> the items for it; the lists stay, emptied by each flush
        self._lists: dict[tuple[BoundedQueue, bool], list[Any]] = {}
        self._pushed: list[tuple[BoundedQueue, list[Any]]] = []
        self._blocking: list[tuple[BoundedQueue, list[Any]]] = []
        self._transfer: list[Any] = []  # for other workers, no credit needed
        self._credited: dict[int, list[Any]] = {}  # executor id -> for other workers
        #: items held; whoever appends to an ``items_for`` list adds to it
        self.size = 0

    def items_for(self, queue: BoundedQueue, blocking: bool) -> list[Any]:
        """The list that items for ``queue`` go into until the next flush (the same list every
        time: an emit path keeps it at hand, appends to it and counts in ``size``)."""
        key = (queue, blocking)
        items = self._lists.get(key)
        if items is None:
            items = self._lists[key] = []
            (self._blocking if blocking else self._pushed).append((queue, items))
        return items

    def local(self, queue: BoundedQueue, item: Any, blocking: bool) -> None:
        """A tuple (or barrier) for a task in this worker."""
        self.items_for(queue, blocking).append(item)
        self.size += 1

    def remote(self, task: int, payload: bytes, blocking: bool) -> None:
        """A tuple for a task in another worker (``blocking``: it needs a credit)."""
        exchange = self._exchange
        item = (exchange.task_worker[task], exchange.frames[task], payload)
        if blocking:
            executor = exchange.task_executor[task]
            items = self._credited.get(executor)
            if items is None:
                self._credited[executor] = [item]
            else:
                items.append(item)
        else:
            self._transfer.append(item)
        self.size += 1

    def control(self, task: int, message: tuple[Any, ...]) -> None:
        """A control message (acker traffic) for ``task``; never waits."""
        batch = self._control.get(task)
        if batch is not None:
            batch.append(message)
        elif task in self._exchange.local_queues:
            self._control[task] = [message]
        else:
            remote = self._remote_control.get(task)
            if remote is None:
                self._remote_control[task] = [message]
            else:
                remote.append(message)
        self.size += 1

    def credit(self, worker: int, executor: int, count: int) -> None:
        """Give ``worker`` back ``count`` credits for ``executor`` (this worker's)."""
        self._transfer.append((worker, _WORKER_FRAME, encode([CREDIT, executor, count])))
        self.size += 1

    def flush(self) -> None:
        if not self.size:
            return
        exchange = self._exchange
        if self._control:
            local_queues = exchange.local_queues
            for task, batch in self._control.items():
                self.local(local_queues[task], (task, [BATCH, batch], None), blocking=False)
            self._control.clear()
        if self._remote_control:
            for task, batch in self._remote_control.items():
                worker, frame = exchange.task_worker[task], exchange.frames[task]
                for start in range(0, len(batch), _MAX_WIRE_BATCH):
                    part = batch[start : start + _MAX_WIRE_BATCH]
                    payload = encode(part[0] if len(part) == 1 else [BATCH, part])
                    self._transfer.append((worker, frame, payload))
            self._remote_control.clear()
        for queue, items in self._pushed:
            if items:
                queue.push_many(items)  # (it copies them)
                items.clear()
        if self._transfer:
            exchange.transfer.push_many(self._transfer)
            self._transfer = []
        waits = self._waits
        for queue, items in self._blocking:
            if items:
                queue.put_many(items, waits)
                items.clear()
        held = 0
        if self._credited:
            take, push_many = exchange.credits.take, exchange.transfer.push_many
            for executor, items in list(self._credited.items()):
                done = 0
                while done < len(items):
                    granted = take(executor, len(items) - done, waits)
                    if not granted:  # (only when it does not wait)
                        break
                    push_many(items[done : done + granted])
                    done += granted
                if done == len(items):
                    del self._credited[executor]
                else:
                    del items[:done]
                    held += len(items)
        self.size = held

    @property
    def held(self) -> bool:
        """Tuples for other workers wait here for credits (an outbox that does not wait)."""
        return bool(self._credited)

    @property
    def blocked(self) -> bool:
        """An emit would have to wait: tuples are ``held``, or a queue that this outbox's
        tuples wait for room in is full (for an outbox that does not wait, its executor's
        turn to wait: see ``shared_thread.py``)."""
        return self.held or any(queue.full for queue, _ in self._blocking)
