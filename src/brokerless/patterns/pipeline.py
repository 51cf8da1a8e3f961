"""PUSH and PULL: round-robin out, fair-queue in."""

from __future__ import annotations

from typing import Any

from ..constants import SocketOption, SocketType
from ..pipe import Pipe
from .base import Pattern
from .strategies import FairQueue, LoadBalancer


class Push(Pattern):
    socket_type = SocketType.PUSH
    sends_through = True

    def __init__(self, options: dict[SocketOption, Any]) -> None:
        super().__init__(options)
        self.lb = LoadBalancer()
        # The hot path calls the strategy directly (it returns the pipe used: truthy when sent,
        # which is all the socket asks of xsend's bool).
        self.xsend = self.lb.send  # type: ignore[method-assign, assignment]

    def attach(self, pipe: Pipe) -> None:
        self.lb.attach(pipe)

    def terminated(self, pipe: Pipe) -> None:
        self.lb.terminated(pipe)

    def write_activated(self, pipe: Pipe) -> None:
        self.lb.activated(pipe)

    def xhas_out(self) -> bool:
        return self.lb.has_out()


class Pull(Pattern):
    socket_type = SocketType.PULL
    passes_through = borrows_input = True

    def __init__(self, options: dict[SocketOption, Any]) -> None:
        super().__init__(options)
        self.fq = FairQueue()
        self.xrecv = self.fq.recv  # type: ignore[method-assign]  # the hot path, direct

    def attach(self, pipe: Pipe) -> None:
        self.fq.attach(pipe)

    def terminated(self, pipe: Pipe) -> None:
        self.fq.terminated(pipe)

    def read_activated(self, pipe: Pipe) -> None:
        self.fq.activated(pipe)

    def received_from(self) -> Pipe | None:
        return self.fq.last_pipe

    def xhas_in(self) -> bool:
        return self.fq.has_in()
