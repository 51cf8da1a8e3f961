"""A bad peer costs only its own connection.

A brokerless PUB (or PULL) is bound on tcp and streams numbered messages to well-behaved peers
(a brokerless and a libzmq SUB; or from a brokerless and a libzmq PUSH).  Meanwhile raw TCP
clients attack the same endpoint: garbage, broken ZMTP 1.0 and 2.0 openings, an unsupported
mechanism, frames larger than MAXMSGSIZE, stalled handshakes, a wrong socket type...  Each
attacking connection must be closed by brokerless within a deadline, and the good peers must
receive every message, in order, with no gap (HWM 0 everywhere, so nothing may be dropped).  A
fresh peer must still be able to connect afterwards.

The attacker's ZMTP bytes are written by hand from RFC 23/37 (not with brokerless's codec), so
``BROKERLESS_TEST_AGAINST=pyzmq`` runs the same tests against libzmq; the attacks libzmq
tolerates are ``beyond_libzmq`` (a ZMTP 1.0 or 2.0 peer has no handshake to time out and no
socket type check there, and it ignores reserved flag bits).  Any first octet but 0xFF opens a
ZMTP 1.0 peer's identity frame, which both accept (see test_zmtp_legacy.py): garbage here starts
with a frame length of 0, which both refuse.

A subscriber that never reads is a bad peer too, of another kind: it is not dropped, but must
hold nobody else back.
"""

from __future__ import annotations

import random
import select
import socket
import time

import pytest
import zmq as libzmq

import brokerless as zmq

from .conftest import AGAINST_PYZMQ

DEADLINE = 5.0  # seconds any wait may take before the test fails
HANDSHAKE_IVL = 200  # ms, set on the attacked socket
MAXMSGSIZE = 1024

# -- ZMTP 3.1 wire bytes, by hand (RFC 23 / RFC 37) ----------------------------------------------


def greeting(major: int = 3, minor: int = 1, mechanism: bytes = b"NULL") -> bytes:
    """Signature (0xFF, 8 octets of padding whose last bit is set, 0x7F), version, mechanism
    padded to 20 octets, as-server 0, 31 octets of filler: 64 octets."""
    return (
        b"\xff" + bytes(7) + b"\x01" + b"\x7f"
        + bytes((major, minor))
        + mechanism.ljust(20, b"\x00")
        + b"\x00"
        + bytes(31)
    )  # fmt: skip


def frame(body: bytes, *, more: bool = False, command: bool = False) -> bytes:
    flags = (0x01 if more else 0) | (0x04 if command else 0)
    if len(body) < 256:
        return bytes((flags, len(body))) + body
    return bytes((flags | 0x02,)) + len(body).to_bytes(8, "big") + body


def ready(socket_type: bytes) -> bytes:
    """A READY command announcing ``socket_type`` (and, as every peer may, an Identity)."""
    props = b"\x0bSocket-Type" + len(socket_type).to_bytes(4, "big") + socket_type
    props += b"\x08Identity" + (0).to_bytes(4, "big")
    return frame(b"\x05READY" + props, command=True)


# -- the raw client ------------------------------------------------------------------------------


def read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))  # bounded by the socket's timeout
        if not chunk:
            raise AssertionError(f"connection closed after {len(data)} of {n} octets")
        data += chunk
    return data


def handshake(sock: socket.socket, socket_type: bytes) -> None:
    """Greeting and READY both ways, as a well-behaved peer of type ``socket_type`` would."""
    sock.sendall(greeting())
    peer = read_exact(sock, 64)
    assert peer[0] == 0xFF and peer[9] == 0x7F and peer[10] == 3, peer
    assert peer[12:32].rstrip(b"\x00") == b"NULL", peer
    sock.sendall(ready(socket_type))
    flags, size = read_exact(sock, 2)
    assert flags & 0x04, "the server's first frame after the greeting must be a command"
    if flags & 0x02:
        size = int.from_bytes(bytes((size,)) + read_exact(sock, 7), "big")
    assert read_exact(sock, size).startswith(b"\x05READY")


