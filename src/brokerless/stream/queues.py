"""The queues between a worker's threads.

Theory of operation
-------------------
Every executor has one :class:`BoundedQueue`; so does each worker's sender thread (the
transfer queue).  A queue has two parts under one lock:

* the *bounded* part takes local data tuples with ``put``/``put_many``, which wait while
  ``capacity`` tuples are queued: that wait is back pressure, it slows the emitter down to
  the consumer's pace, and through it the spouts;
* the *unbounded* part takes, with ``push``/``push_many``, what must never wait: control
  messages (acker traffic, acks to spouts), tuples arriving from other workers (they were
  admitted by flow-control credits before they were sent, see ``worker.py``), and tuples on
  an edge inside a cycle of bolts (where waiting could deadlock).  What it holds is bounded
  by the data in flight, not by a capacity.

Producers hand over many items at once (an executor flushes what it emitted while handling a
batch, see ``transfer.py``), the consumer takes many per lock hand-over (``take``), and each
side signals the other only when it may be asleep: a put wakes the consumer only if it waits
on an empty queue; a take wakes producers only if some wait for room.  A queue has one
consumer thread (its executor, sender or writer), so the consumer sleeps on a lock of its own
used as a binary semaphore (``_wake``): waking it is one ``release``, where a Condition's
``notify`` costs a waiter list and a lock per wait -- the receiver thread that fills every
executor's queue pays that per batch.  ``close`` wakes
everyone: a blocked ``put`` or ``take`` then raises :class:`Shutdown`, a BaseException so
that a component's ``except Exception`` cannot swallow the end of its topology.

When one thread runs every executor of a worker (``shared_thread.py``) nobody may wait on a
queue: that thread never sleeps in ``take``, its own puts pass ``wait=False`` (the bounded part
may then go past its capacity, which ``full`` shows to the thread's back pressure), and it
sleeps on one ``bell`` (an Event) that every queue of the worker sets when it gets items or
closes.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any


class Shutdown(BaseException):
    """The queue was closed: the topology is stopping."""


class BoundedQueue:
    __slots__ = (
        "_bell",
        "_bounded",
        "_capacity",
        "_closed",
        "_lock",
        "_reader_waits",
        "_room",
        "_unbounded",
        "_wake",
        "_writers_waiting",
        "max_depth",
        "puts",
    )

    def __init__(self, capacity: int | None = None, bell: threading.Event | None = None) -> None:
        self._capacity = capacity
        self._bell = bell  # set when items come or the queue closes (see the module doc)
        self._bounded: deque[Any] = deque()
        self._unbounded: deque[Any] = deque()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        #: Held, except between a put that wakes the waiting consumer and the consumer taking
        #: the wake-up (see the module doc); ``_reader_waits`` says a release is owed.
        self._wake = threading.Lock()
        self._wake.acquire()
        self._reader_waits = False
        self._writers_waiting = 0
        self._closed = False
        self.puts = 0  # items ever queued (the completion detector counts them)
        self.max_depth = 0

    @property
    def capacity(self) -> int | None:
        return self._capacity

    @property
    def full(self) -> bool:
        """The bounded part holds its capacity (or more: puts that did not wait)."""
        return self._capacity is not None and len(self._bounded) >= self._capacity

    @property
    def depth(self) -> int:
        return len(self._bounded) + len(self._unbounded)

    def put(self, item: Any) -> None:
        """Queue ``item`` in the bounded part, waiting while it is full."""
        self.put_many((item,))

    def put_many(self, items: Sequence[Any], wait: bool = True) -> None:
        """Queue ``items`` in order in the bounded part, waiting for room as needed (with
        ``wait=False``, not: past the capacity if need be)."""
        if not items:
            return
        capacity = self._capacity
        if capacity is None:
            raise TypeError("this queue has no bounded part (capacity None): push instead")
        with self._lock:
            bounded = self._bounded
            if not wait:
                if self._closed:
                    raise Shutdown
                bounded.extend(items)
                self._queued(len(items))
                return
            done, n = 0, len(items)
            while True:
                if self._closed:
                    raise Shutdown
                room = capacity - len(bounded)
                if room > 0:
                    take = min(room, n - done)
                    bounded.extend(items[done : done + take] if take != n else items)
                    done += take
                    self._queued(take)
                    if done == n:
                        return
                self._writers_waiting += 1
                try:
                    self._room.wait()
                finally:
                    self._writers_waiting -= 1

    def push(self, item: Any) -> None:
        """Queue ``item`` without waiting (control traffic, credited or cyclic tuples)."""
        self.push_many((item,))

    def push_many(self, items: Sequence[Any]) -> None:
        """Queue ``items`` in order without waiting."""
        with self._lock:
            if self._closed:
                raise Shutdown
            self._unbounded.extend(items)
            self._queued(len(items))

    def _queued(self, count: int) -> None:
        self.puts += count
        depth = len(self._bounded) + len(self._unbounded)
        if depth > self.max_depth:
            self.max_depth = depth
        if self._reader_waits:
            self._reader_waits = False
            self._wake.release()
        bell = self._bell
        if bell is not None and not bell.is_set():
            bell.set()

    def wait(self, timeout: float | None) -> None:
        """Wait up to ``timeout`` seconds (None: forever) until the queue holds an item; raises
        :class:`Shutdown` once it is closed.  Only the queue's one consumer thread calls it."""
        with self._lock:
            if self._closed:
                raise Shutdown
            if not self._bounded and not self._unbounded and timeout != 0:
                self._sleep(timeout)
                if self._closed:
                    raise Shutdown

    def pause(self, timeout: float) -> None:
        """Wait ``timeout`` seconds whatever the queue holds (its consumer can do nothing with
        its items yet), unless it closes first: then :class:`Shutdown`.  Consumer only."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._sleep(left)
            raise Shutdown

    def take(self, max_items: int, timeout: float | None = None) -> list[Any]:
        """Up to ``max_items`` from each part, waiting up to ``timeout`` seconds (None:
        forever, 0: not at all) for the first; [] when the time ran out.  Only the queue's
        one consumer thread calls it."""
        with self._lock:
            if self._closed:
                raise Shutdown
            if not self._bounded and not self._unbounded:
                if timeout == 0:
                    return []
                self._sleep(timeout)
                if self._closed:
                    raise Shutdown
            items = _pop(self._bounded, max_items)
            if items and self._writers_waiting:
                self._room.notify(len(items))
            more = _pop(self._unbounded, max_items)
            if more:
                items.extend(more)
            return items

    def _sleep(self, timeout: float | None) -> None:
        """Wait (the lock let go) until a put or ``close`` wakes the consumer, or ``timeout``."""
        self._reader_waits = True
        self._lock.release()
        try:
            woken = self._wake.acquire(True, -1 if timeout is None else timeout)
        finally:
            self._lock.acquire()
        if self._reader_waits:  # nobody came: it waits no more
            self._reader_waits = False
        elif not woken:  # a put came between the timeout and now: take its wake-up back
            self._wake.acquire()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._reader_waits:
                self._reader_waits = False
                self._wake.release()
            self._room.notify_all()
        if self._bell is not None:
            self._bell.set()

    def __repr__(self) -> str:
        return f"<BoundedQueue {self.depth}/{self._capacity} max={self.max_depth}>"


def _pop(queue: deque[Any], max_items: int) -> list[Any]:
    if len(queue) <= max_items:
        items = list(queue)
        queue.clear()
        return items
    popleft = queue.popleft
    return [popleft() for _ in range(max_items)]
