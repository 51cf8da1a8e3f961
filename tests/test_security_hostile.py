"""Hostile PLAIN and CURVE peers over tcp cost only their own connection (issue 13).

A PULL bound on tcp as a PLAIN or CURVE server (with a ZAP handler that knows the good clients'
user or key) takes numbered messages from two good clients (a
brokerless and a libzmq PUSH) while raw TCP clients attack it: malformed and oversized HELLOs,
INITIATEs with forged cookies, boxes or vouches, data frames before READY, and, after a complete
handshake, a replayed, reordered or altered MESSAGE and an unencrypted frame; and clients the
ZAP handler refuses.  The server must
close each attacking connection at once (well within HANDSHAKE_IVL, so the fault closed it, not
the timer), report it on its monitor with libzmq's event and code (``Outcome.check`` says where
libzmq reports more), deliver what the attacker sent before its
fault and nothing after it, lose nothing of the good clients' streams, and take a fresh client
afterwards.

The attacker's CurveZMQ (RFC 26) is written here with libsodium's boxes (PyNaCl), not with
brokerless's codec, so ``BROKERLESS_TEST_AGAINST=pyzmq`` runs the same attacks on libzmq
4.3.5, whose monitor events these tests expect.  The codec-level tests of the same faults are in
test_zmtp_security.py; the HELLO flood is test_security_flood.py.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import nacl.bindings as sodium
import pytest
import zmq as libzmq
from zmq.utils import z85

import brokerless as zmq

from .security_helpers import (
    ZapHandler,
    handshake_events,
    keys_policy,
    make_keys,
    plain_policy,
    secure,
)
from .test_faults import Stream, frame, greeting, read_exact, wait_closed

pytestmark = pytest.mark.timeout(60)

DEADLINE_MS = 5000
ATTACKER = b"raw"  # the tag of the messages an attacker sends (test_faults' Stream format)
_E = libzmq.Event  # libzmq's numbers for the events and PROTOCOL_ERROR_* values


def metadata(**props: bytes) -> bytes:
    """ZMTP metadata (RFC 23): name length, name, value length, value."""
    out = b""
    for name, value in props.items():
        key = name.replace("_", "-").encode()
        out += bytes((len(key),)) + key + len(value).to_bytes(4, "big") + value
    return out


PUSH_METADATA = metadata(Socket_Type=b"PUSH")


def read_command(sock: socket.socket) -> bytes:
    """The body of the next frame, which must be a command."""
    flags, size = read_exact(sock, 2)
    assert flags & 0x04, f"expected a command frame, got flags {flags:#x}"
    if flags & 0x02:
        size = int.from_bytes(bytes((size,)) + read_exact(sock, 7), "big")
    return read_exact(sock, size)


def open_greeting(sock: socket.socket, mechanism: bytes) -> None:
    sock.sendall(greeting(mechanism=mechanism))
    peer = read_exact(sock, 64)
    assert peer[12:32].rstrip(b"\0") == mechanism, peer


# -- a CURVE client by hand (RFC 26) -------------------------------------------------------------


@dataclass(frozen=True)
class Keys:
    """The attacked server's public key and the key pair its ZAP handler admits (raw)."""

    server: bytes
    client: tuple[bytes, bytes]