def _garbage(n: int, seed: int) -> bytes:
    data = random.Random(seed).randbytes(n)
    return b"\x00" + data[1:]  # a ZMTP 1.0 frame of length 0: not the start of any opening


# Each attack gets the raw connection and the valid / invalid peer type for the attacked socket.
def attack_random_garbage(sock, valid, invalid):
    sock.sendall(_garbage(4096, seed=1))


def attack_http_request(sock, valid, invalid):
    sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")


def attack_garbage_after_signature(sock, valid, invalid):
    sock.sendall(greeting()[:10] + b"\x03\x01" + _garbage(200, seed=2))


def attack_zmtp_1_0_stalled(sock, valid, invalid):
    # ZMTP 1.0 has no greeting: the first frame is the identity (length 6: flags and 5 octets),
    # of which only 3 octets come.
    sock.sendall(b"\x06\x00abc")


def attack_zmtp_2_0_wrong_socket_type(sock, valid, invalid):
    # Signature, revision 1, socket type (PUSH 8 / PUB 1 in ZMTP 2.0 numbering), identity frame.
    sock.sendall(greeting()[:10] + b"\x01" + bytes((_ZMTP2_TYPES[invalid],)) + b"\x00\x00")


_ZMTP2_TYPES = {b"PUB": 1, b"PUSH": 8}


def attack_zmtp_3_0_major_2(sock, valid, invalid):
    # A full-length greeting whose version is 2.0 and which then waits.
    sock.sendall(greeting(major=2, minor=0))


def attack_unsupported_mechanism(sock, valid, invalid):
    sock.sendall(greeting(mechanism=b"CURVE"))


OVERSIZE_HEADER = b"\x02" + (1 << 20).to_bytes(8, "big")  # a frame that announces 1 MiB


def attack_oversize_frame(sock, valid, invalid):
    handshake(sock, valid)
    sock.sendall(OVERSIZE_HEADER + b"y" * 100)  # only the first octets of its body follow


def attack_oversize_command(sock, valid, invalid):
    handshake(sock, valid)
    sock.sendall(b"\x06" + (1 << 20).to_bytes(8, "big") + b"\x09SUBSCRIBE")


def attack_absurd_frame_size(sock, valid, invalid):
    handshake(sock, valid)
    sock.sendall(b"\x02" + b"\xff" * 8)


def attack_reserved_flags(sock, valid, invalid):
    handshake(sock, valid)
    sock.sendall(b"\xf0\x03abc")


def attack_stalled_after_greeting(sock, valid, invalid):
    sock.sendall(greeting())


def attack_stalled_partial_greeting(sock, valid, invalid):
    sock.sendall(greeting()[:11])


def attack_silent(sock, valid, invalid):
    pass


def attack_message_before_ready(sock, valid, invalid):
    sock.sendall(greeting())
    read_exact(sock, 64)
    sock.sendall(frame(b"too early"))


def attack_wrong_socket_type(sock, valid, invalid):
    sock.sendall(greeting())
    read_exact(sock, 64)
    sock.sendall(ready(invalid))


def attack_unknown_socket_type(sock, valid, invalid):
    sock.sendall(greeting())
    read_exact(sock, 64)
    sock.sendall(ready(b"BOGUS"))


# libzmq takes a first octet other than 0xFF for ZMTP 1.0 and gives ZMTP 1.0 and 2.0 peers no
# handshake to time out and no socket type check, and ignores reserved flag bits: it keeps these
# connections open.
libzmq_tolerates = pytest.mark.beyond_libzmq

