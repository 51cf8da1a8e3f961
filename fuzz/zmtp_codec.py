"""Fuzz target: the ZMTP codec (``brokerless.zmtp.Connection``) fed what a peer might send.

Input layout: octet 0 picks the socket type (low nibble), the role (0x10: as-server) and
MAXMSGSIZE (top three bits); octet 1 seeds the split points, and its top two bits pick the
mechanism (:data:`MECHANISMS`): NULL, PLAIN, CURVE, or CURVE whose server asks a ZAP handler --
the server or client by the role, with fixed credentials and permanent keys; the rest is the
byte stream from the peer.  A CURVE connection's randomness (short-term keys, nonces, cookie
key) is drawn from a generator seeded afresh for each connection, so the whole and the split
runs make the same keys and send the same bytes, and a seed can hold a complete handshake that
the fuzzer then mutates into the traffic: MESSAGE boxes, nonces, commands.

A server that asks ZAP gets the answer of a handler written here (:func:`_zap_reply`: the
fixed PLAIN user or CURVE client key is let in, a PLAIN user named ``temp`` or ``error`` gets
300 or 500, anyone else 400).  The whole run answers at once; the split run answers only after
feeding the next piece, so the input a paused handshake holds is exercised too.

The stream goes to one connection whole and to a second one cut at the split points (as
memoryviews, as the engine hands over its reads); the second is made with ``runs=True``, as an
engine's is, and the runs of messages it hands on (:class:`~brokerless.runs.Run`) are cut
before anything is compared.  Expected outcomes are decoded items or the
codec's own :class:`ProtocolError`; anything else raised here is a bug:

* only ``ProtocolError`` (and its subclasses) escapes ``receive_data``; after one, the connection
  is in ERROR, holds no input and refuses more;
* messages are ``bytes`` or lists of two or more ``bytes``; events are ``Ready``, ``Ping``,
  ``Pong``; nothing but ``Ready`` comes first, and it comes once;
* nothing delivered was sent before the handshake completed: the delivered parts, at two octets
  of framing each at least, fit in what the stream holds after the command that completes it
  (the first, READY, in NULL; the second, INITIATE or READY, in CURVE) or, from a ZMTP 2.0 or
  1.0 peer, after its identity frame;
* every message re-encoded decodes to itself;
* how the stream is split changes nothing: same items, same ZAP requests, same error class,
  same replies.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Iterator
from contextlib import nullcontext
from functools import partial
from types import SimpleNamespace

import nacl.bindings as sodium

from brokerless.constants import SocketType
from brokerless.runs import Run
from brokerless.zmtp import (
    ERROR_STATE,
    TRAFFIC,
    VALID_PEERS,
    Connection,
    FrameDecoder,
    Ping,
    Pong,
    ProtocolError,
    Ready,
    ZapRequest,
    encode_message,
)
from brokerless.zmtp.commands import command_body, encode_metadata
from brokerless.zmtp.encoder import encode_command
from brokerless.zmtp.frames_v1 import encode_message_v1
from brokerless.zmtp.greeting import rest_of_greeting, signature
from brokerless.zmtp.mechanisms import PlainClient, PlainServer, curve
from brokerless.zmtp.mechanisms.zap import ZapPolicy

T = SocketType
SOCKET_TYPES = sorted(VALID_PEERS)
AS_SERVER = 0x10
#: The mechanism of octet 1's top two bits.
NULL, PLAIN, CURVE, CURVE_ZAP = 0x00, 0x40, 0x80, 0xC0
MECHANISMS = (NULL, PLAIN, CURVE, CURVE_ZAP)
USER, PASSWORD = b"admin", b"secret"
#: The ZAP statuses the handler gives PLAIN users by name (anyone else but USER: 400).
ZAP_STATUS = {USER: b"200", b"temp": b"300", b"error": b"500"}
MAX_MSG_SIZES = [-1, -1, -1, -1, 0, 10, 255, 1000]
MAX_CUTS = 16
SERVER_PUBLIC, SERVER_SECRET = sodium.crypto_box_seed_keypair(b"fuzz-server".ljust(32, b"."))
CLIENT_PUBLIC, CLIENT_SECRET = sodium.crypto_box_seed_keypair(b"fuzz-client".ljust(32, b"."))


class _Determinism:
    """While entered, the CURVE mechanism draws its randomness from this generator."""

    def __init__(self) -> None:
        self._counter = itertools.count()

    def _bytes(self, n: int) -> bytes:
        return hashlib.shake_256(next(self._counter).to_bytes(8, "big")).digest(n)

    def _keypair(self) -> tuple[bytes, bytes]:
        return sodium.crypto_box_seed_keypair(self._bytes(32))

    def __enter__(self) -> None:
        self._saved = (curve.os, curve.sodium)
        curve.os = SimpleNamespace(urandom=self._bytes)
        functions = {
            name: getattr(sodium, name) for name in dir(sodium) if name.startswith("crypto")
        }
        functions["crypto_box_keypair"] = self._keypair
        curve.sodium = SimpleNamespace(**functions)

    def __exit__(self, *exc: object) -> None:
        curve.os, curve.sodium = self._saved


def _mechanism(kind: int, as_server: bool) -> object:
    """The mechanism of a fuzzed connection (CURVE servers: a fresh cookie key)."""
    zap = ZapPolicy(b"fuzz", b"fuzz", required=True)
    if kind == PLAIN:
        if as_server:
            return partial(PlainServer, zap=zap)
        return partial(PlainClient, username=USER, password=PASSWORD)
    if as_server:
        return partial(
            curve.CurveServer,
            secret_key=SERVER_SECRET,
            zap=zap if kind == CURVE_ZAP else None,
            cookies=curve.CookieKeys(clock=lambda: 0.0),
        )
    return partial(
        curve.CurveClient,
        public_key=CLIENT_PUBLIC,
        secret_key=CLIENT_SECRET,
        server_key=SERVER_PUBLIC,
    )


def _zap_reply(request: ZapRequest) -> list[bytes]:
    """The handler's answer (see the module docstring)."""
    if request.mechanism == b"CURVE":
        status = b"200" if request.credentials == (CLIENT_PUBLIC,) else b"400"
    else:
        username, password = request.credentials
        status = ZAP_STATUS.get(username, b"400")
        if username == USER and password != PASSWORD:
            status = b"400"
    return [b"", b"1.0", b"1", status, b"OK", b"fuzz-user", encode_metadata({"X-Fuzz": b"1"})]


