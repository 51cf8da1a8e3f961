"""ZAP (RFC 27): what a server mechanism asks the process's authentication handler, and its answer.

A server mechanism that needs authentication stops its handshake with a :class:`ZapRequest`
(``Mechanism.zap_request``); the transport sends :meth:`ZapRequest.frames` to the handler bound at
``inproc://zeromq.zap.01`` and feeds the reply back (``Connection.zap_reply``), which
:func:`parse_reply` checks as libzmq does, with libzmq's PROTOCOL_ERROR_ZAP_* codes.

Whether a mechanism asks, and what happens when no handler is bound, follows libzmq 4.3
(:class:`ZapPolicy`): NULL asks only when ZAP_DOMAIN is set; PLAIN always asks and fails without
a handler; CURVE asks unless ZAP_ENFORCE_DOMAIN is set without a domain, and goes on without a
handler unless ZAP_ENFORCE_DOMAIN is set.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...constants import Event
from ..commands import parse_metadata
from ..errors import ProtocolError, ZapError

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
VERSION = b"1.0"
#: libzmq sends every request with this id (one request at a time per connection).
REQUEST_ID = b"1"
STATUSES = frozenset({200, 300, 400, 500})

_E = Event


@dataclass(frozen=True, slots=True)
class ZapPolicy:
    """How a server mechanism uses ZAP: ``domain`` (ZAP_DOMAIN), ``identity`` (the server
    socket's own ROUTING_ID, which libzmq sends as the request's identity frame) and whether a
    handler is ``required`` (with none bound the handshake fails)."""

    domain: bytes
    identity: bytes
    required: bool


@dataclass(frozen=True, slots=True)
class ZapRequest:
    """A mechanism's question to the handler; ``required`` as in :class:`ZapPolicy`."""

    domain: bytes
    identity: bytes
    mechanism: bytes
    credentials: tuple[bytes, ...]
    required: bool

    def frames(self, address: bytes) -> list[bytes]:
        """The request as sent over a DEALER-like pipe (RFC 27: the empty delimiter first);
        ``address`` is the peer's (its IP address for tcp)."""
        return [
            b"",
            VERSION,
            REQUEST_ID,
            self.domain,
            address,
            self.identity,
            self.mechanism,
            *self.credentials,
        ]


@dataclass(frozen=True, slots=True)
class ZapReply:
    status: int
    text: bytes
    user_id: bytes
    metadata: dict[str, bytes]

    @property
    def properties(self) -> dict[str, bytes]:
        """What the connection's messages carry from this reply: ``User-Id`` first (a
        metadata property of the same name does not replace it), then the metadata."""
        props = {"User-Id": self.user_id}
        for name, value in self.metadata.items():
            props.setdefault(name, value)
        return props


def parse_reply(frames: list[bytes]) -> ZapReply:
    """The handler's reply: delimiter, version, request id, status, text, user id, metadata."""
    if len(frames) != 7:
        raise ZapError(
            f"malformed ZAP reply: {len(frames)} frames, 7 expected",
            _E.PROTOCOL_ERROR_ZAP_MALFORMED_REPLY,
        )
    delimiter, version, request_id, status, text, user_id, metadata = frames
    if delimiter:
        raise ZapError("malformed ZAP reply: no empty delimiter frame")
    if version != VERSION:
        raise ZapError(f"ZAP reply with version {version!r}", _E.PROTOCOL_ERROR_ZAP_BAD_VERSION)
    if request_id != REQUEST_ID:
        raise ZapError(
            f"ZAP reply to request {request_id!r}, not ours", _E.PROTOCOL_ERROR_ZAP_BAD_REQUEST_ID
        )
    code = int(status) if len(status) == 3 and status.isdigit() else 0
    if code not in STATUSES:
        raise ZapError(
            f"ZAP reply with status {status!r}", _E.PROTOCOL_ERROR_ZAP_INVALID_STATUS_CODE
        )
    try:
        props = parse_metadata(metadata)
    except ProtocolError:
        raise ZapError(
            "ZAP reply with malformed metadata", _E.PROTOCOL_ERROR_ZAP_INVALID_METADATA
        ) from None
    return ZapReply(code, text, user_id, props)