ATTACKS = [
    pytest.param(attack_random_garbage, id="random_garbage"),
    pytest.param(attack_http_request, id="http_request", marks=libzmq_tolerates),
    pytest.param(attack_garbage_after_signature, id="garbage_after_signature"),
    pytest.param(attack_zmtp_1_0_stalled, id="zmtp_1_0_stalled", marks=libzmq_tolerates),
    pytest.param(
        attack_zmtp_2_0_wrong_socket_type, id="zmtp_2_0_wrong_socket_type", marks=libzmq_tolerates
    ),
    pytest.param(attack_zmtp_3_0_major_2, id="greeting_major_2", marks=libzmq_tolerates),
    pytest.param(attack_unsupported_mechanism, id="unsupported_mechanism"),
    pytest.param(attack_oversize_frame, id="oversize_frame"),
    pytest.param(attack_oversize_command, id="oversize_command"),
    pytest.param(attack_absurd_frame_size, id="absurd_frame_size"),
    pytest.param(attack_reserved_flags, id="reserved_flags", marks=libzmq_tolerates),
    pytest.param(attack_stalled_after_greeting, id="stalled_after_greeting"),
    pytest.param(attack_stalled_partial_greeting, id="stalled_partial_greeting"),
    pytest.param(attack_silent, id="silent"),
    pytest.param(attack_message_before_ready, id="message_before_ready"),
    pytest.param(attack_wrong_socket_type, id="wrong_socket_type"),
    pytest.param(attack_unknown_socket_type, id="unknown_socket_type"),
]

# -- the good traffic ----------------------------------------------------------------------------


class Stream:
    """Numbered messages from every sender to every receiver, checked for gaps at the end.

    ``step()`` sends the next few messages and reads what has arrived (without blocking), so
    the stream runs on while an attack is under way.
    """

    PER_STEP = 3

    def __init__(self, senders: dict[bytes, object], receivers: list, pad: bytes = b"") -> None:
        self.senders = senders
        self.pad = pad
        self.receivers = receivers
        self.sent = dict.fromkeys(senders, 0)
        self.got: list[dict[bytes, list[int]]] = [{tag: [] for tag in senders} for _ in receivers]
        self.extra: list[list[bytes]] = [[] for _ in receivers]

    def step(self) -> None:
        for tag, sender in self.senders.items():
            for _ in range(self.PER_STEP):
                sender.send(b"%s:%d:%s" % (tag, self.sent[tag], self.pad))
                self.sent[tag] += 1
        for i in range(len(self.receivers)):
            while self.receivers[i].poll(0, libzmq.POLLIN):
                self._take(i, self.receivers[i].recv())

    def _take(self, i: int, msg: bytes) -> bool:
        """Record one message; True if it was an end marker."""
        if msg == b"probe":  # left over from _sync_subscribers
            return False
        tag, _, rest = msg.partition(b":")
        if tag not in self.got[i]:
            self.extra[i].append(msg)
            return False
        if rest == b"end":
            return True
        n, _, pad = rest.partition(b":")
        assert pad == self.pad, f"message {n!r} from {tag!r} arrived damaged"
        self.got[i][tag].append(int(n))
        return False

    def finish(self) -> None:
        """Send the end markers, read up to them, and check that nothing is missing."""
        for tag, sender in self.senders.items():
            sender.send(tag + b":end")
        deadline = time.monotonic() + DEADLINE
        for i, receiver in enumerate(self.receivers):
            ends = 0
            while ends < len(self.senders):
                left = deadline - time.monotonic()
                if left <= 0 or not receiver.poll(int(left * 1000) + 1, libzmq.POLLIN):
                    raise AssertionError(f"receiver {i} did not get the end of the stream")
                ends += self._take(i, receiver.recv())
        for i in range(len(self.receivers)):
            for tag, count in self.sent.items():
                assert self.got[i][tag] == list(range(count)), (
                    f"receiver {i} lost or reordered messages from {tag!r}"
                )


def wait_closed(raw: socket.socket, stream: Stream, timeout: float = DEADLINE) -> None:
    """Run the stream until the server closes ``raw`` (EOF or reset), or fail."""
    deadline = time.monotonic() + timeout
    while True:
        stream.step()
        readable, _, _ = select.select([raw], [], [], 0.01)
        if readable:
            try:
                if not raw.recv(65536):
                    return
            except (ConnectionResetError, BrokenPipeError):
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"the server did not close the bad connection within {timeout}s")


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture
def raw_clients():
    made: list[socket.socket] = []

    def factory(port: int) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        made.append(sock)
        return sock

    yield factory
    for sock in made:
        sock.close()


