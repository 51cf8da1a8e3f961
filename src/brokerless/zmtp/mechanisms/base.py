"""The interface a security mechanism implements (NULL now; PLAIN and CURVE plug in here)."""

from __future__ import annotations

from typing import ClassVar

from ..commands import Command


class Mechanism:
    """A handshake: command bodies out, peer commands in, peer metadata when done."""

    name: ClassVar[bytes]

    def __init__(self, metadata: dict[str, bytes], as_server: bool) -> None:
        self.metadata = metadata
        self.as_server = as_server

    def start(self) -> list[bytes]:
        """Command bodies to send once the greetings are exchanged."""
        raise NotImplementedError

    def receive(self, command: Command) -> tuple[list[bytes], dict[str, bytes] | None]:
        """Handle one handshake command: bodies to send, and the peer's metadata once the
        handshake is complete (None while it is not).  Raises ``ProtocolError`` to refuse."""
        raise NotImplementedError
