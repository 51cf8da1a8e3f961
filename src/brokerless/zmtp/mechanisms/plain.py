"""PLAIN (RFC 24): a user name and password in clear, checked by the server's ZAP handler.

Client: HELLO (user name, password) -> WELCOME -> INITIATE (metadata) -> READY (metadata).
Server: HELLO -> ask ZAP (PLAIN always needs a handler) -> WELCOME, or ERROR with the status
-> INITIATE -> READY.  PLAIN protects nothing on the wire; it is for trusted networks.
"""

from __future__ import annotations

from ...constants import Event
from ..commands import READY, Command, command_body, encode_metadata, parse_metadata
from ..errors import HandshakeError
from .base import Mechanism
from .zap import ZapPolicy, ZapReply

HELLO = b"HELLO"
WELCOME = b"WELCOME"
INITIATE = b"INITIATE"


class PlainClient(Mechanism):
    name = b"PLAIN"

    def __init__(
        self, metadata: dict[str, bytes], as_server: bool, username: bytes, password: bytes
    ) -> None:
        super().__init__(metadata, as_server)
        if len(username) > 255 or len(password) > 255:
            raise ValueError("PLAIN user names and passwords are at most 255 octets")
        self._credentials = bytes((len(username),)) + username + bytes((len(password),)) + password
        self._expect = WELCOME

    def start(self) -> list[bytes]:
        return [command_body(HELLO, self._credentials)]

    def receive(self, command: Command) -> tuple[list[bytes], dict[str, bytes] | None]:
        if command.name != self._expect:
            raise self._unexpected(command)
        if command.name == WELCOME:
            if command.data:
                raise HandshakeError(
                    "malformed WELCOME command", Event.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_WELCOME
                )
            self._expect = READY
            return [command_body(INITIATE, encode_metadata(self.metadata))], None
        self._expect = b""
        return [], parse_metadata(command.data)


class PlainServer(Mechanism):
    name = b"PLAIN"

    def __init__(self, metadata: dict[str, bytes], as_server: bool, zap: ZapPolicy) -> None:
        super().__init__(metadata, as_server, zap)
        self._expect = HELLO

    def start(self) -> list[bytes]:
        return []

    def receive(self, command: Command) -> tuple[list[bytes], dict[str, bytes] | None]:
        if command.name != self._expect:
            raise self._unexpected(command)
        if command.name == HELLO:
            username, password = _credentials(command.data)
            self._expect = b""  # nothing until the handler answered
            self._ask(self.name, username, password)
            return [], None
        self._expect = b""
        props = parse_metadata(command.data)
        return [command_body(READY, encode_metadata(self.metadata))], props

    def zap_replied(self, reply: ZapReply | None) -> tuple[list[bytes], dict[str, bytes] | None]:
        self._zap_verdict(reply)
        self._expect = INITIATE
        return [command_body(WELCOME)], None


def _credentials(data: bytes) -> tuple[bytes, bytes]:
    """User name and password of a HELLO: each one length octet and the text, nothing more."""
    malformed = HandshakeError(
        "malformed PLAIN HELLO", Event.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO
    )
    if not data or 1 + data[0] >= len(data):
        raise malformed
    end = 1 + data[0]
    username = data[1:end]
    if len(data) != end + 1 + data[end]:
        raise malformed
    return username, data[end + 1 :]
