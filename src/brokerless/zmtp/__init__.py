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
from .errors import HandshakeError, MessageTooLarge, PeerError, ProtocolError, UnexpectedFrame
from .frames import MAX_FRAME_SIZE, FrameDecoder, encode_message

__all__ = [
    "ERROR_STATE",
    "GREETING",
    "HANDSHAKE",
    "MAX_FRAME_SIZE",
    "TRAFFIC",
    "VALID_PEERS",
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
    "encode_message",
]
