"""IMMEDIATE: queue messages only to completed connections.

Modelled on libzmq's tests/test_immediate.cpp (tcp only there).

Without IMMEDIATE, connect() creates the outgoing queue at once, so messages queue to a peer
that has not bound yet and a round-robin sender deals some of its messages to it.  With
IMMEDIATE=1 a sender only uses completed connections.  libzmq 4.3 honours IMMEDIATE only on
connection-oriented transports (tcp, ipc): over inproc it is ignored and messages queue to the
not-yet-bound peer anyway, so the IMMEDIATE=1 tests are marked ``beyond_libzmq``.

libzmq's third case (a completed connection that breaks makes sends block again, and they
resume when the peer comes back) is left out: over inproc in libzmq a closed peer's address is
released asynchronously, so rebinding it straight away can fail with EADDRINUSE.
"""

from __future__ import annotations

import pytest

import brokerless as zmq

from .helpers import bind, recv_within
from .ports import unbound_address

DEADLINE_MS = 5000


def wait_connected(sender, receiver) -> None:
    """Wait until ``sender``'s connection to the bound ``receiver`` is complete.

    A PUSH/DEALER whose connection is complete reports POLLOUT (with IMMEDIATE, only then).
    """
    assert sender.poll(DEADLINE_MS, zmq.POLLOUT)


def receive(sock, count) -> list[bytes]:
    return [recv_within(sock, DEADLINE_MS) for _ in range(count)]


def drain(sock) -> list[bytes]:
    got = []
    while sock.poll(0, zmq.POLLIN):
        got.append(sock.recv())
    return got


PEERS = {"PUSH": "PULL", "DEALER": "DEALER"}


@pytest.mark.parametrize("kind", ["PUSH", "DEALER"])
def test_messages_queue_until_the_peer_binds(make, endpoint, kind):
    addr = unbound_address(endpoint())
    sender = make(getattr(zmq, kind), SNDHWM=3)
    assert sender.getsockopt(zmq.IMMEDIATE) == 0
    sender.connect(addr)
    for i in range(3):
        sender.send(b"%d" % i, zmq.NOBLOCK)
    with pytest.raises(zmq.Again):  # the queue to the absent peer is full at SNDHWM
        sender.send(b"3", zmq.NOBLOCK)
    receiver = make(getattr(zmq, PEERS[kind]))
    receiver.bind(addr)
    assert receive(receiver, 3) == [b"0", b"1", b"2"]


def test_round_robin_includes_a_connection_not_yet_made(make, endpoint):
    """Without IMMEDIATE a PUSH deals messages to a pending connection too."""
    pull = make(zmq.PULL)
    bound = bind(pull, endpoint())
    pending = unbound_address(endpoint())
    push = make(zmq.PUSH)
    push.connect(pending)
    push.connect(bound)
    wait_connected(push, pull)
    for i in range(10):
        push.send(b"%d" % i, zmq.NOBLOCK)
    assert len(receive(pull, 5)) == 5
    late = make(zmq.PULL)
    late.bind(pending)
    assert len(receive(late, 5)) == 5
    assert drain(pull) == []


def test_immediate_sends_over_a_completed_connection(make, endpoint):
    pull = make(zmq.PULL)
    addr = bind(pull, endpoint())
    push = make(zmq.PUSH, IMMEDIATE=1)
    assert push.getsockopt(zmq.IMMEDIATE) == 1
    push.connect(addr)
    wait_connected(push, pull)
    push.send(b"hello", zmq.NOBLOCK)
    assert recv_within(pull) == b"hello"


@pytest.mark.beyond_libzmq
@pytest.mark.parametrize("kind", ["PUSH", "DEALER"])
def test_immediate_refuses_to_queue_without_a_connection(make, endpoint, kind):
    """With IMMEDIATE=1 and no completed connection, a NOBLOCK send raises Again.

    libzmq 4.3 does this over tcp/ipc but ignores IMMEDIATE over inproc (queues to SNDHWM).
    """
    addr = unbound_address(endpoint())
    sender = make(getattr(zmq, kind), IMMEDIATE=1)
    sender.connect(addr)
    with pytest.raises(zmq.Again):
        sender.send(b"early", zmq.NOBLOCK)
    assert not sender.poll(0, zmq.POLLOUT)
    receiver = make(getattr(zmq, PEERS[kind]))
    receiver.bind(addr)
    wait_connected(sender, receiver)
    sender.send(b"late", zmq.NOBLOCK)
    assert recv_within(receiver) == b"late"


@pytest.mark.beyond_libzmq
def test_immediate_skips_a_connection_not_yet_made(make, endpoint):
    """With IMMEDIATE=1 a PUSH deals every message to its completed connection.

    libzmq 4.3 does this over tcp/ipc; over inproc it deals half to the pending connection.
    """
    pull = make(zmq.PULL)
    bound = bind(pull, endpoint())
    push = make(zmq.PUSH, IMMEDIATE=1)
    push.connect(unbound_address(endpoint()))  # never bound
    push.connect(bound)
    wait_connected(push, pull)
    for i in range(10):
        push.send(b"%d" % i, zmq.NOBLOCK)
    assert receive(pull, 10) == [b"%d" % i for i in range(10)]
