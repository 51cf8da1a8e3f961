"""High-water marks: PUSH pushes back, PUB drops, 0 means unlimited, multipart is never split.

Modelled on libzmq's tests/test_hwm.cpp, test_hwm_pubsub.cpp and test_sockopt_hwm.cpp.

Over inproc the two sockets of a connection share one pipe whose limit is SNDHWM + RCVHWM, so
the counts below are exact there.  Over the wire the queues are separate and drained
concurrently, so the transport-dependent expectations live in ``queue_capacity`` and
``check_survivors``.
"""

from __future__ import annotations

import time

import pytest

import brokerless as zmq

from .helpers import bind, recv_within
from .ports import unbound_address

DEADLINE_MS = 5000
MAX_SENDS = 10_000


def queue_capacity(transport: str, sndhwm: int, rcvhwm: int) -> range:
    """How many NOBLOCK sends succeed, in a burst, towards a peer that does not read.

    Over inproc: SNDHWM + RCVHWM, exactly (0 on both sides: unlimited).  Over the wire the
    sender's queue is drained into the connection concurrently with the burst, so the burst may
    stop as soon as the sender's own queue is momentarily full.
    """
    total = sndhwm + rcvhwm
    return range(total, total + 1) if transport == "inproc" else range(1, 10**9)


def check_survivors(transport: str, received: list, sent: list, capacity: int) -> None:
    """What a SUB that did not read keeps of a burst its publisher sent past the HWM.

    Over inproc: the first ``capacity`` messages, the rest dropped.  Over the wire the
    publisher's queue drains while it sends, so the SUB keeps an in-order selection.
    """
    if transport == "inproc":
        assert received == sent[:capacity]
    else:
        assert received
        assert_in_order_selection(received, sent)


def assert_in_order_selection(received: list, sent: list) -> None:
    """``received`` is ``sent`` with some messages left out: nothing reordered or repeated."""
    positions = [sent.index(msg) for msg in received]
    assert positions == sorted(set(positions))


def connect_pair(make, endpoint, order, sender_options, receiver_options, kinds=None):
    """A PUSH and a PULL (or ``kinds``) connected in the given order, ready to send."""
    sender_kind, receiver_kind = kinds or (zmq.PUSH, zmq.PULL)
    sender = make(sender_kind, **sender_options)
    receiver = make(receiver_kind, **receiver_options)
    if order == "receiver_binds":
        sender.connect(bind(receiver, endpoint()))
    elif order == "sender_connects_first":
        addr = unbound_address(endpoint())
        sender.connect(addr)
        receiver.bind(addr)
    else:  # "sender_binds"
        receiver.connect(bind(sender, endpoint()))
    # A binding sender takes the connection on asynchronously; wait until it has.
    assert sender.poll(DEADLINE_MS, zmq.POLLOUT)
    return sender, receiver


def send_burst(sock, limit=MAX_SENDS, parts=1) -> int:
    """Send ``parts``-part messages with NOBLOCK until one would block; return how many went."""
    for sent in range(limit):
        try:
            sock.send(b"%d" % sent, zmq.NOBLOCK | (zmq.SNDMORE if parts > 1 else 0))
        except zmq.Again:
            return sent
        for part in range(1, parts):
            # Once the first frame is accepted, the rest of the message always is.
            sock.send(b"part%d" % part, zmq.NOBLOCK | (zmq.SNDMORE if part < parts - 1 else 0))
    return limit


def drain(sock, multipart=False) -> list:
    """Every message already queued on ``sock`` (waiting for none)."""
    got = []
    while sock.poll(0, zmq.POLLIN):
        got.append(sock.recv_multipart() if multipart else sock.recv())
    return got


def collect_burst(sock, transport, multipart=False) -> list:
    """Everything a burst already sent to ``sock`` delivers.

    Over inproc a send is in the peer's queue when it returns, so that is what is queued now;
    over the wire, messages are read until none has come for a while.
    """
    if transport == "inproc":
        return drain(sock, multipart)
    got = []
    while sock.poll(200, zmq.POLLIN):
        got.append(sock.recv_multipart() if multipart else sock.recv())
    return got


