"""XPUB options: XPUB_VERBOSE, XPUB_VERBOSER, XPUB_NODROP, XPUB_MANUAL and XPUB_WELCOME_MSG.

Modelled on libzmq's tests/test_xpub_verbose.cpp, test_xpub_nodrop.cpp, test_hwm_pubsub.cpp
(the blocking case), test_xpub_manual.cpp and test_xpub_welcome_msg.cpp.

An XPUB hands every subscription it acts on to the application as ``b"\\x01topic"`` (and
``b"\\x00topic"`` for an unsubscription); once it has produced that notification the
subscription is in force, so these tests wait on notifications and need no probing.  To show
that an action produced *no* notification, ``notifications_until_fence`` has the same
subscriber make a fresh subscription: notifications from one subscriber arrive in order.
"""

from __future__ import annotations

import itertools
import time

import pytest

import brokerless as zmq

from .helpers import bind, recv_within

DEADLINE_MS = 5000
_fence_ids = itertools.count()


def _subscribe(sock, topic: bytes) -> None:
    if sock.getsockopt(zmq.TYPE) == zmq.XSUB:
        sock.send(b"\x01" + topic)
    else:
        sock.setsockopt(zmq.SUBSCRIBE, topic)


def notifications_until_fence(xpub, sub) -> list[bytes]:
    """The notifications ``xpub`` delivers for ``sub`` before a fresh fence subscription of it."""
    topic = b"\xfefence-%d" % next(_fence_ids)
    _subscribe(sub, topic)
    got = []
    while (msg := recv_within(xpub, DEADLINE_MS)) != b"\x01" + topic:
        got.append(msg)
    return got


def drain(sock) -> list[bytes]:
    """Every message already queued on ``sock`` (waiting for none)."""
    got = []
    while sock.poll(0, zmq.POLLIN):
        got.append(sock.recv())
    return got


def queue_capacity(transport: str, sndhwm: int, rcvhwm: int) -> range:
    """How many NOBLOCK sends succeed, in a burst, towards a peer that does not read.

    Over inproc the two sockets share one pipe whose limit is SNDHWM + RCVHWM, exactly.  Over
    the wire the sender's queue is drained into the connection concurrently with the burst, so
    the burst may stop at any point once the sender's own queue is momentarily full.
    """
    total = sndhwm + rcvhwm
    return range(total, total + 1) if transport == "inproc" else range(1, 10**9)


def fill_with_timed_sends(sock, timeout_ms=50, limit=100_000) -> int:
    """Send 10 kB messages, each allowed ``timeout_ms``, until one raises Again; return the count.

    Big messages make the kernel buffers of a wire transport fill quickly too.
    """
    sock.setsockopt(zmq.SNDTIMEO, timeout_ms)
    payload = b"." * 10_000
    for sent in range(limit):
        try:
            sock.send(payload)
        except zmq.Again:
            return sent
    raise AssertionError(f"{limit} sends never reached the high-water mark")


@pytest.fixture
def xpub_with_sub(make, endpoint):
    """A factory: an XPUB (with the given options) bound, and a SUB connected to it."""

    def build(xpub_options=None, sub_options=None):
        xpub = make(zmq.XPUB, **(xpub_options or {}))
        addr = bind(xpub, endpoint())
        sub = make(zmq.SUB, **(sub_options or {}))
        sub.connect(addr)
        return xpub, sub

    return build


# --- XPUB_VERBOSE / XPUB_VERBOSER ----------------------------------------------------------------


def test_duplicate_subscriptions_reported_once(make, endpoint):
    xpub = make(zmq.XPUB)
    addr = bind(xpub, endpoint())
    sub0, sub1 = make(zmq.SUB), make(zmq.SUB)
    sub0.connect(addr)
    sub1.connect(addr)
    sub0.setsockopt(zmq.SUBSCRIBE, b"A")
    assert recv_within(xpub) == b"\x01A"
    sub0.setsockopt(zmq.SUBSCRIBE, b"A")  # same subscriber again
    assert notifications_until_fence(xpub, sub0) == []
    sub1.setsockopt(zmq.SUBSCRIBE, b"A")  # another subscriber
    assert notifications_until_fence(xpub, sub1) == []
    sub0.setsockopt(zmq.SUBSCRIBE, b"B")
    assert recv_within(xpub) == b"\x01B"