_EVENTS = (Ready, Ping, Pong)


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    socket_type = SOCKET_TYPES[(data[0] & 0x0F) % len(SOCKET_TYPES)]
    as_server = bool(data[0] & AS_SERVER)
    max_msg_size = MAX_MSG_SIZES[data[0] >> 5]
    kind = data[1] & CURVE_ZAP
    stream = data[2:]
    whole = _Outcome(socket_type, as_server, max_msg_size, kind)
    whole.feed([stream])
    split = _Outcome(socket_type, as_server, max_msg_size, kind, runs=True)
    view = memoryview(stream)
    split.feed([view[lo:hi] for lo, hi in _pieces(len(stream), data[1])], answer_late=True)
    if (split.items, split.asked, split.error, split.sent) != (
        whole.items,
        whole.asked,
        whole.error,
        whole.sent,
    ):
        raise AssertionError(
            f"the split changed the outcome:\n whole {whole.items!r} {whole.error}\n"
            f" split {split.items!r} {split.error}"
        )
    if whole.items:
        after_ready = _octets_after_handshake(stream, 1 if kind == NULL else 2)
        delivered = sum(2 + len(part) for msg in whole.messages() for part in msg)
        if _unversioned(stream) and socket_type in (SocketType.PUB, SocketType.XPUB):
            delivered -= 2 + 1  # the subscription received in such a peer's name, not sent
        if after_ready is None or delivered > after_ready:
            raise AssertionError(
                f"{delivered} octets of messages from {after_ready} octets after READY"
            )


def _octets_after_handshake(stream: bytes, commands: int) -> int | None:
    """How many octets follow the handshake (None: it is not whole): the ``commands``-th
    command frame after a ZMTP 3 greeting, or the identity frame of a ZMTP 2.0 or 1.0 peer.
    Header arithmetic from RFC 23, 15 and 13, independent of the decoder under test."""
    if _unversioned(stream):
        pos = _after_v1_frame(stream, 0)
    elif len(stream) < 12:
        return None
    elif stream[10] == 0:  # ZMTP 1.0 framing after a 12-octet greeting
        pos = _after_v1_frame(stream, 12)
    elif stream[10] < 3:  # ZMTP 2.0
        pos = _after_frame(stream, 12)
    else:
        pos = 64
        while commands and (after := _after_frame(stream, pos)) is not None:
            commands -= stream[pos] >> 2 & 1  # the COMMAND flag
            pos = after
        if commands:
            return None
    return None if pos is None or pos > len(stream) else len(stream) - pos