def _pub_with_subscribers(make, lmake, **options) -> tuple:
    """A bound PUB (SNDHWM 0 and ``options``), its address, and a brokerless and a libzmq SUB
    (RCVHWM 0) subscribed to everything and connected to it."""
    pub = make(zmq.PUB, SNDHWM=0, **options)
    pub.bind("tcp://127.0.0.1:*")
    address = pub.getsockopt(zmq.LAST_ENDPOINT).decode()
    subs = [make(zmq.SUB, RCVHWM=0), lmake(libzmq.SUB, RCVHWM=0)]
    for sub in subs:
        sub.setsockopt(libzmq.SUBSCRIBE, b"")
        sub.connect(address)
    return pub, address, subs


def _port(sock) -> int:
    return int(sock.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1])


def _sync_subscribers(pub, subs) -> None:
    """Publish probes until every subscriber has one (their subscriptions are in force)."""
    seen = [False] * len(subs)
    deadline = time.monotonic() + DEADLINE
    while not all(seen):
        if time.monotonic() > deadline:
            raise AssertionError("subscriptions never reached the publisher")
        pub.send(b"probe")
        for i, sub in enumerate(subs):
            if sub.poll(10, libzmq.POLLIN):
                seen[i] = True
                while sub.poll(0, libzmq.POLLIN):
                    sub.recv()


@pytest.fixture(params=["PUB", "PULL"])
def attacked(request, make, lmake):
    """``(port, stream, valid peer type, invalid peer type, fresh_peer_check)``."""
    if request.param == "PUB":
        pub, address, subs = _pub_with_subscribers(
            make, lmake, MAXMSGSIZE=MAXMSGSIZE, HANDSHAKE_IVL=HANDSHAKE_IVL
        )
        _sync_subscribers(pub, subs)
        stream = Stream({b"pub": pub}, subs)

        def fresh_peer_works():
            sub = make(zmq.SUB, RCVHWM=0)
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            sub.connect(address)
            _sync_subscribers(pub, [sub])

        return _port(pub), stream, b"SUB", b"PUSH", fresh_peer_works

    pull = make(zmq.PULL, RCVHWM=0, MAXMSGSIZE=MAXMSGSIZE, HANDSHAKE_IVL=HANDSHAKE_IVL)
    pull.bind("tcp://127.0.0.1:*")
    address = pull.getsockopt(zmq.LAST_ENDPOINT).decode()
    pushes = {b"bl": make(zmq.PUSH, SNDHWM=0), b"lib": lmake(libzmq.PUSH, SNDHWM=0)}
    for push in pushes.values():
        push.connect(address)
    stream = Stream(pushes, [pull])

    def fresh_peer_works():
        push = make(zmq.PUSH)
        push.connect(address)
        push.send(b"fresh")
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            if pull.poll(100, zmq.POLLIN) and pull.recv() == b"fresh":
                return
        raise AssertionError("a new PUSH could not reach the PULL after the attack")

    return _port(pull), stream, b"PUSH", b"PUB", fresh_peer_works


# -- tests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("attack", ATTACKS)
def test_bad_peer_is_dropped_and_good_peers_lose_nothing(attacked, raw_clients, attack):
    port, stream, valid, invalid, fresh_peer_works = attacked
    for _ in range(10):
        stream.step()
    raw = raw_clients(port)
    attack(raw, valid, invalid)
    wait_closed(raw, stream)
    for _ in range(10):
        stream.step()
    stream.finish()
    assert stream.extra == [[] for _ in stream.receivers]
    fresh_peer_works()


