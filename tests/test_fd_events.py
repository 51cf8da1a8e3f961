"""Driving sockets from a foreign event loop by the FD and EVENTS options, as libzmq documents.

libzmq's contract (zmq_getsockopt, ZMQ_FD): the descriptor is edge-triggered and only says "the
socket's state may have changed": a readable FD means "read EVENTS", never "a message is there";
and because send/recv use the same signal internally, EVENTS must be read again after every
send or recv before the loop goes back to sleep.  The loop here is a plain ``selectors`` loop
(not asyncio) that follows exactly those rules; every socket operation in it is non-blocking.
"""

from __future__ import annotations

import selectors
import threading
import time

import pytest

import brokerless as zmq
from tests.helpers import bind, connect

TIMEOUT = 5.0


class EdgeTriggeredLoop:
    """Waits for a socket's events the way libzmq's documentation says an event loop must."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()

    def close(self) -> None:
        self.selector.close()

    def add(self, sock) -> None:
        self.selector.register(sock.getsockopt(zmq.FD), selectors.EVENT_READ)

    def wait(self, sock, event: int) -> None:
        """Return once EVENTS has ``event``; sleep on the FD (only) while it has not."""
        deadline = time.monotonic() + TIMEOUT
        while not sock.getsockopt(zmq.EVENTS) & event:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.selector.select(remaining):
                raise AssertionError(f"EVENTS never showed {event} within {TIMEOUT} s")

    def recv(self, sock) -> list:
        self.wait(sock, zmq.POLLIN)
        return sock.recv_multipart(zmq.NOBLOCK)

    def send(self, sock, parts: list) -> None:
        self.wait(sock, zmq.POLLOUT)
        sock.send_multipart(parts, zmq.NOBLOCK)


@pytest.fixture
def push_pull(make, endpoint):
    """A PUSH and a PULL bound to it, connected (handshake done)."""
    pull = make(zmq.PULL)
    push = make(zmq.PUSH)
    connect(push, bind(pull, endpoint()), pull)
    return push, pull


@pytest.fixture
def loop():
    edge_loop = EdgeTriggeredLoop()
    yield edge_loop
    edge_loop.close()


def _sender_thread(sock, count: int, started: threading.Event | None = None) -> threading.Thread:
    def run() -> None:
        if started is not None:
            started.wait(TIMEOUT)
        for i in range(count):
            sock.send_multipart([b"%d" % i, b"x" * (i % 7)])

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_stream_from_another_thread_wakes_the_loop_for_every_message(push_pull, loop) -> None:
    push, pull = push_pull
    loop.add(pull)
    started = threading.Event()
    sender = _sender_thread(push, 2000, started)
    assert not pull.getsockopt(zmq.EVENTS) & zmq.POLLIN  # asleep before the first message
    started.set()
    got = [loop.recv(pull) for _ in range(2000)]
    sender.join(TIMEOUT)
    assert [int(parts[0]) for parts in got] == list(range(2000))


def test_one_thread_drives_both_ends_of_a_request_reply_exchange(make, endpoint, loop) -> None:
    # Each send processes the socket's pending commands, which consumes the FD's signal: a loop
    # that re-reads EVENTS after every operation still sees each reply.
    rep = make(zmq.REP)
    req = make(zmq.REQ)
    connect(req, bind(rep, endpoint()), rep)
    loop.add(rep)
    loop.add(req)
    for i in range(300):
        loop.send(req, [b"ping %d" % i])
        request = loop.recv(rep)
        loop.send(rep, [request[0].replace(b"ping", b"pong")])
        assert loop.recv(req) == [b"pong %d" % i]


def test_a_sender_at_its_hwm_is_woken_when_the_peer_drains(make, endpoint, loop) -> None:
    pull = make(zmq.PULL, RCVHWM=5)
    push = make(zmq.PUSH, SNDHWM=5)
    connect(push, bind(pull, endpoint()), pull)
    loop.add(push)
    received: list[bytes] = []
    go = threading.Event()

    def drain() -> None:
        go.wait(TIMEOUT)
        for _ in range(500):
            received.append(pull.recv())

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    sent = 0
    blocked = 0
    while sent < 500:
        try:
            push.send(b"%d" % sent, zmq.NOBLOCK)
        except zmq.Again:
            blocked += 1
            go.set()  # only now does the peer read: the loop must sleep on the FD until then
            loop.wait(push, zmq.POLLOUT)
        else:
            sent += 1
    reader.join(TIMEOUT)
    assert blocked > 0
    assert received == [b"%d" % i for i in range(500)]


def test_a_blocking_recv_in_between_does_not_silence_the_fd(push_pull, loop) -> None:
    push, pull = push_pull
    loop.add(pull)
    push.send(b"first")
    assert pull.recv() == b"first"  # an ordinary blocking call, outside the loop
    sender = _sender_thread(push, 10)
    assert [loop.recv(pull)[0] for _ in range(10)] == [b"%d" % i for i in range(10)]
    sender.join(TIMEOUT)


def test_the_fd_is_quiet_once_events_has_been_read(push_pull, loop) -> None:
    # A level-triggered loop (asyncio's add_reader) would spin if the FD stayed readable with
    # nothing new: after EVENTS is read, the FD signals only a later change.
    push, pull = push_pull
    loop.add(pull)
    push.send(b"x")
    loop.wait(pull, zmq.POLLIN)
    pull.recv(zmq.NOBLOCK)
    assert not pull.getsockopt(zmq.EVENTS) & zmq.POLLIN
    assert loop.selector.select(0) == []
    push.send(b"y")
    loop.wait(pull, zmq.POLLIN)
    assert pull.recv(zmq.NOBLOCK) == b"y"


def test_a_blocking_request_in_between_does_not_silence_the_fd(make, endpoint, loop) -> None:
    # REQ's blocking recv may read the connection itself while it waits (a lent read): the FD
    # must signal the replies that come after it as before.
    rep = make(zmq.REP)
    req = make(zmq.REQ)
    connect(req, bind(rep, endpoint()), rep)

    def echo(count: int) -> None:
        for _ in range(count):
            rep.send(rep.recv())

    echoer = threading.Thread(target=echo, args=(11,), daemon=True)
    echoer.start()
    req.send(b"blocking")
    assert req.recv() == b"blocking"
    loop.add(req)
    for i in range(10):
        loop.send(req, [b"%d" % i])
        assert loop.recv(req) == [b"%d" % i]
    echoer.join(TIMEOUT)


def test_a_bound_sender_is_woken_when_its_first_peer_arrives(make, endpoint, loop) -> None:
    push = make(zmq.PUSH)
    addr = bind(push, endpoint())
    loop.add(push)
    assert not push.getsockopt(zmq.EVENTS) & zmq.POLLOUT  # no peer: nowhere to send
    pull = make(zmq.PULL)
    pull.connect(addr)
    loop.send(push, [b"hello"])
    assert pull.recv() == b"hello"
