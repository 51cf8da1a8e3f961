"""Why a ZMTP connection was refused: every one is the peer's fault, and closes only that link.

Each error says what the monitor reports for it, as libzmq does: ``code`` is the value of
HANDSHAKE_FAILED_PROTOCOL (libzmq's ZMQ_PROTOCOL_ERROR_* numbers, see
:class:`~brokerless.constants.Event`); :class:`AuthenticationFailed` is reported as
HANDSHAKE_FAILED_AUTH with the ZAP status, :class:`ZapUnavailable` as HANDSHAKE_FAILED_NO_DETAIL.
"""

from __future__ import annotations

from typing import Any

from ..constants import Event

_E = Event


class ProtocolError(Exception):
    """The peer broke ZMTP; the connection must be closed (the reason goes to the monitor).

    ``code`` is what the monitor reports with HANDSHAKE_FAILED_PROTOCOL (each subclass has its
    own; a raise site may give a more precise one).  ``messages`` holds the whole messages
    decoded from the same input before the fault, as ``http.client.IncompleteRead`` holds its
    ``partial``: they arrived intact and are delivered before the connection closes (as libzmq
    does, frame by frame).
    """

    #: HANDSHAKE_FAILED_PROTOCOL's value for this error.
    code: int = _E.PROTOCOL_ERROR_ZMTP_UNSPECIFIED

    def __init__(self, reason: str = "", code: int | None = None) -> None:
        super().__init__(reason)
        if code is not None:
            self.code = code
        self.messages: list[Any] = []


class HandshakeError(ProtocolError):
    """The greeting or the security handshake failed (wrong version, mechanism, socket type)."""


class UnexpectedFrame(HandshakeError):
    """A frame the handshake does not expect: a data frame before it completes, or a command
    the mechanism does not know (libzmq's ZMTP_UNEXPECTED_COMMAND)."""

    code = _E.PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND


class MalformedCommand(ProtocolError):
    """A command frame that breaks the framing or the command syntax (empty, a bad name, the
    MORE flag, a command inside a multipart message): ZMTP_MALFORMED_COMMAND_UNSPECIFIED."""

    code = _E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_UNSPECIFIED


class MechanismMismatch(HandshakeError):
    """The peer's greeting names another security mechanism, one we cannot use with what it
    speaks, or none that can be read (ZMTP_MECHANISM_MISMATCH)."""

    code = _E.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH


class InvalidMetadata(HandshakeError):
    """The peer's properties are not valid: an unknown socket type (ZMTP_INVALID_METADATA)."""

    code = _E.PROTOCOL_ERROR_ZMTP_INVALID_METADATA


class MessageTooLarge(ProtocolError):
    """A frame is larger than MAXMSGSIZE, or than any process could hold (``MAX_FRAME_SIZE``)."""


class PeerError(ProtocolError):
    """The peer sent an ERROR command."""


class CryptographicError(HandshakeError):
    """A box did not open: wrong keys, a forged or altered command (ZMTP_CRYPTOGRAPHIC)."""

    code = _E.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC


class InvalidSequence(ProtocolError):
    """A CURVE nonce did not increase: a replayed or reordered command (ZMTP_INVALID_SEQUENCE)."""

    code = _E.PROTOCOL_ERROR_ZMTP_INVALID_SEQUENCE


class AuthenticationFailed(HandshakeError):
    """The ZAP handler refused the peer (status 300, 400 or 500), or the peer says it refused
    us with one of those statuses.  Reported as HANDSHAKE_FAILED_AUTH with ``status``."""

    def __init__(self, reason: str, status: int) -> None:
        super().__init__(reason)
        self.status = status


class ZapUnavailable(HandshakeError):
    """Authentication is required (PLAIN, or ZAP_ENFORCE_DOMAIN) but no ZAP handler is bound:
    reported as HANDSHAKE_FAILED_NO_DETAIL, as libzmq does."""


class ZapError(HandshakeError):
    """The ZAP handler's reply is malformed (one of libzmq's PROTOCOL_ERROR_ZAP_* codes)."""

    code = _E.PROTOCOL_ERROR_ZAP_UNSPECIFIED
