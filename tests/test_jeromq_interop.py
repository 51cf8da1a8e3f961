"""Interoperability with JeroMQ 0.3.6 (Debian's ``libjeromq-java``), which speaks ZMTP 2.0.

Every valid socket pair runs with brokerless on either end of it, binding and connecting, over
tcp: one side is a brokerless socket, the other a JeroMQ socket in a JVM (tests/jeromq/).  The
payloads cover multipart messages, empty frames, the short/long frame boundary and bodies above
64 KiB; routing ids set on one side reach the ROUTER on the other (in ZMTP 2.0 they travel as
the identity frame after the greeting); subscriptions and cancellations travel as messages.

JeroMQ 0.3.6 answers a ZMTP 3 greeting as libzmq 3.2 does: it sends revision 1 and its socket
type, and frames as ZMTP 2.0 whatever the peer announced, so every pairing below is ZMTP 2.0.

The module needs a JDK and the jar.  Without them it is not collected (the run's header says
so), unless BROKERLESS_REQUIRE_JEROMQ=1 (CI sets it), where every test fails saying what is
missing.  Under ``BROKERLESS_TEST_AGAINST=pyzmq`` the brokerless side is libzmq, which checks
the tests themselves: libzmq talks to JeroMQ 0.3.6 in every pairing.
"""

from __future__ import annotations

import time

import pytest

import brokerless as zmq

from .jeromq import JeroMQ, JeroSocket, requirements_missing

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 5000  # any message should arrive within this

PAYLOADS: list[list[bytes]] = [
    [b"hello"],
    [b"multi", b"part", b"message"],
    [b""],
    [b"", b""],
    [b"a" * 255],
    [b"b" * 256],
    [b"c" * 300, b"d"],
    [bytes(range(256)) * 300],  # 76,800 octets
    [b"head", b"e" * 70_000, b"", b"tail"],
]
ID_A, ID_B = b"side-a", b"side-b"


def _reply_to(msg: list[bytes]) -> list[bytes]:
    """A reply that differs from the request, so echoes are told apart."""
    return [b"re:" + part[:16] for part in reversed(msg)]


class Ours:
    """A brokerless socket behind the calls a :class:`JeroSocket` offers."""

    def __init__(self, sock) -> None:
        self.sock = sock

    def bind(self) -> str:
        self.sock.bind("tcp://127.0.0.1:*")
        return self.sock.getsockopt(zmq.LAST_ENDPOINT).decode()

    def connect(self, endpoint: str) -> None:
        self.sock.connect(endpoint)

    def set_identity(self, identity: bytes) -> None:
        self.sock.setsockopt(zmq.ROUTING_ID, identity)

    def subscribe(self, topic: bytes) -> None:
        self.sock.setsockopt(zmq.SUBSCRIBE, topic)

    def unsubscribe(self, topic: bytes) -> None:
        self.sock.setsockopt(zmq.UNSUBSCRIBE, topic)

    def send(self, parts: list[bytes]) -> None:
        self.sock.send_multipart(parts)

    def recv(self, timeout_ms: int) -> list[bytes] | None:
        return self.sock.recv_multipart() if self.sock.poll(timeout_ms, zmq.POLLIN) else None


Side = Ours | JeroSocket


def recv(side: Side, skip: tuple[list[bytes], ...] = ()) -> list[bytes]:
    """The next message that is not in ``skip`` (probes left over from a sync)."""
    while True:
        msg = side.recv(TIMEOUT_MS)
        assert msg is not None, f"no message within {TIMEOUT_MS} ms"
        if msg not in skip:
            return msg


