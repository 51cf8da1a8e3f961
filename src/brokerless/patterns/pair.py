"""PAIR: exclusive two-way link to a single peer; later peers are refused."""

from __future__ import annotations

from typing import Any

from ..constants import SocketOption, SocketType
from ..pipe import Pipe
from .base import Pattern


class Pair(Pattern):
    socket_type = SocketType.PAIR
    passes_through = True
    sends_through = True

    def __init__(self, options: dict[SocketOption, Any]) -> None:
        super().__init__(options)
        self.pipe: Pipe | None = None

    def attach(self, pipe: Pipe) -> bool:
        if self.pipe is not None:
            return False
        self.pipe = pipe
        return True

    def terminated(self, pipe: Pipe) -> None:
        if pipe is self.pipe:
            self.pipe = None

    def xsend(self, msg: Any) -> bool:
        pipe = self.pipe
        return pipe is not None and pipe.write(msg)

    def xrecv(self) -> Any:
        pipe = self.pipe
        return None if pipe is None else pipe.read()

    def received_from(self) -> Pipe | None:
        return self.pipe

    def xhas_in(self) -> bool:
        pipe = self.pipe
        return pipe is not None and pipe.check_read()

    def xhas_out(self) -> bool:
        pipe = self.pipe
        return pipe is not None and pipe.check_write()
