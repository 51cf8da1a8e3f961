"""CONFLATE: a conflating receiver keeps only the newest message.

Modelled on libzmq's tests/test_conflate.cpp (which uses tcp, a binding PULL and a sleep).

libzmq builds an inproc connection's pipe from the options of the socket that *connects*, so
over inproc a CONFLATE set on the binding side is ignored there; the libzmq-compatible tests
below therefore put CONFLATE on a connecting receiver, and the binding case is marked
``beyond_libzmq``.  libzmq documents CONFLATE as not supporting multipart messages.
"""

from __future__ import annotations

import time

import pytest

import brokerless as zmq

from .helpers import bind, recv_within

DEADLINE_MS = 5000


def wait_until_delivered(receiver, transport) -> None:
    """Wait until everything sent so far is in ``receiver``'s queue.

    Over inproc a send is in the peer's queue when it returns, so only "something is there" is
    checked; over the wire, wait until the queue holds something and has been quiet a while.
    """
    assert receiver.poll(DEADLINE_MS, zmq.POLLIN)
    if transport != "inproc":
        end = time.monotonic() + 0.2
        while time.monotonic() < end:
            receiver.poll(10, zmq.POLLIN)


@pytest.fixture
def conflating_pull(make, endpoint):
    """A bound PUSH and a PULL with CONFLATE connected to it, ready to send."""
    push = make(zmq.PUSH)
    addr = bind(push, endpoint())
    pull = make(zmq.PULL, CONFLATE=1)
    pull.connect(addr)
    assert push.poll(DEADLINE_MS, zmq.POLLOUT)  # the PUSH has taken the connection on
    return push, pull


def test_pull_keeps_only_the_last_message(conflating_pull, transport):
    push, pull = conflating_pull
    assert pull.getsockopt(zmq.CONFLATE) == 1
    for i in range(20):
        push.send(b"%d" % i)
    wait_until_delivered(pull, transport)
    assert pull.recv(zmq.NOBLOCK) == b"19"
    # Nothing older is left behind: the next message received is the next one sent.
    push.send(b"next")
    assert recv_within(pull) == b"next"


def test_sub_keeps_only_the_last_message(make, endpoint, transport):
    pub = make(zmq.PUB)
    addr = bind(pub, endpoint())
    sub = make(zmq.SUB, CONFLATE=1)
    sub.connect(addr)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    end = time.monotonic() + DEADLINE_MS / 1000
    while not sub.poll(10, zmq.POLLIN):  # a PUB reports nothing: probe until subscribed
        assert time.monotonic() < end, "subscription never reached the PUB"
        pub.send(b"probe")
    while sub.poll(0, zmq.POLLIN):
        assert sub.recv() == b"probe"
    for i in range(20):
        pub.send(b"%d" % i)
    wait_until_delivered(sub, transport)
    assert sub.recv(zmq.NOBLOCK) == b"19"
    pub.send(b"next")
    assert recv_within(sub) == b"next"


def test_conflate_ignores_hwm(make, endpoint, transport):
    """A conflating connection never pushes back, whatever the HWMs say."""
    push = make(zmq.PUSH, SNDHWM=1)
    addr = bind(push, endpoint())
    pull = make(zmq.PULL, CONFLATE=1, RCVHWM=1)
    pull.connect(addr)
    assert push.poll(DEADLINE_MS, zmq.POLLOUT)
    push.setsockopt(zmq.SNDTIMEO, DEADLINE_MS)
    for i in range(5000):
        push.send(b"%d" % i)
    wait_until_delivered(pull, transport)
    assert pull.recv(zmq.NOBLOCK) == b"4999"


def test_conflate_multipart_keeps_only_the_last_frame(conflating_pull, transport):
    """libzmq 4.3 documents multipart as unsupported with CONFLATE: only the last frame survives,
    delivered as a one-frame message."""
    push, pull = conflating_pull
    push.send_multipart([b"a", b"b"])
    push.send_multipart([b"c", b"d", b"e"])
    wait_until_delivered(pull, transport)
    assert pull.recv_multipart(zmq.NOBLOCK) == [b"e"]


@pytest.mark.beyond_libzmq
def test_binding_pull_conflates_too(make, endpoint, transport):
    """CONFLATE on the binding side applies to connections made to it.

    libzmq 4.3 over inproc builds the pipe from the connecting socket's options only, so a
    binding PULL with CONFLATE receives every message (over tcp/ipc it does conflate).
    """
    pull = make(zmq.PULL, CONFLATE=1)
    addr = bind(pull, endpoint())
    push = make(zmq.PUSH)
    push.connect(addr)
    assert push.poll(DEADLINE_MS, zmq.POLLOUT)
    for i in range(20):
        push.send(b"%d" % i)
    wait_until_delivered(pull, transport)
    assert pull.recv(zmq.NOBLOCK) == b"19"
