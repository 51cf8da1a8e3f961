"""Why a ZMTP connection was refused: every one is the peer's fault, and closes only that link."""

from __future__ import annotations


class ProtocolError(Exception):
    """The peer broke ZMTP; the connection must be closed (the reason goes to the monitor).

    ``messages`` holds the whole messages decoded from the same input before the fault: they
    arrived intact and are delivered before the connection closes (as libzmq does).
    """

    messages: list = []


class HandshakeError(ProtocolError):
    """The greeting or the security handshake failed (wrong version, mechanism, socket type)."""


class UnexpectedFrame(HandshakeError):
    """A frame the handshake does not expect: a data frame before it completes, or a command
    the mechanism does not know (libzmq's ZMTP_UNEXPECTED_COMMAND)."""


class MessageTooLarge(ProtocolError):
    """A frame is larger than MAXMSGSIZE, or than any process could hold (``MAX_FRAME_SIZE``)."""


class PeerError(ProtocolError):
    """The peer sent an ERROR command."""