def _unversioned(stream: bytes) -> bool:
    """Whether the stream opens with a ZMTP 1.0 identity frame header (no greeting)."""
    return stream[:1] != b"\xff" or (len(stream) >= 10 and not stream[9] & 0x01)


def _after_frame(stream: bytes, pos: int) -> int | None:
    """Where the ZMTP 3 / 2.0 frame at ``pos`` ends (None: its header is not whole)."""
    if len(stream) - pos < 2:
        return None
    if not stream[pos] & 0x02:
        return pos + 2 + stream[pos + 1]
    if len(stream) - pos < 9:
        return None
    return pos + 9 + int.from_bytes(stream[pos + 1 : pos + 9], "big")


def _after_v1_frame(stream: bytes, pos: int) -> int | None:
    """Where the ZMTP 1.0 frame at ``pos`` ends (its length counts its flags octet)."""
    if len(stream) - pos < 1:
        return None
    if stream[pos] != 0xFF:
        return pos + 1 + stream[pos]
    if len(stream) - pos < 9:
        return None
    return pos + 9 + int.from_bytes(stream[pos + 1 : pos + 9], "big")


def _pieces(n: int, seed: int) -> list[tuple[int, int]]:
    """Where to cut a stream of ``n`` octets: up to MAX_CUTS points chosen from ``seed``."""
    if n < 2:
        return [(0, n)]
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, n), min(n - 1, 1 + seed % MAX_CUTS)))
    return list(itertools.pairwise([0, *cuts, n]))


class _Outcome:
    """One connection fed a stream in pieces, checked after every call."""

    def __init__(
        self,
        socket_type: SocketType,
        as_server: bool,
        max_msg_size: int,
        kind: int = NULL,
        runs: bool = False,
    ) -> None:
        self.determinism = _Determinism()
        with self.determinism:
            self.conn = Connection(
                socket_type,
                b"fuzz",
                as_server=as_server,
                max_msg_size=max_msg_size,
                runs=runs,
                **({"mechanism": _mechanism(kind, as_server)} if kind != NULL else {}),
            )
        self.items: list = []
        #: What the ZAP requests asked (mechanism and credentials), in order.
        self.asked: list[tuple[bytes, tuple[bytes, ...]]] = []
        self._waiting: ZapRequest | None = None  # a request not answered yet
        self.error: type[ProtocolError] | None = None
        self.sent = self.conn.data_to_send()

    def messages(self) -> list[list[bytes]]:
        """The messages delivered, each as its list of parts."""
        return [
            item if item.__class__ is list else [item]
            for item in self.items
            if item.__class__ is bytes or item.__class__ is list
        ]

    def feed(self, pieces: list, answer_late: bool = False) -> None:
        """Feed ``pieces`` in turn.  A ZAP request is answered after the piece that raised it
        or, ``answer_late``, after the next one (which the paused handshake holds); at the end
        of the input in any case."""
        conn = self.conn
        for piece in [*pieces, None]:
            asked_before = self._waiting is not None
            try:
                with self.determinism:
                    if piece is not None:
                        self._take(conn.receive_data(piece))
                    if self._waiting is not None and (
                        piece is None or not answer_late or asked_before
                    ):
                        request, self._waiting = self._waiting, None
                        self._take(conn.zap_reply(_zap_reply(request)))
            except ProtocolError as exc:
                self._check(exc.messages)
                self.error = type(exc)
                break
            finally:
                self.sent += conn.data_to_send()
        if self.error is None:
            return
        if conn.state is not ERROR_STATE or conn.decoder.buffered:
            raise AssertionError(f"a failed connection is in {conn.state} holding input")
        try:
            conn.receive_data(b"\x00\x00")
        except ProtocolError:
            return
        raise AssertionError("a failed connection took more input")

    def _take(self, got: list) -> None:
        """What a call returned: a ZAP request is kept for its answer, the rest checked."""
        if got and got[0].__class__ is ZapRequest:
            if len(got) > 1 or self._waiting is not None:
                raise AssertionError(f"a ZAP request with other items: {got!r}")
            request = self._waiting = got[0]
            self.asked.append((request.mechanism, request.credentials))
            return
        self._check(got)

    def _check(self, got: list) -> None:
        for item in [m for i in got for m in (i.messages() if i.__class__ is Run else [i])]:
            cls = item.__class__
            if cls is bytes or cls is list:
                if not self.items or self.items[0].__class__ is not Ready:
                    raise AssertionError(f"{item!r} delivered before the handshake completed")
                _check_message(item)
            elif cls is Ready:
                if self.items:
                    raise AssertionError(f"READY after {self.items!r}")
                if self.conn.peer != item or self.conn.state not in (TRAFFIC, ERROR_STATE):
                    raise AssertionError(f"READY delivered in {self.conn.state}")
            elif cls not in _EVENTS:
                raise AssertionError(f"unexpected item {item!r}")
            self.items.append(item)


