"""NULL: no security; each side sends READY with its metadata (RFC 37).

With ZAP_DOMAIN set, a server asks the ZAP handler first (libzmq 4.3 does, to filter peers by
address) and sends its READY only once the handler accepted.
"""

from __future__ import annotations

from ..commands import READY, Command, command_body, encode_metadata, parse_metadata
from .base import Mechanism
from .zap import ZapReply


class NullMechanism(Mechanism):
    name = b"NULL"

    _peer: dict[str, bytes] | None = None  # the peer's READY, while ours waits for ZAP
    _ready_sent = False

    @property
    def secure(self) -> bool:
        return self.zap is not None

    def start(self) -> list[bytes]:
        if self.zap is not None:
            self._ask(self.name)
            return []
        return self._ready()

    def _ready(self) -> list[bytes]:
        self._ready_sent = True
        return [command_body(READY, encode_metadata(self.metadata))]

    def receive(self, command: Command) -> tuple[list[bytes], dict[str, bytes] | None]:
        if command.name != READY or self._peer is not None:
            raise self._unexpected(command)
        self._peer = parse_metadata(command.data)
        return [], self._peer if self._ready_sent else None

    def zap_replied(self, reply: ZapReply | None) -> tuple[list[bytes], dict[str, bytes] | None]:
        self._zap_verdict(reply)
        return self._ready(), self._peer