def receive(sock, count, multipart=False) -> list:
    return [recv_within(sock, DEADLINE_MS, multipart=multipart) for _ in range(count)]


ORDERS = ["receiver_binds", "sender_connects_first", "sender_binds"]


# --- PUSH: blocking at the HWM ------------------------------------------------------------------


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize(("sndhwm", "rcvhwm"), [(1, 1), (2, 3), (10, 7)])
def test_push_burst_stops_at_sndhwm_plus_rcvhwm(make, endpoint, transport, order, sndhwm, rcvhwm):
    push, pull = connect_pair(make, endpoint, order, {"SNDHWM": sndhwm}, {"RCVHWM": rcvhwm})
    sent = send_burst(push)
    assert sent in queue_capacity(transport, sndhwm, rcvhwm)
    assert receive(pull, sent) == [b"%d" % i for i in range(sent)]


def test_default_hwms(make, endpoint, transport):
    """Both HWMs default to 1000, so a silent inproc PULL absorbs 2000 messages."""
    push, pull = connect_pair(make, endpoint, "receiver_binds", {}, {})
    assert push.getsockopt(zmq.SNDHWM) == 1000
    assert pull.getsockopt(zmq.RCVHWM) == 1000
    assert send_burst(push) in queue_capacity(transport, 1000, 1000)


def test_timed_send_raises_again_at_hwm(make, endpoint):
    push, _ = connect_pair(make, endpoint, "receiver_binds", {"SNDHWM": 2}, {"RCVHWM": 2})
    push.setsockopt(zmq.SNDTIMEO, 50)
    payload = b"." * 10_000  # big, so that a wire's kernel buffers fill quickly too
    for _ in range(MAX_SENDS):
        try:
            push.send(payload)
        except zmq.Again:
            break
    else:
        pytest.fail("timed sends never reached the high-water mark")
    with pytest.raises(zmq.Again):
        push.send(payload)


def test_writer_resumes_after_reader_drains(make, endpoint):
    push, pull = connect_pair(make, endpoint, "receiver_binds", {"SNDHWM": 3}, {"RCVHWM": 3})
    sent = send_burst(push)
    assert len(receive(pull, sent)) == sent
    # The reader's progress reaches the writer asynchronously: wait for it, bounded.
    assert push.poll(DEADLINE_MS, zmq.POLLOUT)
    push.setsockopt(zmq.SNDTIMEO, DEADLINE_MS)
    push.send(b"again")
    assert recv_within(pull) == b"again"
    assert drain(pull) == []


def test_hwm_applies_to_queued_not_total_messages(make, endpoint):
    """Messages already read no longer count: far more than the HWM can pass in total."""
    push, pull = connect_pair(make, endpoint, "receiver_binds", {"SNDHWM": 5}, {"RCVHWM": 5})
    push.setsockopt(zmq.SNDTIMEO, DEADLINE_MS)
    for i in range(200):
        push.send(b"%d" % i)
        assert recv_within(pull) == b"%d" % i


@pytest.mark.parametrize("order", ORDERS)
def test_zero_hwm_is_unlimited(make, endpoint, order):
    push, pull = connect_pair(make, endpoint, order, {"SNDHWM": 0}, {"RCVHWM": 0})
    assert send_burst(push) == MAX_SENDS
    received = receive(pull, MAX_SENDS)
    assert received[0] == b"0"
    assert received[-1] == b"%d" % (MAX_SENDS - 1)


def test_sndhwm_change_applies_to_existing_connection(make, endpoint, transport):
    push, _ = connect_pair(make, endpoint, "receiver_binds", {"SNDHWM": 1}, {"RCVHWM": 1})
    push.setsockopt(zmq.SNDHWM, 5)
    assert push.getsockopt(zmq.SNDHWM) == 5
    assert send_burst(push) in queue_capacity(transport, 5, 1)