def _check_message(msg: bytes | list) -> None:
    if msg.__class__ is list and (len(msg) < 2 or any(part.__class__ is not bytes for part in msg)):
        raise AssertionError(f"malformed multipart message {msg!r}")
    out: list = []
    encode_message(out, msg)
    if FrameDecoder().feed(b"".join(out)) != [msg]:
        raise AssertionError(f"{msg!r} does not survive a round trip")


# -- seeds for the corpus (fuzz/run.py --seed) --------------------------------------------------


def seeds() -> Iterator[bytes]:
    """Valid handshakes and traffic for every socket type and role, whole and split, and the
    classic faults, as inputs of this target."""
    messages = [b"", b"hello", b"x" * 300, [b"a", b""], [b"id", b"", b"y" * 256]]
    for index, socket_type in enumerate(SOCKET_TYPES):
        for as_server in (False, True):
            config = index | (AS_SERVER if as_server else 0)
            for peer_type in sorted(VALID_PEERS[socket_type]):
                traffic = [_handshake(socket_type, peer_type, as_server)]
                for msg in messages:
                    encode_message(traffic, msg)
                traffic += [
                    encode_command(command_body(b"PING", b"\x00\x0actx")),
                    encode_command(command_body(b"PONG", b"ctx")),
                    encode_command(command_body(b"SUBSCRIBE", b"topic")),
                    encode_command(command_body(b"CANCEL", b"topic")),
                ]
                stream = b"".join(traffic)
                for split_seed in (0, 7, 15):
                    yield bytes((config, split_seed)) + stream
            if socket_type is SocketType.PULL:  # a run of equal-size messages, long enough
                runs = [_handshake(socket_type, SocketType.PUSH, as_server)]
                for i in range(300):
                    encode_message(runs, bytes([i % 256]) * 10)
                for split_seed in (0, 7, 15):
                    yield bytes((config, split_seed)) + b"".join(runs)
            wrong = next(t for t in SOCKET_TYPES if t not in VALID_PEERS[socket_type])
            yield bytes((config, 3)) + _handshake(socket_type, wrong, as_server)
    yield from _legacy_seeds(messages)
    greeting = _greeting(as_server=False)
    ready = encode_command(command_body(b"READY", encode_metadata({"Socket-Type": b"PUSH"})))
    pull = SOCKET_TYPES.index(SocketType.PULL)
    for tail in (
        b"\x01\x06before" + ready + b"\x00\x05after",  # a message begun before READY
        ready + b"\x02" + (1 << 62).to_bytes(8, "big") + b"body",  # a frame nobody can hold
        ready + b"\x03" + (1000).to_bytes(8, "big") + b"partial",
        ready + b"\xf0\x00",  # reserved flags
        ready + encode_command(command_body(b"ERROR", b"\x03bye")),
    ):
        for max_size in (0, 7):  # unset, and 1000
            yield bytes((pull | max_size << 5, 5)) + greeting + tail
    yield from secure_seeds()