class RawCurve:
    """One CurveZMQ client connection's keys and nonces; each method returns a command or data
    frame to send, or reads one the server sent."""

    def __init__(self, keys: Keys, known: bool = False) -> None:
        """With ``known``, the permanent key pair is the one the server's ZAP handler knows
        (an insider's), else one of its own."""
        self.server = keys.server
        self.public, self.secret = keys.client if known else sodium.crypto_box_keypair()
        self.short_public, self.short_secret = sodium.crypto_box_keypair()
        self.nonce = 0
        self.server_short = self.cookie = b""

    def next_nonce(self) -> bytes:
        self.nonce += 1
        return self.nonce.to_bytes(8, "big")

    def hello(self, version: bytes = b"\x01\x00", server: bytes | None = None) -> bytes:
        short = self.next_nonce()
        box = sodium.crypto_box(
            bytes(64), b"CurveZMQHELLO---" + short, server or self.server, self.short_secret
        )
        body = b"\x05HELLO" + version + bytes(72) + self.short_public + short + box
        return frame(body, command=True)

    def read_welcome(self, sock: socket.socket) -> None:
        body = read_command(sock)
        assert body.startswith(b"\x07WELCOME") and len(body) == 168, body[:16]
        nonce, box = body[8:24], body[24:]
        plain = sodium.crypto_box_open(box, b"WELCOME-" + nonce, self.server, self.short_secret)
        self.server_short, self.cookie = plain[:32], plain[32:]

    def initiate(
        self,
        cookie: bytes | None = None,
        vouch_secret: bytes | None = None,
        vouched_server: bytes | None = None,
    ) -> bytes:
        """INITIATE; ``cookie``, the key that signs the vouch and the server key it names may
        be replaced by an attacker's."""
        vouch_nonce = os.urandom(16)
        vouch = sodium.crypto_box(
            self.short_public + (vouched_server or self.server),
            b"VOUCH---" + vouch_nonce,
            self.server_short,
            vouch_secret or self.secret,
        )
        short = self.next_nonce()
        box = sodium.crypto_box(
            self.public + vouch_nonce + vouch + PUSH_METADATA,
            b"CurveZMQINITIATE" + short,
            self.server_short,
            self.short_secret,
        )
        body = b"\x08INITIATE" + (cookie or self.cookie) + short + box
        return frame(body, command=True)

    def read_ready(self, sock: socket.socket) -> None:
        body = read_command(sock)
        assert body.startswith(b"\x05READY"), body[:16]
        short, box = body[6:14], body[14:]
        sodium.crypto_box_open(
            box, b"CurveZMQREADY---" + short, self.server_short, self.short_secret
        )

    def message(self, data: bytes, nonce: bytes | None = None) -> bytes:
        """A MESSAGE in a data frame, as libzmq sends it (flags 0: the last part)."""
        short = nonce or self.next_nonce()
        box = sodium.crypto_box(
            b"\x00" + data, b"CurveZMQMESSAGEC" + short, self.server_short, self.short_secret
        )
        return frame(b"\x07MESSAGE" + short + box)

    def welcomed(self, sock: socket.socket) -> RawCurve:
        """Greeting, HELLO and the server's WELCOME on ``sock``: INITIATE comes next."""
        open_greeting(sock, b"CURVE")
        sock.sendall(self.hello())
        self.read_welcome(sock)
        return self

    def handshake(self, sock: socket.socket) -> RawCurve:
        self.welcomed(sock)
        sock.sendall(self.initiate())
        self.read_ready(sock)
        return self


# -- the attacks: each sends its fault and says what the server's monitor reports ----------------


@dataclass
class Outcome:
    """What an attack expects: how its connection ends on the server's monitor -- a failed
    handshake (``event`` with libzmq's PROTOCOL_ERROR_* code or ZAP status as ``value``), or
    (``event`` DISCONNECTED) a drop after a handshake that succeeded -- and which of its
    messages were delivered."""

    event: int
    value: int = 0
    delivered: tuple[bytes, ...] = ()

    def check(self, events: list[tuple[int, int]]) -> None:
        """Against the monitor events of the attacking connection, in order.  libzmq follows
        a failed handshake with DISCONNECTED too, and reports a CURVE MESSAGE that does not
        open as HANDSHAKE_FAILED_PROTOCOL with its code before DISCONNECTED."""
        if self.event != _E.DISCONNECTED:
            assert events[:1] == [(self.event, self.value)], events
            assert all(e == _E.DISCONNECTED for e, _ in events[1:]), events
            return
        assert [e for e, _ in events] == [_E.HANDSHAKE_SUCCEEDED, _E.DISCONNECTED], events


def failed(code: int) -> Outcome:
    return Outcome(_E.HANDSHAKE_FAILED_PROTOCOL, code)


