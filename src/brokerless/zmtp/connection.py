"""One ZMTP connection as a sans-I/O state machine: ZMTP 3.x, and 2.0 / 1.0 for older peers.

Theory of operation
-------------------
``Connection`` does no I/O: the transport hands it received bytes (``receive_data``) and sends
what ``data_to_send`` returns.  The states (:class:`State`) and what moves between them::

    state      takes                                     on                       next
    GREETING   the greeting, in steps (see greeting.py)  a ZMTP 3.x greeting      HANDSHAKE
                                                         a ZMTP 2.0 / 1.0 one     IDENTITY
    HANDSHAKE  the mechanism's commands, one at a time   READY (NULL)             TRAFFIC
    IDENTITY   the peer's identity message (2.0 / 1.0)   its one frame            TRAFFIC
    TRAFFIC    messages, and commands (3.x)
    any        --                                        a broken rule, close()   ERROR

In TRAFFIC ``receive_data`` returns whole messages as themselves (``bytes`` or a ``list`` of
parts, the form pipes carry) and everything else as an event object (:class:`Ready`,
:class:`Ping`, :class:`Pong`).  PING is answered with PONG on its own; SUBSCRIBE and CANCEL
commands become the ``\\x01topic`` / ``\\x00topic`` messages pub-sub pipes carry, and a SUB/XSUB
talking to a ZMTP 3.1 peer sends its subscription messages as those commands (to a 3.0 peer, as
messages).  A broken rule raises :class:`ProtocolError` and parks the machine in ERROR: the
transport closes that connection and reports the reason; nothing else is affected.

In HANDSHAKE only commands are taken, one at a time (the decoder is ``handshaking``): a data
frame there is a protocol error, even one with MORE whose message would only complete after
READY.  Once READY is in, the rest of the same input is decoded as traffic.  ``close`` (and any
protocol error) drops what the decoder holds at once, so a large partial frame never outlives
its connection.

Older peers, as libzmq talks to them: a ZMTP 2.0 peer (RFC 15) frames as 3.x does without
commands, a ZMTP 1.0 peer (RFC 13) with :mod:`.frames_v1`.  After the greeting each side sends
its identity as a one-frame message (libzmq sends its routing id whatever the socket type);
:class:`Ready` comes once the peer's is in, with the socket type the 2.0 greeting announced
(checked as RFC 15 asks; a ZMTP 1.0 peer announces none).  Subscriptions travel as messages,
nothing is sent as a command, and there are no heartbeats (``heartbeats`` is False): libzmq
sends none to such peers.  A PUB or XPUB facing a ZMTP 1.0 peer that sent no greeting receives
a subscription to everything in its name, as libzmq injects one: such peers filter on their
side and send no subscriptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..constants import SocketType
from .commands import (
    CANCEL,
    ERROR,
    PING,
    PONG,
    SUBSCRIBE,
    Command,
    command_body,
    error_data,
    parse_error,
    parse_ping,
    ping_data,
)
from .errors import HandshakeError, PeerError, ProtocolError
from .frames import FrameDecoder, encode_batch, encode_command, encode_message
from .frames_v1 import V1FrameDecoder, encode_message_v1
from .greeting import Greeting, GreetingExchange, Protocol
from .mechanisms import Mechanism, NullMechanism


class State(StrEnum):
    """Where a connection is (see the module docstring); each compares equal to its name."""

    GREETING = "GREETING"
    HANDSHAKE = "HANDSHAKE"
    IDENTITY = "IDENTITY"
    TRAFFIC = "TRAFFIC"
    ERROR = "ERROR"


GREETING = State.GREETING
HANDSHAKE = State.HANDSHAKE
IDENTITY = State.IDENTITY
TRAFFIC = State.TRAFFIC
ERROR_STATE = State.ERROR

_T = SocketType
#: Which socket types may talk to which (RFC 37).
VALID_PEERS: dict[SocketType, frozenset[SocketType]] = {
    _T.REQ: frozenset({_T.REP, _T.ROUTER}),
    _T.REP: frozenset({_T.REQ, _T.DEALER}),
    _T.DEALER: frozenset({_T.REP, _T.DEALER, _T.ROUTER}),
    _T.ROUTER: frozenset({_T.REQ, _T.DEALER, _T.ROUTER}),
    _T.PUB: frozenset({_T.SUB, _T.XSUB}),
    _T.XPUB: frozenset({_T.SUB, _T.XSUB}),
    _T.SUB: frozenset({_T.PUB, _T.XPUB}),
    _T.XSUB: frozenset({_T.PUB, _T.XPUB}),
    _T.PUSH: frozenset({_T.PULL}),
    _T.PULL: frozenset({_T.PUSH}),
    _T.PAIR: frozenset({_T.PAIR}),
}
#: Socket types that announce their routing id in READY (libzmq does the same).
_SENDS_IDENTITY = frozenset({_T.REQ, _T.DEALER, _T.ROUTER})
_SUBSCRIBERS = frozenset({_T.SUB, _T.XSUB})
_PUBLISHERS = frozenset({_T.PUB, _T.XPUB})


@dataclass(frozen=True, slots=True)
class Ready:
    """The handshake is complete.  ``socket_type`` is None for a ZMTP 1.0 peer (it announces
    none); ``metadata`` is the READY command's (ZMTP 3.x only); ``minor_version`` is 0 for the
    older protocols."""

    socket_type: SocketType | None
    routing_id: bytes
    metadata: dict[str, bytes]
    minor_version: int
    protocol: Protocol = Protocol.ZMTP_3


@dataclass(frozen=True, slots=True)
class Ping:
    """The peer pinged; a PONG is already queued.  ``ttl`` is in tenths of a second."""

    ttl: int
    context: bytes


@dataclass(frozen=True, slots=True)
class Pong:
    context: bytes


class Connection:
    """The protocol state of one connection; see the module docstring."""

    def __init__(
        self,
        socket_type: SocketType,
        routing_id: bytes = b"",
        *,
        as_server: bool = False,
        max_msg_size: int = -1,
        mechanism: type[Mechanism] = NullMechanism,
        metadata: dict[str, bytes] | None = None,
    ) -> None:
        self.socket_type = SocketType(socket_type)
        props = {"Socket-Type": self.socket_type.name.encode()}
        if self.socket_type in _SENDS_IDENTITY:
            props["Identity"] = routing_id
        props.update(metadata or {})
        self.mechanism = mechanism(props, as_server)
        self.state = GREETING
        #: What the peer speaks, once its greeting is in.
        self.protocol: Protocol | None = None
        self.peer: Ready | None = None
        self.decoder = FrameDecoder(max_msg_size, handshaking=True)
        self._greeting = GreetingExchange(
            self.socket_type, routing_id, self.mechanism.name, as_server
        )
        self._routing_id = routing_id
        self._out: list[bytes] = [self._greeting.signature]
        self._framing = encode_message  # how messages become frames (encode_message_v1: ZMTP 1.0)
        self._peer_type: SocketType | None = None  # a 2.0 peer's, from its greeting
        self._subscriptions_as_commands = False
        self._accepts_subscriptions = False
        #: Whether the last ``receive_data`` may have returned events (False: only messages).
        self.had_events = True

    @property
    def heartbeats(self) -> bool:
        """Whether PING and PONG can be exchanged: with ZMTP 3.x peers only."""
        return self.protocol is Protocol.ZMTP_3

    # -- output --------------------------------------------------------------------------------

    def data_to_send(self) -> bytes:
        """Everything queued for the peer (greeting, handshake, PONGs, encoded messages)."""
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        return data

    def send_message(self, msg: Any) -> None:
        """Queue one whole message (TRAFFIC only); ``encode`` is the batching form."""
        self.encode(self._out, msg)

    def encode(self, out: list, msg: Any) -> None:
        """Append the wire form of ``msg`` to the buffer list ``out``."""
        if self.state is not TRAFFIC:
            raise RuntimeError(f"cannot send messages in state {self.state}")
        if (
            self._subscriptions_as_commands
            and msg.__class__ is not list
            and len(msg)
            and msg[0] < 2
        ):
            name = SUBSCRIBE if msg[0] == 1 else CANCEL
            out.append(encode_command(command_body(name, bytes(msg[1:]))))
        else:
            self._framing(out, msg)

    def encode_batch(self, msgs: list, zero_copy_min: int, as_buffer: Any = None) -> list:
        """The wire form of ``msgs`` as few buffers (see :func:`.frames.encode_batch`)."""
        if self.state is not TRAFFIC:
            raise RuntimeError(f"cannot send messages in state {self.state}")
        if self._subscriptions_as_commands:
            encode = self.encode
        else:  # None: encode_batch's own fast path, for the ZMTP 3.x and 2.0 framing
            encode = None if self._framing is encode_message else self._framing
        return encode_batch(msgs, zero_copy_min, as_buffer, encode)

    def send_ping(self, ttl_deciseconds: int, context: bytes = b"") -> None:
        """Queue a PING (TTL capped at 6553.5 s, context at 16 octets, as the RFC allows)."""
        if not self.heartbeats:
            raise RuntimeError(f"no heartbeats with a {self.protocol} peer")
        self._out.append(encode_command(command_body(PING, ping_data(ttl_deciseconds, context))))

    def send_error(self, reason: str) -> None:
        """Tell the peer why it is being refused (before closing)."""
        self._out.append(encode_command(command_body(ERROR, error_data(reason))))

    # -- input ---------------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> list:
        """Feed received bytes; returns messages and events (see the module docstring)."""
        try:
            if self.state is TRAFFIC:
                return self._receive_traffic(data)
            if self.state is ERROR_STATE:
                raise ProtocolError("connection already failed or closed")
            if self.state is GREETING:
                data = self._receive_greeting(data)
            if self.state is HANDSHAKE:
                return self._receive_handshake(data)
            if self.state is IDENTITY:
                return self._receive_identity(data)
            return []  # the greeting is not complete
        except ProtocolError:
            self.close()
            raise

    def close(self) -> None:
        """The connection is over: park in ERROR and drop buffered input now (see the module
        docstring)."""
        self.state = ERROR_STATE
        self.decoder.release()

    def _receive_greeting(self, data: Any) -> Any:
        """Go on with the greeting; returns the input that follows it."""
        greeting = self._greeting
        data = greeting.receive(data, self._out)
        self.protocol = greeting.protocol
        if greeting.peer is not None:
            self._start_handshake(greeting.peer)
        elif self.protocol is not None:
            self._start_legacy(greeting)
        return data

    def _start_handshake(self, greeting: Greeting) -> None:
        """A ZMTP 3.x peer: the security mechanism takes over."""
        if greeting.mechanism != self.mechanism.name:
            raise HandshakeError(
                f"security mechanism mismatch: we use {self.mechanism.name.decode()}, "
                f"the peer {greeting.mechanism.decode()}"
            )
        self.state = HANDSHAKE
        self._minor = greeting.minor if greeting.major == 3 else 1
        for body in self.mechanism.start():
            self._out.append(encode_command(body))

    def _start_legacy(self, greeting: GreetingExchange) -> None:
        """A ZMTP 2.0 or 1.0 peer: send our identity, then wait for the peer's."""
        max_msg_size = self.decoder.max_msg_size
        if greeting.peer_socket_type is not None:  # its greeting announced a socket type
            self._peer_type = _legacy_socket_type(greeting.peer_socket_type)
            self._check_peer_type(self._peer_type)
        if self.protocol is Protocol.ZMTP_2_0:
            self.decoder = FrameDecoder(max_msg_size, command_frames=False)
            encode_message(self._out, self._routing_id)
        else:
            self.decoder = V1FrameDecoder(max_msg_size)
            self._framing = encode_message_v1
            if greeting.unversioned:  # our signature was read as the identity's frame header
                self._out.append(self._routing_id)
            else:
                encode_message_v1(self._out, self._routing_id)
        self.state = IDENTITY

    def _receive_identity(self, data: Any) -> list:
        """A 2.0 / 1.0 peer's first message is its identity: then traffic, from the same
        input on."""
        try:
            items = self.decoder.feed(data)
        except ProtocolError as exc:
            if exc.messages:
                exc.messages = self._identified(exc.messages)
            raise
        return self._identified(items) if items else []

    def _identified(self, items: list) -> list:
        """The peer's identity is ``items[0]``: READY, then the messages that followed."""
        identity = items[0]
        if identity.__class__ is list:
            raise HandshakeError("the peer's identity is not a message of one frame")
        self.state = TRAFFIC
        self.had_events = True  # READY is an event
        self.peer = Ready(self._peer_type, identity, {}, 0, self.protocol)
        if self._greeting.unversioned and self.socket_type in _PUBLISHERS:
            return [self.peer, b"\x01", *items[1:]]  # the subscription it will not send
        return [self.peer, *items[1:]]

    def _receive_handshake(self, data: Any) -> list:
        # The decoder hands over one command per feed while handshaking, and refuses data
        # frames; a fault in a later frame is met after READY and the messages before it, as in
        # libzmq, which handles frame by frame.
        decoder = self.decoder
        while True:
            commands = decoder.feed(data)
            if not commands:
                return []
            data = b""  # the rest of the input waits in the decoder
            replies, metadata = self.mechanism.receive(commands[0])
            for body in replies:
                self._out.append(encode_command(body))
            if metadata is not None:
                break
        ready = self._complete(metadata)
        try:
            rest = self._receive_traffic(b"")
        except ProtocolError as exc:
            exc.messages = [ready, *exc.messages]
            raise
        finally:
            self.had_events = True  # READY is an event
        return [ready, *rest]

    def _complete(self, metadata: dict[str, bytes]) -> Ready:
        raw_type = metadata.get("socket-type", b"")
        try:
            peer_type = SocketType[raw_type.decode("ascii")]
        except (KeyError, UnicodeDecodeError):
            raise HandshakeError(f"peer announced an unknown socket type {raw_type!r}") from None
        self._check_peer_type(peer_type)
        self.state = TRAFFIC
        self.decoder.handshaking = False
        self._subscriptions_as_commands = self._minor >= 1 and self.socket_type in _SUBSCRIBERS
        self.peer = Ready(peer_type, metadata.get("identity", b""), metadata, self._minor)
        self._accepts_subscriptions = self.socket_type in _PUBLISHERS
        return self.peer

    def _check_peer_type(self, peer_type: SocketType) -> None:
        if peer_type not in VALID_PEERS.get(self.socket_type, ()):
            if self.protocol is Protocol.ZMTP_3:  # tell it why (RFC 15: just drop older ones)
                self.send_error("Invalid socket type")
            raise HandshakeError(
                f"a {self.socket_type.name} socket cannot talk to a {peer_type.name} peer"
            )

    def _receive_traffic(self, data: Any) -> list:
        try:
            items = self.decoder.feed(data)
        except ProtocolError as exc:
            exc.messages = self._traffic(exc.messages)
            raise
        return self._traffic(items)

    def _traffic(self, items: list) -> list:
        """Handle the commands among decoded items; messages pass through untouched."""
        if not self.decoder.commands:
            self.had_events = False
            return items
        self.had_events = True
        out: list = []
        try:
            for item in items:
                if item.__class__ is not Command:
                    out.append(item)
                elif item.name in (SUBSCRIBE, CANCEL):
                    if self._accepts_subscriptions:  # a subscription means nothing elsewhere
                        prefix = b"\x01" if item.name == SUBSCRIBE else b"\x00"
                        out.append(prefix + item.data)
                elif item.name == PING:
                    ttl, context = parse_ping(item.data)
                    self._out.append(encode_command(command_body(PONG, context)))
                    out.append(Ping(ttl, context))
                elif item.name == PONG:
                    out.append(Pong(item.data))
                elif item.name == ERROR:
                    raise PeerError(f"peer sent ERROR: {parse_error(item.data)}")
                # other commands are ignored, as the RFC lets mechanisms add their own
        except ProtocolError as exc:
            exc.messages = out
            raise
        return out


def _legacy_socket_type(number: int) -> SocketType:
    """The socket type a ZMTP 2.0 greeting announces: RFC 15's numbers, which are libzmq's (an
    XPUB or XSUB sends its own, 9 or 10)."""
    if number not in VALID_PEERS:
        raise HandshakeError(f"peer announced an unknown socket type {number}")
    return SocketType(number)
