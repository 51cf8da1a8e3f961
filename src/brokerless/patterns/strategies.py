"""The building blocks socket types are made of: load-balance, fair-queue and distribute.

Each keeps its pipes in one list whose first ``active`` entries are the pipes it may use now
(libzmq's array-with-active-prefix): a pipe that is full (lb) or empty (fq) is swapped behind the
prefix and swapped back when its activation command arrives, so the common case never scans
idle pipes.  ``Pipe.active_in`` / ``Pipe.active_out`` say which side of the prefix a pipe is on,
which makes activation idempotent (a spurious wake-up is harmless).
"""

from __future__ import annotations

from typing import Any

from ..pipe import Pipe


def _swap_to(pipes: list[Pipe], pipe: Pipe, index: int) -> None:
    i = pipes.index(pipe)
    pipes[i], pipes[index] = pipes[index], pipes[i]


class LoadBalancer:
    """Round-robin out over the pipes that have room (PUSH, DEALER, REQ)."""

    __slots__ = ("active", "current", "pipes")

    def __init__(self) -> None:
        self.pipes: list[Pipe] = []
        self.active = 0
        self.current = 0

    def attach(self, pipe: Pipe) -> None:
        self.pipes.append(pipe)
        pipe.active_out = False
        self.activated(pipe)

    def activated(self, pipe: Pipe) -> None:
        if pipe.active_out or pipe.terminating:
            return
        pipe.active_out = True
        _swap_to(self.pipes, pipe, self.active)
        self.active += 1

    def _deactivate(self, pipe: Pipe) -> None:
        pipe.active_out = False
        self.active -= 1
        _swap_to(self.pipes, pipe, self.active)
        if self.current >= self.active:
            self.current = 0

    def terminated(self, pipe: Pipe) -> None:
        if pipe not in self.pipes:
            return
        if pipe.active_out:
            self._deactivate(pipe)
        self.pipes.remove(pipe)

    def send(self, msg: Any) -> Pipe | None:
        """Write ``msg`` to the next pipe with room and return it; None when all are full."""
        pipes = self.pipes
        while self.active:
            pipe = pipes[self.current]
            if pipe.check_write():
                pipe.write(msg)
                self.current += 1
                if self.current >= self.active:
                    self.current = 0
                return pipe
            self._deactivate(pipe)
        return None

    def has_out(self) -> bool:
        pipes = self.pipes
        while self.active:
            pipe = pipes[self.current]
            if pipe.check_write():
                return True
            self._deactivate(pipe)
        return False


class FairQueue:
    """Round-robin in over the pipes that have messages (PULL, DEALER, ROUTER, SUB, ...).

    ``last_pipe`` is the pipe the last message came from (ROUTER prefixes its routing id).
    """

    __slots__ = ("active", "current", "last_pipe", "pipes")

    def __init__(self) -> None:
        self.pipes: list[Pipe] = []
        self.active = 0
        self.current = 0
        self.last_pipe: Pipe | None = None

    def attach(self, pipe: Pipe) -> None:
        self.pipes.append(pipe)
        pipe.active_in = False
        self.activated(pipe)

    def activated(self, pipe: Pipe) -> None:
        if pipe.active_in:
            return
        pipe.active_in = True
        _swap_to(self.pipes, pipe, self.active)
        self.active += 1

    def _deactivate(self, pipe: Pipe) -> None:
        pipe.active_in = False
        self.active -= 1
        _swap_to(self.pipes, pipe, self.active)
        if self.current >= self.active:
            self.current = 0

    def terminated(self, pipe: Pipe) -> None:
        if pipe not in self.pipes:
            return
        if pipe.active_in:
            self._deactivate(pipe)
        self.pipes.remove(pipe)
        if self.last_pipe is pipe:
            self.last_pipe = None

    def recv(self) -> Any:
        """The next message in fair order, or None when no pipe has one."""
        pipes = self.pipes
        while self.active:
            pipe = pipes[self.current]
            msg = pipe.read()
            if msg is not None:
                self.last_pipe = pipe
                self.current += 1
                if self.current >= self.active:
                    self.current = 0
                return msg
            if pipe.active_in:  # empty (a terminated pipe has already left the list)
                self._deactivate(pipe)
        return None

    def has_in(self) -> bool:
        pipes = self.pipes
        while self.active:
            pipe = pipes[self.current]
            if pipe.check_read():
                return True
            if pipe.active_in:
                self._deactivate(pipe)
        return False


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
    def send_to(msg: Any, pipes: Any) -> None:
        for pipe in pipes:
            if pipe.check_write():
                pipe.write(msg)

    def send_to_all(self, msg: Any) -> None:
        self.send_to(msg, self.pipes)

    @staticmethod
    def all_writable(pipes: Any) -> bool:
        return all(pipe.check_write() for pipe in pipes)