def sync(sender: Side, probe: list[bytes], receiver: Side, expect: list[bytes]) -> int:
    """Send ``probe`` until ``expect`` arrives (messages sent before a publisher knows the
    subscription, or to a ROUTER peer not yet connected, are dropped); how many were sent."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    sent = 0
    while time.monotonic() < deadline:
        sender.send(probe)
        sent += 1
        if receiver.recv(50) == expect:
            return sent
    raise AssertionError(f"{probe!r} never got through")


# -- the scenarios: ``a`` and ``b`` are the pair's first and second socket -----------------------


def push_pull(a: Side, b: Side) -> None:
    for msg in PAYLOADS:
        a.send(msg)
    assert [recv(b) for _ in PAYLOADS] == PAYLOADS


def round_trips(a: Side, b: Side) -> None:
    """REQ/REP, DEALER/DEALER, PAIR/PAIR: a request each way, in turn."""
    for msg in PAYLOADS:
        a.send(msg)
        assert recv(b) == msg
        b.send(_reply_to(msg))
        assert recv(a) == _reply_to(msg)


def req_router(a: Side, b: Side) -> None:
    for msg in PAYLOADS:
        a.send(msg)
        assert recv(b) == [ID_A, b"", *msg]
        b.send([ID_A, b"", *_reply_to(msg)])
        assert recv(a) == _reply_to(msg)


def dealer_rep(a: Side, b: Side) -> None:
    for msg in PAYLOADS:
        a.send([b"", *msg])
        assert recv(b) == msg
        b.send(_reply_to(msg))
        assert recv(a) == [b"", *_reply_to(msg)]


def dealer_router(a: Side, b: Side) -> None:
    for msg in PAYLOADS:
        a.send(msg)
        assert recv(b) == [ID_A, *msg]
        b.send([ID_A, *_reply_to(msg)])
        assert recv(a) == _reply_to(msg)


def router_router(a: Side, b: Side) -> None:
    """Each learns the other's identity from the handshake, whoever connected."""
    sync(a, [ID_B, b"probe"], b, [ID_A, b"probe"])
    for msg in PAYLOADS:
        a.send([ID_B, *msg])
        assert recv(b, skip=([ID_A, b"probe"],)) == [ID_A, *msg]
        b.send([ID_A, *_reply_to(msg)])
        assert recv(a) == [ID_B, *_reply_to(msg)]


def pub_sub(a: Side, b: Side) -> None:
    """Subscriptions and a cancellation reach the publisher (as messages, in ZMTP 2.0), which
    filters; what the subscriber receives is in order."""
    b.subscribe(b"A")
    b.subscribe(b"B")
    # B travels after A: once B is in force, so is A (a probe of A proved only A, and under
    # load B1 was sent before the publisher had read B)
    sync(a, [b"B-probe"], b, [b"B-probe"])
    for msg in ([b"B1"], [b"C1"], [b"A1", b"more"]):
        a.send(msg)
    assert recv(b, skip=([b"B-probe"],)) == [b"B1"]
    assert recv(b) == [b"A1", b"more"]  # not C1
    b.unsubscribe(b"B")
    b.subscribe(b"D")  # travels after the cancellation: once it is in force, so is that
    sync(a, [b"D-probe"], b, [b"D-probe"])
    a.send([b"B2"])
    a.send([b"A2"])
    assert recv(b, skip=([b"D-probe"],)) == [b"A2"]  # not B2


def xpub_xsub(a: Side, b: Side) -> None:
    """The XPUB receives the XSUB's subscription messages as they were sent.

    The subscription is sent until it arrives: one sent by a binding XSUB before its peer has
    connected is lost from a JeroMQ 0.3.6 XSUB (to a libzmq or a brokerless XPUB alike), and
    from a libzmq XSUB to a JeroMQ XPUB.  The XPUB passes on only the first; the XSUB counts
    them, so as many cancellations undo them."""
    sent = sync(b, [b"\x01A"], a, [b"\x01A"])
    for msg in ([b"A1"], [b"B1"], PAYLOADS[-1], [b"A2"]):
        a.send(msg)
    assert recv(b) == [b"A1"]
    assert recv(b) == [b"A2"]
    for _ in range(sent):
        b.send([b"\x00A"])
    assert recv(a) == [b"\x00A"]


