"""Wake-ups between threads: no message or wake-up is ever lost under sustained traffic.

A lost wake-up shows as a peer that stays asleep while a message waits for it; every receive
here is bounded, so one turns into an ``Again`` failure instead of a hang.  The sizes are large
enough that the races these guard against (a sender signalling while the owner re-arms) were
seen in practice.
"""

from __future__ import annotations

import threading

import brokerless as zmq
from tests.helpers import bind, connect

ROUND_TRIPS = 20_000


def _run(target, *args) -> tuple[threading.Thread, list]:
    errors: list = []

    def guarded() -> None:
        try:
            target(*args)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    thread = threading.Thread(target=guarded, daemon=True)
    thread.start()
    return thread, errors


def _finish(thread: threading.Thread, errors: list) -> None:
    thread.join(30)
    assert not thread.is_alive(), "the peer thread is stuck"
    assert not errors, errors


def test_req_rep_ping_pong_across_threads(make, endpoint):
    rep = make(zmq.REP, RCVTIMEO=5000)
    addr = bind(rep, endpoint())
    req = make(zmq.REQ, RCVTIMEO=5000)
    connect(req, addr)

    def echo() -> None:
        for _ in range(ROUND_TRIPS):
            rep.send(rep.recv())

    thread, errors = _run(echo)
    payload = b"x" * 1024
    for i in range(ROUND_TRIPS):
        req.send(payload)
        assert req.recv() == payload, f"round trip {i}"
    _finish(thread, errors)


def test_push_pull_at_hwm_across_threads(make, endpoint):
    """The writer blocks at a small HWM over and over; every message arrives, in order."""
    count = 100_000
    pull = make(zmq.PULL, RCVHWM=10, RCVTIMEO=5000)
    addr = bind(pull, endpoint())
    push = make(zmq.PUSH, SNDHWM=10, SNDTIMEO=5000)
    connect(push, addr)

    def produce() -> None:
        for i in range(count):
            push.send(i.to_bytes(4, "big"))

    thread, errors = _run(produce)
    for i in range(count):
        assert int.from_bytes(pull.recv(), "big") == i
    _finish(thread, errors)


def test_poller_ping_pong_across_threads(make, endpoint):
    """Waiting in a Poller (on the descriptor) is woken as reliably as a blocking recv."""
    a = make(zmq.PAIR)
    addr = bind(a, endpoint())
    b = make(zmq.PAIR)
    connect(b, addr)

    def echo() -> None:
        poller = zmq.Poller()
        poller.register(b, zmq.POLLIN)
        for _ in range(ROUND_TRIPS // 4):
            assert poller.poll(5000), "echo side not woken"
            b.send(b.recv(zmq.NOBLOCK))

    thread, errors = _run(echo)
    poller = zmq.Poller()
    poller.register(a, zmq.POLLIN)
    for i in range(ROUND_TRIPS // 4):
        a.send(b"%d" % i)
        if i % 2:  # alternate the two ways of waiting on the same socket
            assert poller.poll(5000), f"round trip {i}: not woken"
            assert a.recv(zmq.NOBLOCK) == b"%d" % i
        else:
            assert a.recv() == b"%d" % i
    _finish(thread, errors)