def test_verbose_reports_every_subscription(make, endpoint):
    xpub = make(zmq.XPUB)
    addr = bind(xpub, endpoint())
    sub0, sub1 = make(zmq.SUB), make(zmq.SUB)
    sub0.connect(addr)
    sub1.connect(addr)
    sub0.setsockopt(zmq.SUBSCRIBE, b"A")
    assert recv_within(xpub) == b"\x01A"
    xpub.setsockopt(zmq.XPUB_VERBOSE, 1)  # takes effect on live connections
    sub0.setsockopt(zmq.SUBSCRIBE, b"A")
    assert recv_within(xpub) == b"\x01A"
    sub1.setsockopt(zmq.SUBSCRIBE, b"A")
    assert recv_within(xpub) == b"\x01A"

    xpub.send(b"A1")
    assert recv_within(sub0) == b"A1"
    assert recv_within(sub1) == b"A1"
    assert drain(sub0) == []  # a SUB subscribed twice still gets one copy


def test_verbose_reports_only_the_last_unsubscription(make, endpoint):
    xpub = make(zmq.XPUB, XPUB_VERBOSE=1)
    addr = bind(xpub, endpoint())
    sub0, sub1 = make(zmq.SUB), make(zmq.SUB)
    sub0.connect(addr)
    sub1.connect(addr)
    sub0.setsockopt(zmq.SUBSCRIBE, b"A")
    sub1.setsockopt(zmq.SUBSCRIBE, b"A")
    assert [recv_within(xpub) for _ in range(2)] == [b"\x01A", b"\x01A"]
    sub0.setsockopt(zmq.UNSUBSCRIBE, b"A")
    assert notifications_until_fence(xpub, sub0) == []  # sub1 still subscribed
    sub1.setsockopt(zmq.UNSUBSCRIBE, b"A")
    assert recv_within(xpub) == b"\x00A"


def test_verboser_reports_every_unsubscription(make, endpoint):
    xpub = make(zmq.XPUB, XPUB_VERBOSER=1)
    addr = bind(xpub, endpoint())
    sub0, sub1 = make(zmq.SUB), make(zmq.SUB)
    sub0.connect(addr)
    sub1.connect(addr)
    sub0.setsockopt(zmq.SUBSCRIBE, b"A")
    sub1.setsockopt(zmq.SUBSCRIBE, b"A")
    assert [recv_within(xpub) for _ in range(2)] == [b"\x01A", b"\x01A"]

    xpub.send(b"A1")
    assert recv_within(sub0) == b"A1"
    assert recv_within(sub1) == b"A1"

    sub1.setsockopt(zmq.UNSUBSCRIBE, b"A")
    assert recv_within(xpub) == b"\x00A"
    sub0.setsockopt(zmq.UNSUBSCRIBE, b"A")
    assert recv_within(xpub) == b"\x00A"


def test_sub_forwards_unsubscription_only_when_its_count_drops_to_zero(xpub_with_sub):
    """Even with XPUB_VERBOSER, a SUB subscribed twice sends one unsubscription (on the second)."""
    xpub, sub = xpub_with_sub({"XPUB_VERBOSER": 1})
    sub.setsockopt(zmq.SUBSCRIBE, b"A")
    sub.setsockopt(zmq.SUBSCRIBE, b"A")
    assert [recv_within(xpub) for _ in range(2)] == [b"\x01A", b"\x01A"]
    sub.setsockopt(zmq.UNSUBSCRIBE, b"A")
    assert notifications_until_fence(xpub, sub) == []
    sub.setsockopt(zmq.UNSUBSCRIBE, b"A")
    assert recv_within(xpub) == b"\x00A"


def test_sub_does_not_forward_unknown_unsubscription(xpub_with_sub):
    xpub, sub = xpub_with_sub({"XPUB_VERBOSER": 1})
    sub.setsockopt(zmq.UNSUBSCRIBE, b"A")
    assert notifications_until_fence(xpub, sub) == []


# --- XPUB_NODROP -------------------------------------------------------------------------------


def _subscribed_nodrop_pair(xpub_with_sub, sndhwm, rcvhwm):
    xpub, sub = xpub_with_sub({"SNDHWM": sndhwm, "XPUB_NODROP": 1}, {"RCVHWM": rcvhwm})
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    assert recv_within(xpub) == b"\x01"
    return xpub, sub


def _send_until_again(sock, limit=100_000) -> int:
    sent = 0
    while sent < limit:
        try:
            sock.send(b"%d" % sent, zmq.NOBLOCK)
        except zmq.Again:
            return sent
        sent += 1
    return sent


