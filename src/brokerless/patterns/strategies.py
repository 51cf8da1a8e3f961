"""The building blocks socket types are made of: load-balance, fair-queue and distribute.

lb and fq keep their pipes in an :class:`ActiveList` whose first ``active`` entries are the pipes
usable now (libzmq's array-with-active-prefix): a pipe that is full (lb) or empty (fq) is
swapped behind the prefix and swapped back when its activation command arrives, so the common
case never scans idle pipes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..pipe import Lane, Pipe


class ActiveList:
    """Pipes in one list, the ones usable now first: ``pipes[:active]``.

    ``current`` walks the usable prefix round-robin.  Membership of the prefix is kept in a set,
    which makes activation idempotent (a spurious wake-up is harmless).
    """

    __slots__ = ("_usable", "active", "current", "pipes")

    def __init__(self) -> None:
        self.pipes: list[Pipe] = []
        self.active = 0
        self.current = 0
        self._usable: set[Pipe] = set()

    def attach(self, pipe: Pipe) -> None:
        self.pipes.append(pipe)
        self.activated(pipe)

    # Each change is written so that an exception from a signal handler (see "Interruptions"
    # in brokerless.transport.engine_state) leaves the list whole: the set, which says whether
    # it is done, changes last, after the call that could be cut short.

    def activated(self, pipe: Pipe) -> None:
        if pipe in self._usable:
            return
        self._swap(pipe, self.active)
        self.active += 1
        self._usable.add(pipe)

    def deactivate(self, pipe: Pipe) -> None:
        active = self.active - 1
        self._swap(pipe, active)
        if self.current >= active:
            self.current = 0
        self.active = active
        self._usable.discard(pipe)

    def terminated(self, pipe: Pipe) -> None:
        if pipe in self._usable:
            self.deactivate(pipe)
        if pipe in self.pipes:
            self.pipes.remove(pipe)

    def _swap(self, pipe: Pipe, index: int) -> None:
        pipes = self.pipes
        if pipes[index] is pipe:  # (a socket with one pipe: always)
            return
        i = pipes.index(pipe)
        pipes[i], pipes[index] = pipes[index], pipes[i]


class LoadBalancer(ActiveList):
    """Round-robin out over the pipes that have room (PUSH, DEALER, REQ)."""

    __slots__ = ()

    def activated(self, pipe: Pipe) -> None:
        if not pipe.terminating:
            super().activated(pipe)

    def send(self, msg: Any) -> Pipe | None:
        """Write ``msg`` to the next pipe with room and return it; None when all are full."""
        pipes = self.pipes
        while self.active:
            pipe = pipes[self.current]
            if pipe.write(msg):
                nxt = self.current + 1  # round-robin: the next usable pipe
                self.current = nxt if nxt < self.active else 0
                return pipe
            self.deactivate(pipe)
        return None

    def has_out(self) -> bool:
        pipes = self.pipes
        while self.active:
            pipe = pipes[self.current]
            if pipe.check_write():
                return True
            self.deactivate(pipe)
        return False


class FairQueue(ActiveList):
    """Round-robin in over the pipes that have messages (PULL, DEALER, ROUTER, SUB, ...).

    ``last_pipe`` is the pipe the last message came from (ROUTER prefixes its routing id).
    """

    __slots__ = ("last_pipe",)

    def __init__(self) -> None:
        super().__init__()
        self.last_pipe: Pipe | None = None

    def terminated(self, pipe: Pipe) -> None:
        super().terminated(pipe)
        if self.last_pipe is pipe:
            self.last_pipe = None

    def recv(self) -> Any:
        """The next message in fair order, or None when no pipe has one."""
        pipes = self.pipes
        usable = self._usable
        while self.active:
            pipe = pipes[self.current]
            msg = pipe.read()
            if msg is not None:
                self.last_pipe = pipe
                nxt = self.current + 1  # round-robin: the next usable pipe
                self.current = nxt if nxt < self.active else 0
                return msg
            if pipe in usable:  # empty (a terminated pipe has already left the list)
                self.deactivate(pipe)
        return None

    def has_in(self) -> bool:
        pipes = self.pipes
        usable = self._usable
        while self.active:
            pipe = pipes[self.current]
            if pipe.check_read():
                return True
            if pipe in usable:
                self.deactivate(pipe)
        return False


def _left_in(rest: Iterator[Pipe]) -> list[Pipe]:
    """What an iteration over a set of pipes has not reached yet; none when the set changed
    meanwhile (the socket used by a signal handler that cut the iteration short: not covered,
    and the handler's exception, not Python's RuntimeError, is what propagates)."""
    try:
        return list(rest)
    except RuntimeError:  # "Set changed size during iteration"
        return []


class Distributor:
    """Fan-out to a set of pipes; a pipe at its HWM misses the message (PUB, XPUB, XSUB)."""

    __slots__ = ("pipes",)

    def __init__(self) -> None:
        self.pipes: list[Pipe] = []

    def attach(self, pipe: Pipe) -> None:
        self.pipes.append(pipe)

    def terminated(self, pipe: Pipe) -> None:
        if pipe in self.pipes:
            self.pipes.remove(pipe)

    @staticmethod
    def send_to(msg: Any, pipes: Iterable[Pipe]) -> None:
        """Write ``msg`` to each of ``pipes``; a pipe at its HWM misses it.  All or nothing, as
        libzmq's send: an exception from a signal handler once the message went into one pipe
        (see "Interruptions" in :mod:`brokerless.transport.engine_state`) lets it go to the
        rest too before it propagates -- once in one subscriber's pipe it is sent, and a
        retried send would give that one a second copy (``write_all`` does the same).  Not
        covered: a second interruption while the rest are written, and a signal handler that
        uses the socket it interrupted (its own sends come first; a subscription it takes in
        changes ``pipes``) -- then subscribers after that point may miss the message."""
        sent = 0  # pipes it went into
        lane: Lane | None = None  # the outbound lane of the pipe being written,
        queued = 0  # and how many messages Pipe.write had queued in it before
        rest = iter(pipes)
        try:
            for pipe in rest:
                lane = pipe.outbound
                queued = lane.queued
                sent += pipe.write(msg)
        except BaseException:
            went_in = lane is not None and lane.queued != queued
            if sent or went_in:  # it is sent: the pipe it was at and the rest get it too
                if not went_in:
                    pipe.write(msg)
                for other in _left_in(rest):
                    other.write(msg)
            raise

    def send_to_all(self, msg: Any) -> None:
        self.send_to(msg, self.pipes)

    @staticmethod
    def all_writable(pipes: Any) -> bool:
        return all(pipe.check_write() for pipe in pipes)