def test_connecting_sender_queues_sndhwm_before_peer_binds(make, endpoint):
    """Before the peer exists only the sender's own queue (SNDHWM) is there to fill."""
    addr = unbound_address(endpoint())
    push = make(zmq.PUSH, SNDHWM=3)
    push.connect(addr)
    assert send_burst(push) == 3
    pull = make(zmq.PULL)
    pull.bind(addr)
    assert receive(pull, 3) == [b"0", b"1", b"2"]


def test_queued_messages_survive_sender_close_until_peer_binds(make, endpoint):
    """Within the linger period, messages queued to a not-yet-bound peer are still delivered."""
    addr = unbound_address(endpoint())
    push = make(zmq.PUSH, SNDHWM=2)
    push.setsockopt(zmq.LINGER, DEADLINE_MS)
    push.connect(addr)
    assert send_burst(push) == 2
    push.close()
    pull = make(zmq.PULL)
    pull.bind(addr)
    assert receive(pull, 2) == [b"0", b"1"]


# --- PUB: dropping at the HWM -------------------------------------------------------------------


@pytest.mark.parametrize(("sndhwm", "rcvhwm"), [(1, 1), (2, 3), (100, 100)])
def test_pub_drops_beyond_hwm(make, endpoint, transport, sndhwm, rcvhwm):
    """A publisher never blocks; a SUB that does not read keeps SNDHWM + RCVHWM (inproc).

    An XPUB publishes here because it reports when the subscription is in force.
    """
    xpub = make(zmq.XPUB, SNDHWM=sndhwm)
    addr = bind(xpub, endpoint())
    sub = make(zmq.SUB, RCVHWM=rcvhwm)
    sub.connect(addr)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    assert recv_within(xpub) == b"\x01"
    sent = [b"%d" % i for i in range(3 * (sndhwm + rcvhwm) + 10)]
    for msg in sent:
        xpub.send(msg, zmq.NOBLOCK)  # never raises Again
    received = collect_burst(sub, transport)
    check_survivors(transport, received, sent, sndhwm + rcvhwm)


def test_pub_never_blocks_on_a_slow_subscriber(make, endpoint, transport):
    pub = make(zmq.PUB, SNDHWM=5)
    addr = bind(pub, endpoint())
    sub = make(zmq.SUB, RCVHWM=5)
    sub.connect(addr)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    end = time.monotonic() + DEADLINE_MS / 1000
    while not sub.poll(10, zmq.POLLIN):  # a PUB reports nothing: probe until subscribed
        assert time.monotonic() < end, "subscription never reached the PUB"
        pub.send(b"probe")
    drain(sub)
    sent = [b"%d" % i for i in range(1000)]
    for msg in sent:
        pub.send(msg, zmq.NOBLOCK)
    received = [msg for msg in collect_burst(sub, transport) if msg != b"probe"]
    assert received
    assert_in_order_selection(received, sent)
    if transport == "inproc":
        # Probes read earlier may still count against the HWM: at most SNDHWM + RCVHWM.
        assert len(received) <= 10


# --- multipart messages and the HWM -------------------------------------------------------------


@pytest.mark.parametrize("order", ORDERS)
def test_push_multipart_all_or_nothing(make, endpoint, transport, order):
    push, pull = connect_pair(make, endpoint, order, {"SNDHWM": 1}, {"RCVHWM": 1})
    sent = send_burst(push, parts=3)
    assert sent in queue_capacity(transport, 1, 1)
    received = receive(pull, sent, multipart=True)
    assert received == [[b"%d" % i, b"part1", b"part2"] for i in range(sent)]
    assert drain(pull) == []


def test_pub_multipart_all_or_nothing(make, endpoint, transport):
    xpub = make(zmq.XPUB, SNDHWM=2)
    addr = bind(xpub, endpoint())
    sub = make(zmq.SUB, RCVHWM=2)
    sub.connect(addr)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    assert recv_within(xpub) == b"\x01"
    sent = [[b"%d" % i, b"middle", b"end"] for i in range(30)]
    for msg in sent:
        xpub.send_multipart(msg, zmq.NOBLOCK)
    received = collect_burst(sub, transport, multipart=True)
    assert all(len(msg) == 3 for msg in received)
    check_survivors(transport, received, sent, 4)