@pytest.mark.parametrize(("sndhwm", "rcvhwm"), [(1, 1), (10, 7), (2000, 1000)])
def test_nodrop_send_raises_again_at_hwm(xpub_with_sub, transport, sndhwm, rcvhwm):
    xpub, sub = _subscribed_nodrop_pair(xpub_with_sub, sndhwm, rcvhwm)
    sent = _send_until_again(xpub)
    assert sent in queue_capacity(transport, sndhwm, rcvhwm)
    received = []
    while len(received) < sent:
        received.append(recv_within(sub))
    assert received == [b"%d" % i for i in range(sent)]  # nothing dropped


def test_nodrop_blocking_send_times_out_at_hwm(xpub_with_sub, transport):
    xpub, _ = _subscribed_nodrop_pair(xpub_with_sub, 2, 2)
    assert fill_with_timed_sends(xpub) in queue_capacity(transport, 2, 2)
    with pytest.raises(zmq.Again):
        xpub.send(b"late")


def test_nodrop_resumes_after_subscriber_drains(xpub_with_sub):
    xpub, sub = _subscribed_nodrop_pair(xpub_with_sub, 3, 3)
    sent = _send_until_again(xpub)
    for _ in range(sent):
        recv_within(sub)
    xpub.setsockopt(zmq.SNDTIMEO, DEADLINE_MS)
    xpub.send(b"after")
    assert recv_within(sub) == b"after"


def test_nodrop_delivers_everything_to_a_slow_subscriber(xpub_with_sub):
    """Sending with NOBLOCK and draining the SUB whenever the XPUB pushes back loses nothing."""
    xpub, sub = _subscribed_nodrop_pair(xpub_with_sub, 20, 20)
    xpub.setsockopt(zmq.SNDTIMEO, DEADLINE_MS)
    total, blocked = 500, 0
    received = []
    for i in range(total):
        try:
            xpub.send(b"%d" % i, zmq.NOBLOCK)
        except zmq.Again:
            blocked += 1
            received.extend(drain(sub))
            xpub.send(b"%d" % i)  # waits (bounded) until the XPUB sees the room made
    while len(received) < total:
        received.append(recv_within(sub))
    assert blocked > 0
    assert received == [b"%d" % i for i in range(total)]


def test_nodrop_on_pub(make, endpoint):
    """XPUB_NODROP applies to PUB too: it pushes back instead of dropping."""
    pub = make(zmq.PUB, SNDHWM=3, XPUB_NODROP=1)
    addr = bind(pub, endpoint())
    sub = make(zmq.SUB, RCVHWM=3)
    sub.connect(addr)
    sub.setsockopt(zmq.SUBSCRIBE, b"data")
    sub.setsockopt(zmq.SUBSCRIBE, b"probe")
    end = time.monotonic() + DEADLINE_MS / 1000
    while not sub.poll(10, zmq.POLLIN):  # a PUB reports nothing: probe until subscribed
        assert time.monotonic() < end, "subscription never reached the PUB"
        pub.send(b"probe")
    drain(sub)
    sent = 0
    while sent < 10_000:
        try:
            pub.send(b"data%d" % sent, zmq.NOBLOCK)
        except zmq.Again:
            break
        sent += 1
    assert 0 < sent < 10_000
    received = []
    while len(received) < sent:
        if (msg := recv_within(sub)) != b"probe":
            received.append(msg)
    assert received == [b"data%d" % i for i in range(sent)]


# --- XPUB_MANUAL -------------------------------------------------------------------------------


@pytest.fixture
def manual_xpub(make, endpoint):
    """A factory: a bound XPUB in manual mode and ``n`` XSUBs connected to it."""

    def build(n=1):
        xpub = make(zmq.XPUB, XPUB_MANUAL=1)
        addr = bind(xpub, endpoint())
        subs = [make(zmq.XSUB) for _ in range(n)]
        for sub in subs:
            sub.connect(addr)
        return xpub, *subs

    return build


def test_manual_application_decides_subscription(manual_xpub):
    xpub, sub = manual_xpub()
    sub.send(b"\x01A")
    assert recv_within(xpub) == b"\x01A"
    xpub.setsockopt(zmq.SUBSCRIBE, b"B")  # subscribe the requester to B instead
    xpub.send(b"A")
    xpub.send(b"B")
    assert recv_within(sub) == b"B"  # A was never subscribed, so it was not sent


def test_manual_reports_duplicate_requests(manual_xpub):
    """In manual mode every request is handed to the application, duplicates included."""
    xpub, sub0, sub1 = manual_xpub(2)
    sub0.send(b"\x01A")
    assert recv_within(xpub) == b"\x01A"
    sub1.send(b"\x01A")
    assert recv_within(xpub) == b"\x01A"