def dropped(*delivered: bytes) -> Outcome:
    """Dropped after its handshake, once ``delivered`` were."""
    return Outcome(_E.DISCONNECTED, delivered=delivered)


Connect = Callable[[], socket.socket]
#: An attack: (its connection, the keys, a factory of more connections) -> what it expects.
Attack = Callable[[socket.socket, Keys, Connect], Outcome]


def curve_malformed_hello(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    open_greeting(sock, b"CURVE")
    sock.sendall(frame(b"\x05HELLO\x01\x00" + bytes(150), command=True))
    return failed(_E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO)


def curve_oversized_hello(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    open_greeting(sock, b"CURVE")
    sock.sendall(frame(RawCurve(keys).hello()[2:] + bytes(5000), command=True))
    return failed(_E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO)


def curve_hello_of_version_2(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    open_greeting(sock, b"CURVE")
    sock.sendall(RawCurve(keys).hello(version=b"\x02\x00"))
    return failed(_E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO)


def curve_hello_for_another_server(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    """A bad box: HELLO's signature box sealed for another server key."""
    open_greeting(sock, b"CURVE")
    sock.sendall(RawCurve(keys).hello(server=sodium.crypto_box_keypair()[0]))
    return failed(_E.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)


def curve_short_initiate(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    client = RawCurve(keys).welcomed(sock)
    sock.sendall(frame(b"\x08INITIATE" + client.cookie + bytes(100), command=True))
    return failed(_E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_INITIATE)


def curve_oversized_bogus_initiate(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    client = RawCurve(keys).welcomed(sock)
    sock.sendall(frame(b"\x08INITIATE" + client.cookie + os.urandom(1 << 16), command=True))
    return failed(_E.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)


def curve_forged_cookie(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    client = RawCurve(keys).welcomed(sock)
    cookie = bytearray(client.cookie)
    cookie[40] ^= 0x01
    sock.sendall(client.initiate(cookie=bytes(cookie)))
    return failed(_E.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)


def curve_cookie_of_another_connection(
    sock: socket.socket, keys: Keys, connect: Connect
) -> Outcome:
    """The cookie of a handshake on another connection, brought by this one's INITIATE."""
    other = connect()  # open until the test ends: its own end is no event of this attack's
    donor = RawCurve(keys).welcomed(other)
    client = RawCurve(keys).welcomed(sock)
    sock.sendall(client.initiate(cookie=donor.cookie))
    return failed(_E.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)


def curve_forged_vouch(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    """An INITIATE that claims the known client's permanent key, its vouch signed with another
    (the attacker does not have the known client's secret key)."""
    client = RawCurve(keys, known=True).welcomed(sock)
    sock.sendall(client.initiate(vouch_secret=sodium.crypto_box_keypair()[1]))
    return failed(_E.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)


def curve_vouch_for_another_server(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    client = RawCurve(keys, known=True).welcomed(sock)
    sock.sendall(client.initiate(vouched_server=sodium.crypto_box_keypair()[0]))
    return failed(_E.PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE)


def curve_data_frame_before_ready(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    client = RawCurve(keys).welcomed(sock)
    # (a data frame that reads as a command of another name: libzmq, which takes any frame as
    # a command here, then names the fault as brokerless does)
    sock.sendall(frame(b"\x04DATA" + ATTACKER, more=True) + client.initiate())
    return failed(_E.PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND)


def curve_replayed_message(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    client = RawCurve(keys, known=True).handshake(sock)
    once = client.message(ATTACKER + b":0:")
    sock.sendall(once + once + client.message(ATTACKER + b":1:"))
    return dropped(b"0")


def curve_reordered_message(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    client = RawCurve(keys, known=True).handshake(sock)
    first, second = client.next_nonce(), client.next_nonce()
    sock.sendall(
        client.message(ATTACKER + b":1:", second) + client.message(ATTACKER + b":0:", first)
    )
    return dropped(b"1")


def curve_altered_box(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    client = RawCurve(keys, known=True).handshake(sock)
    first = client.message(ATTACKER + b":0:")
    altered = bytearray(client.message(ATTACKER + b":1:"))
    altered[-3] ^= 0x01
    sock.sendall(first + altered)
    return dropped(b"0")


def curve_unencrypted_frame(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    client = RawCurve(keys, known=True).handshake(sock)
    sock.sendall(client.message(ATTACKER + b":0:") + frame(ATTACKER + b":1:"))
    return dropped(b"0")


def curve_unknown_client_key(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    """A well-formed handshake with a client key the server's ZAP handler does not know."""
    client = RawCurve(keys).welcomed(sock)
    sock.sendall(client.initiate())
    return Outcome(_E.HANDSHAKE_FAILED_AUTH, 400)


def plain_hello(username: bytes, password: bytes, trailing: bytes = b"") -> bytes:
    credentials = bytes((len(username),)) + username + bytes((len(password),)) + password
    return frame(b"\x05HELLO" + credentials + trailing, command=True)


def plain_malformed_hello(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    open_greeting(sock, b"PLAIN")
    sock.sendall(plain_hello(b"admin", b"secret", trailing=b"more"))
    return failed(_E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO)


def plain_data_frame_before_ready(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    open_greeting(sock, b"PLAIN")
    sock.sendall(plain_hello(b"admin", b"secret"))
    assert read_command(sock) == b"\x07WELCOME"
    initiate = frame(b"\x08INITIATE" + PUSH_METADATA, command=True)
    sock.sendall(frame(ATTACKER + b":0:", more=True) + initiate)
    return failed(_E.PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND)


def plain_wrong_password(sock: socket.socket, keys: Keys, connect: Connect) -> Outcome:
    open_greeting(sock, b"PLAIN")
    sock.sendall(plain_hello(b"admin", b"wrong"))
    return Outcome(_E.HANDSHAKE_FAILED_AUTH, 400)


ATTACKS: dict[str, list[Attack]] = {
    "curve": [
        curve_malformed_hello,
        curve_oversized_hello,
        curve_hello_of_version_2,
        curve_hello_for_another_server,
        curve_short_initiate,
        curve_oversized_bogus_initiate,
        curve_forged_cookie,
        curve_cookie_of_another_connection,
        curve_forged_vouch,
        curve_vouch_for_another_server,
        curve_data_frame_before_ready,
        curve_replayed_message,
        curve_reordered_message,
        curve_altered_box,
        curve_unencrypted_frame,
        curve_unknown_client_key,
    ],
    "plain": [plain_malformed_hello, plain_data_frame_before_ready, plain_wrong_password],
}


# -- the attacked server --------------------------------------------------------------------------


@dataclass
class Server:
    port: int
    keys: dict[str, bytes]
    pull: zmq.Socket
    monitor: zmq.Socket
    stream: Stream
    secure_client: Callable[[zmq.Socket], None]

    def events(self, until: int) -> list[tuple[int, int]]:
        """The monitor events up to the first of the mask ``until`` (which must come within
        the deadline), and any that are already there after it."""
        found: list[tuple[int, int]] = []
        wait = DEADLINE_MS
        while self.monitor.poll(wait):
            head, _ = self.monitor.recv_multipart()
            found.append(struct.unpack("=HI", head[:6]))
            if found[-1][0] & until:
                wait = 0
        assert any(event & until for event, _ in found), f"no event {until:#x}: {found}"
        return found


def serve(mechanism: str, make, lmake, ctx, handlers: list[ZapHandler]) -> Server:
    """A PULL bound on tcp as a ``mechanism`` server, its two good clients connected and
    through their handshakes, its monitor drained."""
    keys = make_keys(zmq)
    known = {z85.decode(keys["client_public"])}  # the good clients' key, as ZAP passes it
    policy = plain_policy if mechanism == "plain" else keys_policy(known)
    handlers.append(ZapHandler(zmq, ctx, policy))
    pull = make(zmq.PULL, RCVHWM=0)
    monitor = pull.get_monitor_socket(handshake_events(zmq) | zmq.EVENT_DISCONNECTED)
    pushes = {b"bl": make(zmq.PUSH, SNDHWM=0), b"lib": lmake(libzmq.PUSH, SNDHWM=0)}
    secure(mechanism, pull, pushes[b"bl"], zmq, zmq, keys)
    secure(mechanism, pull, pushes[b"lib"], zmq, libzmq, keys)
    pull.bind("tcp://127.0.0.1:*")
    address = pull.getsockopt(zmq.LAST_ENDPOINT).decode()
    for push in pushes.values():
        push.connect(address)
    for _ in pushes:
        assert monitor.poll(DEADLINE_MS), "a good client's handshake did not end"
        head, _ = monitor.recv_multipart()
        assert struct.unpack("=HI", head[:6])[0] == zmq.EVENT_HANDSHAKE_SUCCEEDED

    def secure_client(sock) -> None:
        secure(mechanism, pull, sock, zmq, zmq, keys)

    port = int(address.rsplit(":", 1)[1])
    return Server(port, keys, pull, monitor, Stream(pushes, [pull]), secure_client)


@pytest.fixture
def handlers():
    made: list[ZapHandler] = []
    yield made
    for handler in made:
        handler.close()


@pytest.fixture
def connections():
    """``connect(port)``: a raw tcp connection to 127.0.0.1, closed when the test ends."""
    made: list[socket.socket] = []

    def connect(port: int) -> socket.socket:
        made.append(socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_MS / 1000))
        return made[-1]

    yield connect
    for sock in made:
        sock.close()


#: Where brokerless does better than libzmq 4.3.5: libzmq checks only the vouch's first key
#: (the client's short-term one) and lets a vouch for another server through; after its ZAP
#: handler refused a client it sends ERROR but keeps the connection open until the peer closes
#: it or HANDSHAKE_IVL (30 s) runs out; and with a monitor on the socket it leaves a connection
#: whose MESSAGE does not open (replayed, reordered, altered, unencrypted) open in about one
#: trial in four (7 of 30 here for a replay and for an altered box; 0 of 30 without a monitor:
#: the monitor event it sends there seems to overwrite the error it goes on to check).
BEYOND_LIBZMQ = {
    curve_vouch_for_another_server,
    curve_unknown_client_key,
    plain_wrong_password,
    curve_replayed_message,
    curve_reordered_message,
    curve_altered_box,
    curve_unencrypted_frame,
}


def attacks(mechanism: str) -> list:
    return [
        pytest.param(
            mechanism,
            attack,
            id=f"{mechanism}-{attack.__name__}",
            marks=[pytest.mark.beyond_libzmq] if attack in BEYOND_LIBZMQ else [],
        )
        for attack in ATTACKS[mechanism]
    ]


@pytest.mark.parametrize(("mechanism", "attack"), attacks("curve") + attacks("plain"))
def test_a_hostile_handshake_costs_only_its_own_connection(
    make, lmake, ctx, handlers, connections, mechanism, attack
):
    server = serve(mechanism, make, lmake, ctx, handlers)
    for _ in range(10):
        server.stream.step()
    raw = connections(server.port)
    started = time.monotonic()
    keys = Keys(
        z85.decode(server.keys["server_public"]),
        (z85.decode(server.keys["client_public"]), z85.decode(server.keys["client_secret"])),
    )
    expected = attack(raw, keys, partial(connections, server.port))

    wait_closed(raw, server.stream)
    took = time.monotonic() - started
    assert took < DEADLINE_MS / 1000, f"closed after {took:.1f} s"  # the fault, not HANDSHAKE_IVL
    expected.check(server.events(expected.event))
    for _ in range(10):
        server.stream.step()
    server.stream.finish()  # the good clients lost nothing
    assert [m.split(b":")[1] for m in server.stream.extra[0]] == list(expected.delivered)
    fresh = make(zmq.PUSH)
    server.secure_client(fresh)
    fresh.connect(f"tcp://127.0.0.1:{server.port}")
    fresh.send(b"fresh")
    assert server.pull.recv() == b"fresh"  # RCVTIMEO bounds it
