"""A publisher's fan-out to several subscribers, as libzmq's dist does it.

When every subscriber of a PUB/XPUB is subscribed to everything (and to nothing else), ``send``
queues a message in each subscriber's pipe itself (``Pattern.broadcast``, ``pipe.write_all``)
instead of going through the pattern.  These tests pin what that must not change: a subscriber
at its high-water mark misses a message the others get (XPUB_NODROP: nobody gets it and send
says EAGAIN), a subscription to a topic brings filtering back at once, a subscriber that leaves
costs the others nothing, and a stopped socket raises.

They run over inproc, where a pipe holds exactly SNDHWM + RCVHWM messages, and use an XPUB
where they must know that a subscription is in force (it reports each one).
"""

from __future__ import annotations

import threading
import time

import pytest

import brokerless as zmq

from .helpers import recv_within
from .test_xpub_options import drain

DEADLINE_S = 5.0


@pytest.fixture
def fanout(make):
    """An XPUB (options given) bound on inproc and ``n`` SUBs connected, each subscribed to
    ``topic`` (RCVHWM per SUB given), returned once the XPUB has reported each subscription."""
    counter = iter(range(10**6))

    def build(rcvhwms, xpub_options=None, topic=b""):
        xpub = make(zmq.XPUB, XPUB_VERBOSE=1, **(xpub_options or {}))
        address = f"inproc://fanout-{id(xpub)}-{next(counter)}"
        xpub.bind(address)
        subs = []
        for rcvhwm in rcvhwms:
            sub = make(zmq.SUB, RCVHWM=rcvhwm)
            sub.connect(address)
            sub.setsockopt(zmq.SUBSCRIBE, topic)
            assert recv_within(xpub) == b"\x01" + topic  # now in force
            subs.append(sub)
        return xpub, subs

    return build


def test_a_subscriber_at_its_hwm_misses_what_the_others_get(fanout):
    # SNDHWM 2 + RCVHWM 2: the second subscriber's pipe holds 4; the first's is unlimited
    # (a 0 on either side means no limit)
    xpub, (unlimited, limited) = fanout([0, 2], {"SNDHWM": 2})
    for i in range(10):
        xpub.send(b"%d" % i)
    assert [recv_within(unlimited) for _ in range(10)] == [b"%d" % i for i in range(10)]
    assert drain(limited) == [b"0", b"1", b"2", b"3"]
    xpub.send(b"after")  # room again: both get it
    assert recv_within(unlimited) == b"after"
    assert recv_within(limited) == b"after"


def test_nodrop_sends_to_nobody_while_one_subscriber_is_full(fanout):
    xpub, (unlimited, limited) = fanout([0, 2], {"SNDHWM": 2, "XPUB_NODROP": 1})
    sent = 0
    with pytest.raises(zmq.Again):
        while sent < 100:
            xpub.send(b"%d" % sent, zmq.NOBLOCK)
            sent += 1
    assert sent == 4
    # the refused message reached neither subscriber
    assert drain(unlimited) == [b"0", b"1", b"2", b"3"]
    assert drain(limited) == [b"0", b"1", b"2", b"3"]


def test_a_change_of_subscription_applies_from_the_next_message(fanout):
    # XPUB_VERBOSER: the XPUB reports every subscription and unsubscription it takes.  The
    # second subscriber is an XSUB: it does not filter what it gets, so it shows exactly what
    # the XPUB sent it (a SUB would drop what it has no subscription for itself).
    xpub, (first,) = fanout([0], {"XPUB_VERBOSER": 1})
    second = xpub.context.socket(zmq.XSUB)
    try:
        second.setsockopt(zmq.LINGER, 0)
        second.connect(xpub.getsockopt(zmq.LAST_ENDPOINT).decode())
        second.send(b"\x01")
        assert recv_within(xpub) == b"\x01"
        xpub.send(b"a1")
        assert recv_within(first) == b"a1"
        assert recv_within(second) == b"a1"

        # the second takes a topic and drops everything: it gets that topic alone
        second.send(b"\x01t")
        assert recv_within(xpub) == b"\x01t"
        second.send(b"\x00")
        assert recv_within(xpub) == b"\x00"
        xpub.send(b"u1")
        xpub.send(b"t1")
        assert [recv_within(first), recv_within(first)] == [b"u1", b"t1"]
        assert recv_within(second) == b"t1"
        assert drain(second) == []

        # and back: both subscribed to everything alone, both get everything
        second.send(b"\x01")
        assert recv_within(xpub) == b"\x01"
        second.send(b"\x00t")
        assert recv_within(xpub) == b"\x00t"
        xpub.send(b"u2")
        assert recv_within(first) == b"u2"
        assert recv_within(second) == b"u2"
    finally:
        second.close(linger=0)


def test_invert_matching_sends_nothing_to_subscribers_of_everything(fanout):
    xpub, (first, second) = fanout([0, 0], {"INVERT_MATCHING": 1})
    xpub.send(b"anything")
    for sub in (first, second):
        assert sub.poll(100, zmq.POLLIN) == 0  # a message would be there already (inproc)


def test_a_subscriber_that_leaves_costs_the_others_nothing(fanout):
    # XPUB_VERBOSER: the XPUB reports the subscriptions of a subscriber that left as cancelled
    xpub, (staying, leaving) = fanout([0, 0], {"XPUB_VERBOSER": 1})
    xpub.send(b"before")
    assert recv_within(leaving) == b"before"
    leaving.close(linger=0)
    assert recv_within(xpub) == b"\x00"  # its pipe is gone
    for i in range(100):
        xpub.send(b"%d" % i)
    assert recv_within(staying) == b"before"
    assert [recv_within(staying) for _ in range(100)] == [b"%d" % i for i in range(100)]


def test_send_on_a_closed_publisher_raises(fanout):
    xpub, _ = fanout([0, 0])
    xpub.send(b"open")
    xpub.close(linger=0)
    with pytest.raises(zmq.ZMQError) as raised:
        xpub.send(b"closed")
    assert raised.value.errno == zmq.ENOTSOCK


def test_send_after_the_socket_heard_of_term_raises_eterm(ctx):
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.bind("inproc://fanout-term")
    subs = [ctx.socket(zmq.SUB) for _ in range(2)]
    for sub in subs:
        sub.setsockopt(zmq.LINGER, 0)
        sub.connect("inproc://fanout-term")
        sub.setsockopt(zmq.SUBSCRIBE, b"")
    deadline = time.monotonic() + DEADLINE_S
    while not all(sub.poll(10, zmq.POLLIN) for sub in subs):  # probe until both subscribed
        assert time.monotonic() < deadline, "the subscriptions never reached the PUB"
        pub.send(b"probe")
    terminator = threading.Thread(target=ctx.term, daemon=True)
    terminator.start()
    with pytest.raises(zmq.ContextTerminated):  # the socket hears of term while it polls
        while time.monotonic() < deadline:
            pub.poll(10, zmq.POLLOUT)
    with pytest.raises(zmq.ContextTerminated):  # and every send from then on says so
        pub.send(b"data")
    for sock in (pub, *subs):
        sock.close()
    terminator.join(DEADLINE_S)
    assert not terminator.is_alive()
