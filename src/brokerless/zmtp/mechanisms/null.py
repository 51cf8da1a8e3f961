"""NULL: no security; each side sends READY with its metadata (RFC 37)."""

from __future__ import annotations

from ..commands import (
    ERROR,
    READY,
    Command,
    command_body,
    encode_metadata,
    parse_error,
    parse_metadata,
)
from ..errors import PeerError, UnexpectedFrame
from .base import Mechanism


class NullMechanism(Mechanism):
    name = b"NULL"

    def start(self) -> list[bytes]:
        return [command_body(READY, encode_metadata(self.metadata))]

    def receive(self, command: Command) -> tuple[list[bytes], dict[str, bytes] | None]:
        if command.name == READY:
            return [], parse_metadata(command.data)
        if command.name == ERROR:
            raise PeerError(f"peer refused the handshake: {parse_error(command.data)}")
        raise UnexpectedFrame(f"unexpected {command.name!r} command in the NULL handshake")
