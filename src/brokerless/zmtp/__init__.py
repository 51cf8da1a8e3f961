"""ZMTP 3.x (RFC 23, RFC 37) without I/O: greeting, handshake, framing, commands; and ZMTP 2.0
(RFC 15) and 1.0 (RFC 13) for older peers, as libzmq falls back to them.

Nothing here touches a socket or a thread; ``transport/`` drives it.
"""

from __future__ import annotations

from .connection import (
    ERROR_STATE,
    GREETING,
    HANDSHAKE,
    IDENTITY,
    TRAFFIC,
    Connection,
    State,
)
from .encoder import encode_message
from .errors import (
    AuthenticationFailed,
    HandshakeError,
    MessageTooLarge,
    PeerError,
    ProtocolError,
    UnexpectedFrame,
    ZapUnavailable,
)
from .events import Ping, Pong, Ready
from .frames import MAX_FRAME_SIZE, FrameDecoder
from .greeting import Protocol
from .mechanisms.zap import ZapRequest
from .peers import VALID_PEERS

__all__ = [
    "ERROR_STATE",
    "GREETING",
    "HANDSHAKE",
    "IDENTITY",
    "MAX_FRAME_SIZE",
    "TRAFFIC",
    "VALID_PEERS",
    "AuthenticationFailed",
    "Connection",
    "FrameDecoder",
    "HandshakeError",
    "MessageTooLarge",
    "PeerError",
    "Ping",
    "Pong",
    "Protocol",
    "ProtocolError",
    "Ready",
    "State",
    "UnexpectedFrame",
    "ZapRequest",
    "ZapUnavailable",
    "encode_message",
]