def secure_seeds() -> Iterator[bytes]:
    """Complete PLAIN and CURVE handshakes (with and without ZAP) and their traffic, for both
    roles, whole and split; refused PLAIN users and a malformed PLAIN HELLO."""
    messages = [b"", b"hello", b"x" * 300, [b"a", b""]]
    pairs = [(T.PULL, T.PUSH), (T.SUB, T.PUB), (T.DEALER, T.ROUTER)]
    for kind in (PLAIN, CURVE, CURVE_ZAP):
        for socket_type, peer_type in pairs:
            for as_server in (False, True):
                config = SOCKET_TYPES.index(socket_type) | (AS_SERVER if as_server else 0)
                stream = _secure_peer_stream(kind, socket_type, peer_type, as_server, messages)
                for split_seed in (0, 7, 15):
                    yield bytes((config, kind | split_seed)) + stream
                if kind != PLAIN:
                    yield bytes((config, kind | 3)) + stream[: 64 + 202]  # greeting, HELLO/WELCOME
    pull = SOCKET_TYPES.index(T.PULL) | AS_SERVER
    greeting = signature(0) + b"\x03" + rest_of_greeting(b"PLAIN", as_server=False)
    for username, password in ((USER, b"wrong"), (b"temp", b""), (b"error", b"x"), (b"eve", b"")):
        hello = bytes((len(username),)) + username + bytes((len(password),)) + password
        yield bytes((pull, PLAIN | 5)) + greeting + encode_command(command_body(b"HELLO", hello))
    for malformed in (b"", b"\x05admin", b"\x05admin\x06secret!", b"\x00\x00", b"\xff"):
        hello = encode_command(command_body(b"HELLO", malformed))
        yield bytes((pull, PLAIN | 5)) + greeting + hello


def _secure_peer_stream(
    kind: int, socket_type: SocketType, peer_type: SocketType, as_server: bool, messages: list
) -> bytes:
    """What a PLAIN or CURVE peer sends the fuzzed connection: handshake, messages, a PING, a
    subscription -- the fuzzed side's randomness drawn as the target will draw it."""
    mine = _Outcome(socket_type, as_server, -1, kind)
    peer = Connection(
        peer_type, b"peer", as_server=not as_server, mechanism=_mechanism(kind, not as_server)
    )
    sides = {peer: None, mine.conn: mine.determinism}

    def give(to: Connection, data: bytes) -> None:
        with sides[to] or nullcontext():
            got = to.receive_data(data)
            while got and got[0].__class__ is ZapRequest:  # each side's handler says yes
                got = to.zap_reply(_zap_reply(got[0]))

    give(peer, mine.sent)  # the greeting (and a client's HELLO)
    sent = []
    for _ in range(4):
        out = peer.data_to_send()
        sent.append(out)
        give(mine.conn, out)
        give(peer, mine.conn.data_to_send())
    for msg in messages:
        peer.send_message(msg)
    peer.send_ping(10, b"ctx")
    sent.append(peer.data_to_send())
    return b"".join(sent)


def _legacy_seeds(messages: list) -> Iterator[bytes]:
    """ZMTP 2.0 and 1.0 peers (RFC 15, RFC 13) of every socket type, and their faults."""
    for index, socket_type in enumerate(SOCKET_TYPES):
        for peer_type in sorted(VALID_PEERS[socket_type]):
            zmtp2 = [_greeting(False)[:10] + bytes((1, peer_type))]
            for msg in [b"peer", *messages]:  # the identity first
                encode_message(zmtp2, msg)
            yield bytes((index, 7)) + b"".join(zmtp2)
        for opening in (b"\x05\x00peer", b"\xff" + (5).to_bytes(8, "big") + b"\x00peer"):
            zmtp1 = [opening]
            for msg in messages:
                encode_message_v1(zmtp1, msg)
            yield bytes((index, 7)) + b"".join(zmtp1)
    pull = SOCKET_TYPES.index(SocketType.PULL)
    zmtp2_push = _greeting(False)[:10] + bytes((1, SocketType.PUSH))
    for stream in (
        zmtp2_push + b"\x01\x04peer\x00\x00",  # a multipart identity
        zmtp2_push + b"\x00\x00\x04\x05\x04PING",  # a command
        zmtp2_push[:11] + bytes((SocketType.PUB,)) + b"\x00\x00",  # a wrong socket type
        b"\x01\x00\x00",  # a ZMTP 1.0 frame of length 0
        b"\x01\x00\xff" + (1 << 62).to_bytes(8, "big"),  # a ZMTP 1.0 frame nobody can hold
    ):
        yield bytes((pull, 3)) + stream


def _greeting(as_server: bool) -> bytes:
    """A whole ZMTP 3.1 greeting with the NULL mechanism."""
    return signature(0) + b"\x03" + rest_of_greeting(b"NULL", as_server)


def _handshake(socket_type: SocketType, peer_type: SocketType, as_server: bool) -> bytes:
    """What a ``peer_type`` peer sends a ``socket_type`` connection: greeting and READY."""
    peer = Connection(peer_type, b"peer", as_server=not as_server)
    peer.receive_data(_greeting(as_server))
    return peer.data_to_send()
