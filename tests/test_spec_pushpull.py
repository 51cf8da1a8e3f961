"""PUSH/PULL as specified by ZeroMQ RFC 30 (modelled on libzmq's tests/test_spec_pushpull.cpp)."""

from __future__ import annotations

import time

import pytest

import brokerless as zmq
from tests.helpers import bind, connect, recv_within

from .ports import unbound_address

SERVICES = 5


def test_push_round_robins_over_pulls(make, endpoint):
    push = make(zmq.PUSH)
    addr = bind(push, endpoint())
    pulls = [make(zmq.PULL) for _ in range(SERVICES)]
    for pull in pulls:
        connect(pull, addr, push)

    for i in range(2 * SERVICES):
        push.send(b"%d" % i)

    got = [[recv_within(pull), recv_within(pull)] for pull in pulls]
    # Each PULL got one message from each round, the second exactly SERVICES after the first.
    assert all(int(second) == int(first) + SERVICES for first, second in got)
    assert sorted(int(m) for pair in got for m in pair) == list(range(2 * SERVICES))


@pytest.mark.parametrize("transport", ["inproc"])
def test_pull_fair_queues_from_pushes(make, endpoint):
    """With two messages queued from each PUSH, the first N reads take one from each peer.

    Relies on every message being queued at the PULL before the first read, which only inproc
    guarantees (libzmq's own test sleeps over tcp); fair-queueing itself is the same code for
    every transport.
    """
    pull = make(zmq.PULL)
    addr = bind(pull, endpoint())
    pushes = [make(zmq.PUSH) for _ in range(SERVICES)]
    for push in pushes:
        connect(push, addr)

    for n, push in enumerate(pushes):
        push.send(b"first %d" % n)
        push.send(b"second %d" % n)

    first_round = [recv_within(pull) for _ in range(SERVICES)]
    second_round = [recv_within(pull) for _ in range(SERVICES)]
    assert sorted(first_round) == sorted(b"first %d" % n for n in range(SERVICES))
    assert sorted(second_round) == sorted(b"second %d" % n for n in range(SERVICES))


def test_push_without_peers_noblock_raises_again(make):
    push = make(zmq.PUSH)
    with pytest.raises(zmq.Again) as info:
        push.send(b"", zmq.NOBLOCK)
    assert info.value.errno == zmq.EAGAIN


def test_push_without_peers_times_out(make):
    """A blocking send with no peer waits SNDTIMEO, then raises Again."""
    push = make(zmq.PUSH)
    push.setsockopt(zmq.SNDTIMEO, 200)
    start = time.monotonic()
    with pytest.raises(zmq.Again):
        push.send(b"")
    assert 0.15 <= time.monotonic() - start < 2


def test_push_blocks_while_peer_is_at_hwm(make, endpoint, transport):
    push = make(zmq.PUSH)
    push.setsockopt(zmq.SNDHWM, 1)
    addr = bind(push, endpoint())
    pull = make(zmq.PULL)
    pull.setsockopt(zmq.RCVHWM, 1)
    connect(pull, addr)

    # Fill everything between the sockets: pipes, and over ipc/tcp the I/O threads and the
    # kernel's buffers (a momentary Again is not "blocked" while the I/O thread still drains).
    sent = 0
    while sent < 100_000:
        try:
            push.send(b"x" * 1000, zmq.NOBLOCK)
            sent += 1
        except zmq.Again:
            if not push.poll(200, zmq.POLLOUT):
                break
    assert sent < 100_000, "the PUSH never blocked"
    if transport == "inproc":
        # libzmq sizes an inproc pipe as the sender's SNDHWM plus the receiver's RCVHWM.
        assert sent == 2

    push.setsockopt(zmq.SNDTIMEO, 100)
    with pytest.raises(zmq.Again):
        push.send(b"blocked")

    # Draining the PULL lets the PUSH send again.
    for _ in range(sent):
        assert recv_within(pull) == b"x" * 1000
    push.setsockopt(zmq.SNDTIMEO, 2000)
    push.send(b"after")
    assert recv_within(pull) == b"after"


