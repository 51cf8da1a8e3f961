"""One ZMTP connection as a sans-I/O state machine: ZMTP 3.x with its security mechanisms, and
ZMTP 2.0 / 1.0 for older peers.

Theory of operation
-------------------
``Connection`` does no I/O: the transport hands it received bytes (``receive_data``) and sends
what ``data_to_send`` returns.  The states (:class:`State`) and what moves between them::

    state      takes                                     on                        next
    GREETING   the greeting, in steps (see greeting.py)  a ZMTP 3.x greeting       HANDSHAKE
                                                         a ZMTP 2.0 / 1.0 one      IDENTITY
    HANDSHAKE  the mechanism's commands, one at a time   a question for ZAP        ZAP
                                                         the handshake's last one  TRAFFIC
    ZAP        nothing: input is held                    zap_reply()               HANDSHAKE or
                                                                                   TRAFFIC
    IDENTITY   the peer's identity message (2.0 / 1.0)   its one frame             TRAFFIC
    TRAFFIC    messages, and commands (3.x)
    any        --                                        a broken rule, close()    ERROR

In TRAFFIC ``receive_data`` returns whole messages as themselves (``bytes`` or a ``list`` of
parts, the form pipes carry) and everything else as an event object (:class:`Ready`,
:class:`Ping`, :class:`Pong`).  PING is answered with PONG on its own; SUBSCRIBE and CANCEL
commands become the ``\\x01topic`` / ``\\x00topic`` messages pub-sub pipes carry, and a SUB/XSUB
talking to a ZMTP 3.1 peer sends its subscription messages as those commands (to a 3.0 peer, as
messages).  A broken rule raises :class:`ProtocolError` and parks the machine in ERROR: the
transport closes that connection and reports the reason; nothing else is affected.

The greeting goes out in steps, each once the peer's octets that decide it are in
(:class:`.greeting.GreetingExchange`): what the peer speaks is known once its version is.

The handshake is the mechanism's (``mechanisms/``: NULL, PLAIN, CURVE).  In HANDSHAKE only
commands are taken, one at a time (the decoder is ``handshaking``): a data frame there is a
protocol error, even one with MORE whose message would only complete after READY.  Once the
handshake is complete the rest of the same input is decoded as traffic.  ``close`` (and any
protocol error) drops what the decoder holds at once, so a large partial frame never outlives
its connection.

A server mechanism that must ask the ZAP handler pauses the handshake in ZAP: ``receive_data``
returns the :class:`ZapRequest` as an event, input received meanwhile is only held (the
transport should stop reading), and ``zap_reply(frames)`` -- the handler's reply, or None when
no handler is bound -- resumes it and returns what ``receive_data`` would have.  A refusal
raises :class:`AuthenticationFailed` after queueing the ERROR command the peer should get (none
for status 300, as libzmq does).

On a connection whose mechanism ``encrypts`` (CURVE), every frame of the traffic -- message
parts and commands alike -- travels as one MESSAGE command (:mod:`.boxes`); ``encode`` and the
traffic decoder are swapped for boxed versions when the handshake completes, so NULL and PLAIN
traffic runs the same code as before.  The events are in :mod:`.events`, RFC 37's table of
which socket types may talk to which in :mod:`.peers`.

Older peers, as libzmq talks to them: a ZMTP 2.0 peer (RFC 15) frames as 3.x does without
commands, a ZMTP 1.0 peer (RFC 13) with :mod:`.frames_v1`.  After the greeting each side sends
its identity as a one-frame message (libzmq sends its routing id whatever the socket type);
:class:`Ready` comes once the peer's is in, with the socket type the 2.0 greeting announced
(checked as RFC 15 asks; a ZMTP 1.0 peer announces none).  Subscriptions travel as messages,
nothing is sent as a command, and there are no heartbeats (``heartbeats`` is False): libzmq
sends none to such peers.  A PUB or XPUB facing a ZMTP 1.0 peer that sent no greeting receives
a subscription to everything in its name, as libzmq injects one: such peers filter on their
side and send no subscriptions.  These protocols have no security: a connection whose
mechanism is ``secure`` (any but NULL, or NULL asking ZAP) refuses such a peer as soon as its
greeting shows what it speaks, as libzmq does (CVE-2014-9721).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._strenum import StrEnum
from ..constants import SocketType
from .boxes import BOX_COMMAND, Boxes
from .commands import (
    CANCEL,
    ERROR,
    PING,
    PONG,
    SUBSCRIBE,
    Command,
    command_body,
    error_data,
    fold,
    parse_error,
    parse_ping,
    ping_data,
)
from .encoder import encode_batch, encode_command, encode_message
from .errors import (
    AuthenticationFailed,
    HandshakeError,
    InvalidMetadata,
    MechanismMismatch,
    PeerError,
    ProtocolError,
)
from .events import Ping, Pong, Ready
from .frames import FrameDecoder
from .frames_v1 import V1FrameDecoder, encode_message_v1
from .greeting import Greeting, GreetingExchange, Protocol
from .mechanisms import Mechanism, NullMechanism
from .mechanisms.zap import parse_reply
from .peers import VALID_PEERS, legacy_socket_type


class State(StrEnum):
    """Where a connection is (see the module docstring); each compares equal to its name."""

    GREETING = "GREETING"
    HANDSHAKE = "HANDSHAKE"
    ZAP = "ZAP"  # the handshake waits for the ZAP handler
    IDENTITY = "IDENTITY"
    TRAFFIC = "TRAFFIC"
    ERROR = "ERROR"


GREETING = State.GREETING
HANDSHAKE = State.HANDSHAKE
IDENTITY = State.IDENTITY
TRAFFIC = State.TRAFFIC
ERROR_STATE = State.ERROR

_T = SocketType
#: Socket types that announce their routing id in READY (libzmq does the same).
_SENDS_IDENTITY = frozenset({_T.REQ, _T.DEALER, _T.ROUTER})
_SUBSCRIBERS = frozenset({_T.SUB, _T.XSUB})
_PUBLISHERS = frozenset({_T.PUB, _T.XPUB})


class Connection:
    """The protocol state of one connection; see the module docstring."""

    def __init__(
        self,
        socket_type: SocketType,
        routing_id: bytes = b"",
        *,
        as_server: bool = False,
        max_msg_size: int = -1,
        mechanism: Callable[[dict[str, bytes], bool], Mechanism] = NullMechanism,
        metadata: dict[str, bytes] | None = None,
        runs: bool = False,
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
        #: ``runs``: the messages of a ZMTP 3.x peer may come as :class:`~brokerless.runs.Run`
        #: items (see ``receive``); a legacy peer's never do.
        self.decoder = FrameDecoder(max_msg_size, handshaking=True, runs=runs)
        self._greeting = GreetingExchange(
            self.socket_type,
            routing_id,
            self.mechanism.name,
            as_server,
            secure=self.mechanism.secure,
        )
        self._routing_id = routing_id
        self._out: list[bytes] = [self._greeting.signature]
        self._framing = encode_message  # how messages become frames (encode_message_v1: ZMTP 1.0)
        self._peer_type: SocketType | None = None  # a 2.0 peer's, from its greeting
        self._subscriptions_as_commands = False
        self._accepts_subscriptions = False
        #: How encode_batch encodes each message (None: its own fast path, ZMTP 3.x framing).
        self._batch_encoder: Callable[[list[Any], Any], None] | None = None
        #: The boxing of the traffic, once the handshake of an encrypting mechanism completed.
        self._boxes: Boxes | None = None

    @property
    def heartbeats(self) -> bool:
        """Whether PING and PONG can be exchanged: with ZMTP 3.x peers only."""
        return self.protocol is Protocol.ZMTP_3

    # -- output --------------------------------------------------------------------------------

    @property
    def has_output(self) -> bool:
        """Whether something waits in :meth:`data_to_send` (a PONG, a handshake step)."""
        return bool(self._out)

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

    def encode(self, out: list[Any], msg: Any) -> None:
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

    def encode_batch(self, msgs: list[Any], zero_copy_min: int, as_buffer: Any = None) -> list[Any]:
        """The wire form of ``msgs`` as few buffers (see :func:`.encoder.encode_batch`)."""
        if self.state is not TRAFFIC:
            raise RuntimeError(f"cannot send messages in state {self.state}")
        return encode_batch(msgs, zero_copy_min, as_buffer, self._batch_encoder)

    def send_ping(self, ttl_deciseconds: int, context: bytes = b"") -> None:
        """Queue a PING (TTL capped at 6553.5 s, context at 16 octets, as the RFC allows)."""
        if not self.heartbeats:
            raise RuntimeError(f"no heartbeats with a {self.protocol} peer")
        self._command(command_body(PING, ping_data(ttl_deciseconds, context)))

    def _command(self, body: bytes) -> None:
        """Queue a command of the traffic (boxed on an encrypted connection)."""
        if self._boxes is not None:
            self._boxes.box(self._out, BOX_COMMAND, body)
        else:
            self._out.append(encode_command(body))

    def _encode_boxed(self, out: list[Any], msg: Any) -> None:
        """``encode`` on an encrypted connection: one MESSAGE command per frame."""
        if self.state is not TRAFFIC or self._boxes is None:
            raise RuntimeError(f"cannot send messages in state {self.state}")
        self._boxes.encode(out, msg)

    def send_error(self, reason: str) -> None:
        """Tell the peer why it is being refused (before closing)."""
        self._out.append(encode_command(command_body(ERROR, error_data(reason))))

    # -- input ---------------------------------------------------------------------------------

    def receive(self, data: bytes | bytearray | memoryview) -> tuple[list[Any], bool]:
        """Feed received bytes; returns the messages and events they complete (see the module
        docstring) and whether any event, or any :class:`~brokerless.runs.Run` of messages
        (made with ``runs=True``), may be among them (False: only whole messages, which a
        transport can hand on in one go)."""
        try:
            if self.state is TRAFFIC:
                return self._receive_traffic(data)
            return self._receive_setup(data), True
        except ProtocolError:
            self.close()
            raise

    def save_input(self) -> Any:
        """What :meth:`restore_input` needs to undo the ``receive`` that follows, however far
        it got -- a reader in a thread a signal handler may interrupt (see
        :mod:`brokerless.transport.engine_state`).  A PONG that receive queued stays queued
        (decoding again queues another: a spare PONG is harmless)."""
        boxes = self._boxes
        return self.decoder.save(), None if boxes is None else boxes.save()

    def restore_input(self, saved: Any) -> None:
        self.decoder.restore(saved[0])
        if saved[1] is not None:
            self._boxes.restore(saved[1])  # type: ignore[union-attr]

    @property
    def direct_read(self) -> int:
        """How many octets the next read should take as ``bytes`` of their own: the rest of a
        large body (see :attr:`~brokerless.zmtp.frames.FrameDecoder.direct_read`); 0 for a read
        into the transport's buffer."""
        return self.decoder.direct_read

    @property
    def wait_read(self) -> int:
        """How many octets a reader that may block should wait for in one read: the whole rest
        of a body larger than a direct read takes (see
        :attr:`~brokerless.zmtp.frames.FrameDecoder.wait_read`); else 0."""
        return self.decoder.wait_read

    @property
    def read_limit(self) -> int:
        """The most octets the next read into the buffer should take (0: no limit)."""
        return self.decoder.read_limit

    @property
    def large_frames(self) -> bool:
        """Whether the last input's first long frame, or the frame it began in, is one of
        LARGE octets or more (see :data:`~brokerless.zmtp.frames.LARGE`)."""
        return self.decoder.large

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Any]:
        """Feed received bytes; returns the messages and events they complete."""
        return self.receive(data)[0]

    def _receive_setup(self, data: bytes | bytearray | memoryview) -> list[Any]:
        """Input before the traffic: greeting, handshake, a 2.0/1.0 peer's identity."""
        if self.state is ERROR_STATE:
            raise ProtocolError("connection already failed or closed")
        if self.state is GREETING:
            data = self._receive_greeting(data)
        if self.state is HANDSHAKE:
            return self._receive_handshake(data)
        if self.state is State.ZAP:
            self.decoder.hold(data)  # until zap_reply
            return []
        if self.state is IDENTITY:
            return self._receive_identity(data)
        return []  # the greeting is not complete

    def close(self) -> None:
        """The connection is over: park in ERROR and drop buffered input now (see the module
        docstring)."""
        self.state = ERROR_STATE
        self.decoder.release()
        if self._boxes is not None:
            self._boxes.release()

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
            raise MechanismMismatch(
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
            self._peer_type = legacy_socket_type(greeting.peer_socket_type)
            self._check_peer_type(self._peer_type)
        if self.protocol is Protocol.ZMTP_2_0:
            self.decoder = FrameDecoder(max_msg_size, command_frames=False)
            encode_message(self._out, self._routing_id)
        else:
            self.decoder = V1FrameDecoder(max_msg_size)
            self._framing = self._batch_encoder = encode_message_v1
            if greeting.unversioned:  # our signature was read as the identity's frame header
                self._out.append(self._routing_id)
            else:
                encode_message_v1(self._out, self._routing_id)
        self.state = IDENTITY

    def _receive_identity(self, data: Any) -> list[Any]:
        """A 2.0 / 1.0 peer's first message is its identity: then traffic, from the same
        input on."""
        try:
            items = self.decoder.feed(data)
        except ProtocolError as exc:
            if exc.messages:
                exc.messages = self._identified(exc.messages)
            raise
        return self._identified(items) if items else []

    def _identified(self, items: list[Any]) -> list[Any]:
        """The peer's identity is ``items[0]``: READY, then the messages that followed."""
        identity = items[0]
        if identity.__class__ is list:
            raise HandshakeError("the peer's identity is not a message of one frame")
        self.state = TRAFFIC
        assert self.protocol is not None  # known since the greeting
        self.peer = Ready(self._peer_type, identity, {}, 0, protocol=self.protocol)
        if self._greeting.unversioned and self.socket_type in _PUBLISHERS:
            return [self.peer, b"\x01", *items[1:]]  # the subscription it will not send
        return [self.peer, *items[1:]]

    def _receive_handshake(self, data: Any) -> list[Any]:
        # The decoder hands over one command per feed while handshaking, and refuses data
        # frames; a fault in a later frame is met after READY and the messages before it, as in
        # libzmq, which handles frame by frame.
        decoder = self.decoder
        mechanism = self.mechanism
        while True:
            if mechanism.zap_request is not None:  # asked at start, or by the last command
                request, mechanism.zap_request = mechanism.zap_request, None
                self.state = State.ZAP
                decoder.hold(data)
                return [request]
            commands = decoder.feed(data)
            if not commands:
                return []
            data = b""  # the rest of the input waits in the decoder
            replies, properties = mechanism.receive(commands[0])
            for body in replies:
                self._out.append(encode_command(body))
            if properties is not None:
                return self._completed(properties)

    @property
    def zap_waiting(self) -> bool:
        """The handshake is paused until ``zap_reply``."""
        return self.state is State.ZAP

    def zap_reply(self, frames: list[bytes] | None) -> list[Any]:
        """Resume a handshake paused for ZAP with the handler's reply (None: no handler is
        bound); returns what ``receive_data`` would, and raises as it does."""
        if self.state is not State.ZAP:
            raise RuntimeError("no ZAP request is waiting for a reply")
        self.state = HANDSHAKE
        try:
            reply = None if frames is None else parse_reply(frames)
            try:
                replies, properties = self.mechanism.zap_replied(reply)
            except AuthenticationFailed as exc:
                if exc.status != 300:  # a temporary failure closes silently (RFC 26, libzmq)
                    self.send_error(str(exc.status))
                raise
            for body in replies:
                self._out.append(encode_command(body))
            if properties is not None:
                return self._completed(properties)
            return self._receive_handshake(b"")
        except ProtocolError:
            self.close()
            raise

    def _completed(self, properties: dict[str, bytes]) -> list[Any]:
        """The handshake is complete: READY, and whatever traffic followed it in the input."""
        ready = self._complete(properties)
        try:
            rest, _ = self._receive_traffic(b"")
        except ProtocolError as exc:
            exc.messages = [ready, *exc.messages]
            raise
        return [ready, *rest]

    def _complete(self, properties: dict[str, bytes]) -> Ready:
        metadata = fold(properties)
        raw_type = metadata.get("socket-type", b"")
        try:
            peer_type = SocketType[raw_type.decode("ascii")]
        except (KeyError, UnicodeDecodeError):
            raise InvalidMetadata(f"peer announced an unknown socket type {raw_type!r}") from None
        self._check_peer_type(peer_type)
        self.state = TRAFFIC
        self.decoder.handshaking = False
        self._subscriptions_as_commands = self._minor >= 1 and self.socket_type in _SUBSCRIBERS
        carried = dict(self.mechanism.zap_properties)
        for name, value in properties.items():
            carried.setdefault(name, value)
        identity = metadata.get("identity", b"")
        self.peer = Ready(peer_type, identity, metadata, self._minor, properties=carried)
        self._accepts_subscriptions = self.socket_type in _PUBLISHERS
        if self.mechanism.encrypts:
            self.decoder.cut_runs()  # equal-size boxes are still boxes, opened one by one
            self._boxes = Boxes(self.mechanism, self._subscriptions_as_commands)
            self.encode = self._encode_boxed  # type: ignore[method-assign]
            self._receive_traffic = self._receive_boxed  # type: ignore[method-assign]
        if self._subscriptions_as_commands or self.mechanism.encrypts:
            self._batch_encoder = self.encode
        return self.peer

    def _check_peer_type(self, peer_type: SocketType) -> None:
        if peer_type not in VALID_PEERS.get(self.socket_type, ()):
            if self.protocol is Protocol.ZMTP_3:  # tell it why (RFC 15: just drop older ones)
                self.send_error("Invalid socket type")
            raise HandshakeError(
                f"a {self.socket_type.name} socket cannot talk to a {peer_type.name} peer"
            )

    def _receive_traffic(self, data: Any) -> tuple[list[Any], bool]:
        try:
            items = self.decoder.feed(data)
        except ProtocolError as exc:
            exc.messages = self._traffic(exc.messages, self.decoder.commands)[0]
            raise
        return self._traffic(items, self.decoder.commands)

    def _receive_boxed(self, data: Any) -> tuple[list[Any], bool]:
        """``_receive_traffic`` on an encrypted connection: every frame is a MESSAGE."""
        boxes = self._boxes
        assert boxes is not None  # swapped in with them (see _complete)
        try:
            items = self.decoder.feed(data)
        except ProtocolError as exc:
            opened, _ = boxes.open(exc.messages)
            exc.messages = [item for item in opened if item.__class__ is not Command]
            raise
        opened, commands = boxes.open(items)
        return self._traffic(opened, commands)

    def _traffic(self, items: list[Any], commands: bool) -> tuple[list[Any], bool]:
        """Handle the commands among decoded items; messages pass through untouched.  Returns
        the items and whether events may be among them (only when there were commands) or
        :class:`~brokerless.runs.Run` items."""
        if not commands:
            return items, self.decoder.runs
        out: list[Any] = []
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
                    self._command(command_body(PONG, context))
                    out.append(Ping(ttl, context))
                elif item.name == PONG:
                    out.append(Pong(item.data))
                elif item.name == ERROR:
                    raise PeerError(f"peer sent ERROR: {parse_error(item.data)}")
                # other commands are ignored, as the RFC lets mechanisms add their own
        except ProtocolError as exc:
            exc.messages = out
            raise
        return out, True