def pub_xsub(a: Side, b: Side) -> None:
    """The PUB filters on the XSUB's subscription message.  The XSUB sends it until the PUB's
    probe gets through (one sent before the connection is lost, see xpub_xsub); the
    cancellation is not checked here, as an XSUB passes on only the last of several (libzmq's
    too), which leaves the resent subscription in force: xpub_xsub checks that it travels."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:
        b.send([b"\x01A"])
        a.send([b"A-probe"])
        if b.recv(50) == [b"A-probe"]:
            break
        assert time.monotonic() < deadline, "the subscription never got through"
    for msg in ([b"B1"], [b"A1", b"more"], [b"C1"], [b"A2"]):
        a.send(msg)
    assert recv(b, skip=([b"A-probe"],)) == [b"A1", b"more"]  # not B1
    assert recv(b) == [b"A2"]  # not C1


#: pair -> (first socket type, second socket type, scenario, routing ids set before connecting)
SCENARIOS = {
    "PUSH-PULL": ("PUSH", "PULL", push_pull, {}),
    "REQ-REP": ("REQ", "REP", round_trips, {}),
    "REQ-ROUTER": ("REQ", "ROUTER", req_router, {"a": ID_A}),
    "DEALER-REP": ("DEALER", "REP", dealer_rep, {}),
    "DEALER-ROUTER": ("DEALER", "ROUTER", dealer_router, {"a": ID_A}),
    "DEALER-DEALER": ("DEALER", "DEALER", round_trips, {}),
    "ROUTER-ROUTER": ("ROUTER", "ROUTER", router_router, {"a": ID_A, "b": ID_B}),
    "PUB-SUB": ("PUB", "SUB", pub_sub, {}),
    "XPUB-SUB": ("XPUB", "SUB", pub_sub, {}),
    "PUB-XSUB": ("PUB", "XSUB", pub_xsub, {}),
    "XPUB-XSUB": ("XPUB", "XSUB", xpub_xsub, {}),
    "PAIR-PAIR": ("PAIR", "PAIR", round_trips, {}),
}


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def jvm(tmp_path_factory):
    missing = requirements_missing()
    if missing:
        pytest.fail(f"the JeroMQ peer cannot run here: {missing}")
    peer = JeroMQ(tmp_path_factory.mktemp("jeromq"))
    yield peer
    peer.close()


@pytest.fixture
def jeromq(jvm):
    """JeroMQ socket factory; the sockets are closed after the test."""
    made: list[JeroSocket] = []

    def factory(kind: str) -> JeroSocket:
        made.append(jvm.socket(kind))
        return made[-1]

    yield factory
    for sock in made:
        sock.close()


# -- tests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("binder", ["a", "b"], ids=["a-binds", "b-binds"])
@pytest.mark.parametrize("ours", ["a", "b"], ids=["brokerless-a", "brokerless-b"])
@pytest.mark.parametrize("pair", list(SCENARIOS))
def test_every_socket_pair_with_jeromq(pair, ours, binder, jeromq, make):
    """``make`` comes after ``jeromq`` so that the brokerless socket closes first, while its
    peer is up.  Closed second, a connecting socket may be reconnecting as it closes, and a
    handshake that completes during ``close()`` leaves ``Context.term()`` waiting for ever (a
    race in closing sockets, with ZMTP 3 peers too; not what this module tests)."""
    kind_a, kind_b, scenario, identities = SCENARIOS[pair]
    sides: dict[str, Side] = {}
    for side, kind in (("a", kind_a), ("b", kind_b)):
        sides[side] = Ours(make(getattr(zmq, kind))) if side == ours else jeromq(kind)
        if side in identities:
            sides[side].set_identity(identities[side])
    client = sides["b" if binder == "a" else "a"]
    client.connect(sides[binder].bind())
    scenario(sides["a"], sides["b"])
