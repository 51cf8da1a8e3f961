"""ZMTP 3.x (RFC 23, RFC 37) without I/O: greeting, handshake, framing, commands.

Nothing here touches a socket or a thread; ``transport/`` drives it.
"""

from __future__ import annotations

from .connection import (
    ERROR_STATE,
    GREETING,
    HANDSHAKE,
    TRAFFIC,
    VALID_PEERS,
    Connection,
    Ping,
    Pong,
    Ready,
)
from .errors import (
    AuthenticationFailed,
    HandshakeError,
    MessageTooLarge,
    PeerError,
    ProtocolError,
    UnexpectedFrame,
    ZapUnavailable,
)
from .frames import MAX_FRAME_SIZE, FrameDecoder, encode_message
from .mechanisms.zap import ZapRequest

__all__ = [
    "ERROR_STATE",
    "GREETING",
    "HANDSHAKE",
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
    "ProtocolError",
    "Ready",
    "UnexpectedFrame",
    "ZapRequest",
    "ZapUnavailable",
    "encode_message",
]