def test_manual_unsubscribe(manual_xpub):
    xpub, sub = manual_xpub()
    sub.send(b"\x01A")
    sub.send(b"\x01B")
    assert recv_within(xpub) == b"\x01A"
    xpub.setsockopt(zmq.SUBSCRIBE, b"XA")
    assert recv_within(xpub) == b"\x01B"
    xpub.setsockopt(zmq.SUBSCRIBE, b"XB")

    sub.send(b"\x00A")
    assert recv_within(xpub) == b"\x00A"
    xpub.setsockopt(zmq.UNSUBSCRIBE, b"XA")

    xpub.send(b"XA")
    xpub.send(b"XB")
    assert recv_within(sub) == b"XB"


def test_manual_subscription_applies_to_the_last_requester(manual_xpub):
    """SUBSCRIBE on a manual XPUB subscribes the peer whose request was read last."""
    xpub, sub0, sub1 = manual_xpub(2)
    sub0.send(b"\x01zero")
    assert recv_within(xpub) == b"\x01zero"
    xpub.setsockopt(zmq.SUBSCRIBE, b"0")
    sub1.send(b"\x01one")
    assert recv_within(xpub) == b"\x01one"
    xpub.setsockopt(zmq.SUBSCRIBE, b"1")
    xpub.setsockopt(zmq.SUBSCRIBE, b"both")

    for msg in (b"0 a", b"1 a", b"both", b"0 b"):
        xpub.send(msg)
    assert [recv_within(sub0) for _ in range(2)] == [b"0 a", b"0 b"]
    assert [recv_within(sub1) for _ in range(2)] == [b"1 a", b"both"]


def test_manual_subscription_works_with_sub(make, endpoint):
    """A SUB still filters on its own subscriptions: the XPUB may only narrow them."""
    xpub = make(zmq.XPUB, XPUB_MANUAL=1)
    addr = bind(xpub, endpoint())
    sub = make(zmq.SUB)
    sub.connect(addr)
    sub.setsockopt(zmq.SUBSCRIBE, b"A")
    assert recv_within(xpub) == b"\x01A"
    xpub.setsockopt(zmq.SUBSCRIBE, b"AB")
    for msg in (b"A1", b"B1", b"AB1"):
        xpub.send(msg)
    assert recv_within(sub) == b"AB1"


# --- XPUB_WELCOME_MSG --------------------------------------------------------------------------


def test_welcome_message_arrives_first(xpub_with_sub):
    xpub, sub = xpub_with_sub({"XPUB_WELCOME_MSG": b"W"})
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    assert recv_within(xpub) == b"\x01"
    xpub.send(b"data")
    assert [recv_within(sub) for _ in range(2)] == [b"W", b"data"]


def test_welcome_message_needs_a_matching_subscription(make, endpoint):
    """The welcome message is published to the new peer, so a SUB must subscribe to it."""
    xpub = make(zmq.XPUB, XPUB_WELCOME_MSG=b"W")
    addr = bind(xpub, endpoint())
    welcomed, other = make(zmq.SUB), make(zmq.SUB)
    welcomed.setsockopt(zmq.SUBSCRIBE, b"W")
    other.setsockopt(zmq.SUBSCRIBE, b"data")
    welcomed.connect(addr)
    other.connect(addr)
    assert sorted(recv_within(xpub) for _ in range(2)) == [b"\x01W", b"\x01data"]
    assert recv_within(welcomed) == b"W"
    xpub.send(b"data")
    assert recv_within(other) == b"data"


def test_welcome_message_sent_to_each_new_subscriber(make, endpoint):
    """Each new peer is welcomed (libzmq sends it when the XPUB takes the connection on, so the
    application reads the subscriptions, as its documentation asks)."""
    xpub = make(zmq.XPUB, XPUB_WELCOME_MSG=b"hello")
    addr = bind(xpub, endpoint())
    for prefix in (b"h", b"he", b"hel"):
        sub = make(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, prefix)
        sub.connect(addr)
        assert recv_within(xpub) == b"\x01" + prefix
        assert recv_within(sub) == b"hello"
    xsub = make(zmq.XSUB)
    xsub.connect(addr)
    xsub.send(b"\x01x")
    assert recv_within(xpub) == b"\x01x"
    assert recv_within(xsub) == b"hello"  # XSUB does not filter


def test_empty_welcome_message_disables_it(make, endpoint):
    xpub = make(zmq.XPUB, XPUB_WELCOME_MSG=b"W")
    xpub.setsockopt(zmq.XPUB_WELCOME_MSG, b"")
    addr = bind(xpub, endpoint())
    sub = make(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(addr)
    assert recv_within(xpub) == b"\x01"
    xpub.send(b"data")
    assert recv_within(sub) == b"data"