def test_push_skips_destroyed_peer(make, endpoint):
    """Once a PULL is gone, everything goes to the PULL that remains."""
    push = make(zmq.PUSH)
    addr = bind(push, endpoint())
    doomed, survivor = make(zmq.PULL), make(zmq.PULL)
    connect(doomed, addr, push)
    connect(survivor, addr, push)

    push.send(b"one")
    push.send(b"two")
    assert sorted([recv_within(doomed), recv_within(survivor)]) == [b"one", b"two"]

    doomed.close()
    # The PUSH learns of the loss asynchronously and whatever it sent into the dead queue
    # meanwhile is lost with it, so probe until two probes in a row reach the survivor.
    deadline = time.monotonic() + 5
    last = in_a_row = 0
    probe = 0
    while in_a_row < 2:
        assert time.monotonic() < deadline, "the PUSH kept routing to the destroyed PULL"
        probe += 1
        push.send(b"probe %d" % probe)
        while survivor.poll(100, zmq.POLLIN):
            n = int(survivor.recv().split()[1])
            in_a_row = in_a_row + 1 if n == last + 1 else 1
            last = n

    for i in range(10):
        push.send(b"after %d" % i)
    assert [recv_within(survivor) for _ in range(10)] == [b"after %d" % i for i in range(10)]


def test_bind_then_connect(make, endpoint):
    pull = make(zmq.PULL)
    addr = bind(pull, endpoint())
    push = make(zmq.PUSH)
    connect(push, addr)
    push.send(b"hello")
    assert recv_within(pull) == b"hello"


def test_connect_before_bind(make, endpoint):
    """A PUSH may connect (and queue messages) before the PULL binds."""
    addr = unbound_address(endpoint())
    push = make(zmq.PUSH)
    push.connect(addr)
    push.send(b"queued early")

    pull = make(zmq.PULL)
    pull.bind(addr)
    assert recv_within(pull) == b"queued early"
    push.send(b"later")
    assert recv_within(pull) == b"later"


def test_pull_connect_before_push_binds(make, endpoint):
    addr = unbound_address(endpoint())
    pull = make(zmq.PULL)
    pull.connect(addr)
    push = make(zmq.PUSH)
    push.bind(addr)
    push.send(b"hello")
    assert recv_within(pull) == b"hello"


def test_push_cannot_recv_and_pull_cannot_send(make):
    push, pull = make(zmq.PUSH), make(zmq.PULL)
    with pytest.raises(zmq.ZMQError) as info:
        push.recv(zmq.NOBLOCK)
    assert info.value.errno == zmq.ENOTSUP
    with pytest.raises(zmq.ZMQError) as info:
        pull.send(b"", zmq.NOBLOCK)
    assert info.value.errno == zmq.ENOTSUP


# -- multipart atomicity ------------------------------------------------------------------------


def test_multipart_arrives_whole_with_rcvmore(make, endpoint):
    pull = make(zmq.PULL)
    addr = bind(pull, endpoint())
    push = make(zmq.PUSH)
    connect(push, addr)

    push.send_multipart([b"a", b"", b"c"])
    assert pull.poll(2000, zmq.POLLIN)
    parts = []
    more = []
    for _ in range(3):
        parts.append(pull.recv(zmq.NOBLOCK))
        more.append(pull.getsockopt(zmq.RCVMORE))
    assert parts == [b"a", b"", b"c"]
    assert more == [1, 1, 0]


def test_incomplete_multipart_is_invisible(make, endpoint):
    """A receiver sees none of a message until its last part has been sent."""
    pull = make(zmq.PULL)
    addr = bind(pull, endpoint())
    push = make(zmq.PUSH)
    connect(push, addr)

    push.send(b"head", zmq.SNDMORE)
    assert pull.poll(200, zmq.POLLIN) == 0
    push.send(b"tail")
    assert recv_within(pull, multipart=True) == [b"head", b"tail"]


def test_multipart_messages_from_two_pushes_do_not_interleave(make, endpoint):
    pull = make(zmq.PULL)
    addr = bind(pull, endpoint())
    slow, fast = make(zmq.PUSH), make(zmq.PUSH)
    connect(slow, addr)
    connect(fast, addr)

    slow.send(b"slow 1", zmq.SNDMORE)
    fast.send_multipart([b"fast 1", b"fast 2"])
    # Only the complete message is there to be read.
    assert recv_within(pull, multipart=True) == [b"fast 1", b"fast 2"]
    slow.send(b"slow 2")
    assert recv_within(pull, multipart=True) == [b"slow 1", b"slow 2"]


def test_message_abandoned_by_closed_sender_is_dropped(make, endpoint):
    """The first part of a message whose sender closes mid-message never reaches the PULL."""
    pull = make(zmq.PULL)
    addr = bind(pull, endpoint())
    quitter, other = make(zmq.PUSH), make(zmq.PUSH)
    connect(quitter, addr)
    connect(other, addr)

    quitter.send(b"orphan", zmq.SNDMORE)
    quitter.close()
    other.send(b"whole")
    assert recv_within(pull) == b"whole"
    assert pull.getsockopt(zmq.RCVMORE) == 0
    assert pull.poll(200, zmq.POLLIN) == 0
