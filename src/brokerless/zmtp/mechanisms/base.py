"""The interface a security mechanism implements (NULL, PLAIN, CURVE), and what they share.

A mechanism runs the handshake between the greeting and traffic, as commands: ``start`` gives
the command bodies to send first, ``receive`` takes each command the peer sends and returns the
bodies to send back and, once the handshake is complete, the peer's properties (its metadata,
as the peer spelled the names).  A server mechanism that must ask the ZAP handler sets
``zap_request`` and waits: the connection stops there and hands the answer to ``zap_replied``
(None when no handler is bound), which goes on as ``receive`` does.  ``zap_properties`` is what
the handler said about the peer (``User-Id`` and its metadata), carried by the connection's
messages.  A broken rule raises a :class:`~..errors.ProtocolError`.

A mechanism that ``encrypts`` (CURVE) also boxes every frame of the traffic: see
:class:`~.curve.CurveMechanism`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..commands import ERROR, Command, command_body, error_data, parse_error
from ..errors import (
    AuthenticationFailed,
    PeerError,
    ProtocolError,
    UnexpectedFrame,
    ZapUnavailable,
)
from .zap import ZapPolicy, ZapReply, ZapRequest

#: The ERROR reasons that carry a ZAP status (libzmq reports them as HANDSHAKE_FAILED_AUTH).
_ZAP_STATUS_REASONS = {"300": 300, "400": 400, "500": 500}


class Mechanism:
    """A handshake: command bodies out, peer commands in, peer properties when done."""

    name: ClassVar[bytes]
    #: Whether traffic travels boxed (MESSAGE commands) once the handshake is complete.
    encrypts: ClassVar[bool] = False

    def __init__(
        self, metadata: dict[str, bytes], as_server: bool, zap: ZapPolicy | None = None
    ) -> None:
        self.metadata = metadata
        self.as_server = as_server
        self.zap = zap  # set on the side that authenticates its peers
        #: Set while the handshake waits for the ZAP handler (the connection takes it).
        self.zap_request: ZapRequest | None = None
        self.zap_properties: dict[str, bytes] = {}

    @property
    def secure(self) -> bool:
        """Whether the peer must prove something (libzmq's "ZAP enabled": any mechanism but
        NULL, or NULL asking ZAP); such a connection refuses peers of ZMTP 1.0 and 2.0, which
        have no security."""
        return True

    def start(self) -> list[bytes]:
        """Command bodies to send once the greetings are exchanged."""
        raise NotImplementedError

    def receive(self, command: Command) -> tuple[list[bytes], dict[str, bytes] | None]:
        """Handle one handshake command: bodies to send, and the peer's properties once the
        handshake is complete (None while it is not).  Raises ``ProtocolError`` to refuse."""
        raise NotImplementedError

    # A mechanism that ``encrypts`` boxes each frame of the traffic:

    def encode_frame(self, flags: int, data: Any) -> bytes | bytearray:
        """One frame of the traffic as the MESSAGE command that carries it."""
        raise NotImplementedError(f"{self.name.decode()} does not encrypt the traffic")

    def decode_frame(self, body: bytes) -> tuple[int, bytes]:
        """Flags and data of one MESSAGE command body."""
        raise NotImplementedError(f"{self.name.decode()} does not encrypt the traffic")

    def received_state(self) -> Any:
        """What ``decode_frame`` has consumed (a nonce), for undoing decoding that an
        interruption cut short (see ``Boxes.save``)."""
        return None

    def restore_received(self, state: Any) -> None:
        """Back to what :meth:`received_state` returned."""

    def zap_replied(self, reply: ZapReply | None) -> tuple[list[bytes], dict[str, bytes] | None]:
        """The handler's answer to ``zap_request`` (None: no handler is bound); as ``receive``.
        A refusal raises :class:`AuthenticationFailed` (the connection sends the ERROR)."""
        raise NotImplementedError

    # -- shared by the mechanisms ---------------------------------------------------------------

    def _ask(self, mechanism: bytes, *credentials: bytes) -> None:
        zap = self.zap
        assert zap is not None
        self.zap_request = ZapRequest(
            zap.domain, zap.identity, mechanism, credentials, zap.required
        )

    def _zap_verdict(self, reply: ZapReply | None) -> None:
        """Accept (return) or refuse (raise) on the handler's answer."""
        if reply is None:
            if self.zap is not None and self.zap.required:
                raise ZapUnavailable("authentication is required but no ZAP handler is bound")
            return
        self.zap_properties = reply.properties
        if reply.status != 200:
            text = reply.text.decode("utf-8", "replace")
            raise AuthenticationFailed(
                f"the ZAP handler refused the peer: {reply.status} {text}".rstrip(), reply.status
            )

    def _unexpected(self, command: Command) -> ProtocolError:
        if command.name == ERROR:
            return refused_by_peer(command.data)
        return UnexpectedFrame(
            f"unexpected {command.name!r} command in the {self.name.decode()} handshake"
        )


def refused_by_peer(data: bytes) -> PeerError | AuthenticationFailed:
    """The error for a peer's ERROR command: a ZAP status (300, 400, 500) is an authentication
    failure, as libzmq reports it; any other reason a plain refusal."""
    reason = parse_error(data)
    status = _ZAP_STATUS_REASONS.get(reason)
    if status is not None:
        return AuthenticationFailed(f"the peer refused us: ZAP status {status}", status)
    return PeerError(f"peer refused the handshake: {reason}")


def error_body(reason: str) -> bytes:
    return command_body(ERROR, error_data(reason))