@pytest.mark.parametrize("split", [False, True], ids=["one_write", "two_writes"])
def test_messages_before_an_oversize_frame_are_delivered(make, raw_clients, split):
    """A peer's whole messages that precede its fault on the wire are delivered (libzmq pushes
    each message on as it decodes it), even when they arrive in the same read as the fault."""
    pull = make(zmq.PULL, MAXMSGSIZE=MAXMSGSIZE)
    pull.bind("tcp://127.0.0.1:*")
    raw = raw_clients(_port(pull))
    handshake(raw, b"PUSH")
    good = [frame(b"first"), frame(b"a", more=True) + frame(b"b"), frame(b"x" * MAXMSGSIZE)]
    if split:
        raw.sendall(b"".join(good))
        assert pull.recv() == b"first"  # RCVTIMEO bounds it
        raw.sendall(OVERSIZE_HEADER)
    else:
        raw.sendall(b"".join(good) + OVERSIZE_HEADER)
    wait_closed(raw, Stream({}, []))
    received = [pull.recv_multipart() for _ in range(2 if split else 3)]
    expected = [[b"a", b"b"], [b"x" * MAXMSGSIZE]]
    assert received == (expected if split else [[b"first"], *expected])


def test_every_attack_at_once(attacked, raw_clients):
    """All the attacks on concurrent connections, while the stream runs."""
    port, stream, valid, invalid, fresh_peer_works = attacked
    raws = []
    for param in ATTACKS:
        if AGAINST_PYZMQ and param.marks:
            continue
        raw = raw_clients(port)
        param.values[0](raw, valid, invalid)
        raws.append(raw)
        stream.step()
    for raw in raws:
        wait_closed(raw, stream)
    stream.finish()
    fresh_peer_works()


def test_a_well_behaved_raw_peer_is_not_dropped(attacked, raw_clients):
    """A control for the tests above: a valid handshake and nothing wrong afterwards keeps the
    connection open past HANDSHAKE_IVL (so the closes above are the faults' doing)."""
    port, stream, valid, _invalid, fresh_peer_works = attacked
    raw = raw_clients(port)
    handshake(raw, valid)
    deadline = time.monotonic() + 3 * HANDSHAKE_IVL / 1000
    while time.monotonic() < deadline:
        stream.step()
        readable, _, _ = select.select([raw], [], [], 0.01)
        if readable:
            assert raw.recv(65536), "the server closed a well-behaved connection"
    stream.finish()
    fresh_peer_works()


def test_a_subscriber_that_never_reads_holds_nobody_back(make, lmake, raw_clients):
    """A raw SUB subscribes to everything and never reads: its connection backs up (the PUB's
    queue for it grows, SNDHWM 0), while the good subscribers get all 20 MB, in order."""
    pub, _, subs = _pub_with_subscribers(make, lmake)
    raw = raw_clients(_port(pub))
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    handshake(raw, b"SUB")
    raw.sendall(frame(b"\x09SUBSCRIBE", command=True))
    _sync_subscribers(pub, subs)
    stream = Stream({b"pub": pub}, subs, pad=b"x" * 1000)
    for _ in range(20_000 // Stream.PER_STEP):
        stream.step()
    stream.finish()
    assert select.select([raw], [], [], DEADLINE)[0], "the PUB never sent to the raw SUB"


def test_a_ping_among_messages_the_pipe_cannot_take_yet_is_answered_not_received(
    make, raw_clients
):
    """One read brings far more than RCVHWM allows, with a PING in the middle: the messages
    come out whole and in order as the socket reads, and the PING is answered with a PONG,
    never handed to the application as a message."""
    pull = make(zmq.PULL, RCVHWM=10, RCVTIMEO=int(DEADLINE * 1000))
    pull.bind("tcp://127.0.0.1:*")
    raw = raw_clients(_port(pull))
    handshake(raw, b"PUSH")
    before = [b"a%d" % i for i in range(2000)]
    after = [b"b%d" % i for i in range(20)]
    ping = frame(b"\x04PING" + (0).to_bytes(2, "big") + b"ctx", command=True)
    raw.sendall(b"".join(map(frame, before)) + ping + b"".join(map(frame, after)))
    assert [pull.recv() for _ in range(len(before) + len(after))] == before + after
    flags, size = read_exact(raw, 2)
    assert flags == 0x04
    assert read_exact(raw, size) == b"\x04PONGctx"
