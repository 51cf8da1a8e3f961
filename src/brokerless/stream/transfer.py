"""How an executor hands what it emitted over: its outbox, the worker's transfer queue, and
the credits that bound what may be in flight to another worker.

Theory of operation
-------------------
An executor collects everything it emits while it handles a batch in its :class:`Outbox`,
grouped by destination, and flushes it once per batch -- one hand-over (one lock, at most one
wake-up) per destination instead of one per tuple:

* control messages (acker traffic) and tuples that must not wait (on an edge inside a cycle)
  go first, without waiting: to a local executor's queue, or onto the worker's transfer queue
  as ``(worker, task frame, payload)`` for its sender thread;
* then tuples for executors in this worker, waiting for room in their queues (back pressure);
* then tuples for executors in other workers, waiting for :class:`Credits` towards each (see
  ``worker.py``: a worker has at most one window of tuples in flight to a remote executor).

The :class:`Exchange` is what every outbox of one worker hands over to: the worker's tables
(task -> queue, worker, executor, task frame), its transfer queue and its credits.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .protocol import CREDIT, WORKER_TASK, encode, task_frame
from .queues import BoundedQueue, Shutdown

_WORKER_FRAME = task_frame(WORKER_TASK)


class Credits:
    """How many more tuples this worker may send to each remote bolt executor: at most a
    window each, however many credits come back (only a forged credit could exceed it)."""

    def __init__(self, window: int, executors: list[int]) -> None:
        self.window = window
        self._available = dict.fromkeys(executors, window)
        self._changed = threading.Condition(threading.Lock())
        self._waiting = 0
        self._closed = False

    @property
    def executors(self) -> frozenset[int]:
        """The remote bolt executors this worker may send tuples to."""
        return frozenset(self._available)

    def take(self, executor: int, wanted: int) -> int:
        """Take up to ``wanted`` credits for ``executor``, waiting until there is one."""
        with self._changed:
            if self._available[executor] == 0:
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

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()


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

    __slots__ = ("_blocking", "_credited", "_exchange", "_pushed", "_transfer", "size")

    def __init__(self, exchange: Exchange) -> None:
        self._exchange = exchange
        self._pushed: dict[BoundedQueue, list[Any]] = {}
        self._blocking: dict[BoundedQueue, list[Any]] = {}
        self._transfer: list[Any] = []  # for other workers, no credit needed
        self._credited: dict[int, list[Any]] = {}  # executor id -> for other workers
        self.size = 0

    def local(self, queue: BoundedQueue, item: Any, blocking: bool) -> None:
        """A tuple for a task in this worker."""
        by_queue = self._blocking if blocking else self._pushed
        items = by_queue.get(queue)
        if items is None:
            by_queue[queue] = [item]
        else:
            items.append(item)
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

    def control(self, task: int, message: list[Any]) -> None:
        """A control message (acker traffic) for ``task``; never waits."""
        exchange = self._exchange
        queue = exchange.local_queues.get(task)
        if queue is not None:
            self.local(queue, (task, message, None), blocking=False)
        else:
            self._transfer.append(
                (exchange.task_worker[task], exchange.frames[task], encode(message))
            )
            self.size += 1

    def credit(self, worker: int, executor: int, count: int) -> None:
        """Give ``worker`` back ``count`` credits for ``executor`` (this worker's)."""
        self._transfer.append((worker, _WORKER_FRAME, encode([CREDIT, executor, count])))
        self.size += 1

    def flush(self) -> None:
        if not self.size:
            return
        exchange = self._exchange
        if self._pushed:
            for queue, items in self._pushed.items():
                queue.push_many(items)
            self._pushed.clear()
        if self._transfer:
            exchange.transfer.push_many(self._transfer)
            self._transfer = []
        if self._blocking:
            for queue, items in self._blocking.items():
                queue.put_many(items)
            self._blocking.clear()
        if self._credited:
            take, push_many = exchange.credits.take, exchange.transfer.push_many
            for executor, items in self._credited.items():
                done = 0
                while done < len(items):
                    granted = take(executor, len(items) - done)
                    push_many(items[done : done + granted])
                    done += granted
            self._credited.clear()
        self.size = 0
