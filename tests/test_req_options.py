"""REQ_CORRELATE and REQ_RELAXED.

Modelled on libzmq's tests/test_req_correlate.cpp and tests/test_req_relaxed.cpp.
"""

from __future__ import annotations

import pytest

import brokerless as zmq
from tests.helpers import WIRE_BEYOND_LIBZMQ, bind, connect, recv_within

from .ports import unbound_address

SERVICES = 5


def recv_on_any(socks, timeout_ms: int = 2000):
    """Receive one message from whichever of ``socks`` has one: ``(index, frames)``."""
    poller = zmq.Poller()
    for sock in socks:
        poller.register(sock, zmq.POLLIN)
    ready = dict(poller.poll(timeout_ms))
    for i, sock in enumerate(socks):
        if sock in ready:
            return i, sock.recv_multipart()
    raise AssertionError(f"no message within {timeout_ms} ms on any of {len(socks)} sockets")


def bounce(sock) -> list[bytes]:
    """Send one received message straight back (a ROUTER thus replies to its sender)."""
    frames = recv_within(sock, multipart=True)
    sock.send_multipart(frames)
    return frames


def flipped(frame: bytes) -> bytes:
    """A frame of the same length that differs from ``frame`` in every byte."""
    return bytes(b ^ 0xFF for b in frame)


# -- REQ_CORRELATE ------------------------------------------------------------------------------


@pytest.fixture
def correlated(make, endpoint):
    """A REQ with REQ_CORRELATE connected to a ROUTER."""
    router = make(zmq.ROUTER)
    addr = bind(router, endpoint())
    req = make(zmq.REQ)
    req.setsockopt(zmq.REQ_CORRELATE, 1)
    connect(req, addr)
    return req, router


def test_correlate_puts_request_id_before_delimiter(correlated):
    req, router = correlated
    req.send_multipart([b"ABC", b"DEF"])

    assert router.poll(2000, zmq.POLLIN)
    frames = []
    while True:
        frames.append(router.recv(zmq.NOBLOCK))
        if not router.getsockopt(zmq.RCVMORE):
            break
    peer, request_id, *rest = frames
    assert len(peer) > 0
    assert len(request_id) == 4
    assert rest == [b"", b"ABC", b"DEF"]


@pytest.mark.parametrize("transport", WIRE_BEYOND_LIBZMQ)
def test_correlate_drops_replies_with_wrong_request_id(correlated):
    req, router = correlated
    req.send(b"ABC")
    peer, request_id, _, _ = recv_within(router, multipart=True)

    router.send_multipart([peer, flipped(request_id), b"", b"WRONG ID"])
    router.send_multipart([peer, b"", b"NO ID"])
    router.send_multipart([peer, request_id + b"x", b"", b"LONG ID"])
    router.send_multipart([peer, request_id, b"", b"GHI"])
    assert recv_within(req, multipart=True) == [b"GHI"]


def test_correlate_uses_a_new_id_per_request(correlated):
    req, router = correlated
    seen = []
    for i in range(3):
        req.send(b"%d" % i)
        peer, request_id, _, body = recv_within(router, multipart=True)
        assert body == b"%d" % i
        seen.append(request_id)
        router.send_multipart([peer, request_id, b"", b"re %d" % i])
        assert recv_within(req) == b"re %d" % i
    assert len(set(seen)) == 3


def test_correlate_requires_req_socket(make):
    dealer = make(zmq.DEALER)
    with pytest.raises(zmq.ZMQError) as info:
        dealer.setsockopt(zmq.REQ_CORRELATE, 1)
    assert info.value.errno == zmq.EINVAL


# -- REQ_RELAXED --------------------------------------------------------------------------------


@pytest.fixture
def relaxed(make, endpoint):
    """A relaxed, correlating REQ bound, with SERVICES REPs connected to it."""
    req = make(zmq.REQ)
    req.setsockopt(zmq.REQ_RELAXED, 1)
    req.setsockopt(zmq.REQ_CORRELATE, 1)
    addr = bind(req, endpoint())
    reps = [make(zmq.REP) for _ in range(SERVICES)]
    for rep in reps:
        connect(rep, addr)
    return req, reps


def test_relaxed_alone_permits_a_second_request(make, endpoint):
    rep = make(zmq.REP)
    addr = bind(rep, endpoint())
    req = make(zmq.REQ)
    req.setsockopt(zmq.REQ_RELAXED, 1)
    connect(req, addr)

    req.send(b"first")
    req.send(b"second")  # a strict REQ raises EFSM here
    assert recv_within(rep) == b"first"
    rep.send(b"answer")
    assert recv_within(req) == b"answer"


def test_relaxed_new_request_before_reply(relaxed):
    """Case 1: the reply to an abandoned request is discarded; the new one's reply arrives."""
    req, reps = relaxed
    assert req.getsockopt(zmq.EVENTS) == zmq.POLLOUT

    req.send_multipart([b"A", b"B"])
    first, frames = recv_on_any(reps)
    assert frames == [b"A", b"B"]
    # Unlike a strict REQ, a relaxed one stays writable while it waits for a reply.
    assert req.getsockopt(zmq.EVENTS) == zmq.POLLOUT

    req.send_multipart([b"C", b"D"])
    second, frames = recv_on_any(reps)
    assert frames == [b"C", b"D"]
    assert second != first
    assert req.getsockopt(zmq.EVENTS) == zmq.POLLOUT

    reps[first].send(b"WRONG")
    reps[second].send(b"OK")
    assert recv_within(req, multipart=True) == [b"OK"]

    # An ordinary request/reply cycle still works afterwards.
    req.send(b"E")
    third, frames = recv_on_any(reps)
    assert frames == [b"E"]
    reps[third].send_multipart([b"F", b"G"])
    assert recv_within(req, multipart=True) == [b"F", b"G"]


def test_relaxed_drops_reply_queued_before_new_request(relaxed):
    """Case 2: a reply already waiting at the REQ is discarded by the next request."""
    req, reps = relaxed
    req.send(b"H")
    first, frames = recv_on_any(reps)
    assert frames == [b"H"]
    reps[first].send(b"BAD")
    assert req.poll(2000, zmq.POLLIN) == zmq.POLLIN  # BAD is queued at the REQ now

    req.send(b"I")
    second, frames = recv_on_any(reps)
    assert frames == [b"I"]
    reps[second].send(b"GOOD")
    assert recv_within(req) == b"GOOD"


def test_relaxed_resend_keeps_pipe_to_first_peer(relaxed):
    """Case 3 (libzmq issue #1690): abandoning a request does not disconnect that peer."""
    req, reps = relaxed
    req.send(b"abandoned")
    first, _ = recv_on_any(reps)
    order = [first]
    req.send(b"replacement")
    second, _ = recv_on_any(reps)
    order.append(second)
    reps[first].send(b"WRONG")
    reps[second].send(b"OK")
    assert recv_within(req) == b"OK"

    for i in range(2, SERVICES):
        req.send(b"%d" % i)
        which, _ = recv_on_any(reps)
        order.append(which)
        reps[which].send(b"re %d" % i)
        assert recv_within(req) == b"re %d" % i
    assert sorted(order) == list(range(SERVICES))

    # The round robin comes back to the first peer.
    req.send(b"J")
    assert recv_on_any(reps) == (first, [b"J"])


def test_correlate_drops_stale_reply_from_same_peer(make, endpoint):
    """Case 4 (libzmq issue #1695): requests queued before the server came up, both answered."""
    addr = unbound_address(endpoint())
    req = make(zmq.REQ)
    req.setsockopt(zmq.REQ_RELAXED, 1)
    req.setsockopt(zmq.REQ_CORRELATE, 1)
    req.connect(addr)
    req.send(b"TO_BE_DISCARDED")
    req.send(b"TO_BE_ANSWERED")

    router = make(zmq.ROUTER)
    router.bind(addr)
    assert bounce(router)[-1] == b"TO_BE_DISCARDED"
    assert bounce(router)[-1] == b"TO_BE_ANSWERED"
    assert recv_within(req) == b"TO_BE_ANSWERED"


def test_relaxed_without_correlate_takes_stale_reply_from_same_peer(make, endpoint):
    """Without REQ_CORRELATE a relaxed REQ cannot tell an old reply from its peer's new one."""
    router = make(zmq.ROUTER)
    addr = bind(router, endpoint())
    req = make(zmq.REQ)
    req.setsockopt(zmq.REQ_RELAXED, 1)
    connect(req, addr)

    req.send(b"old")
    req.send(b"new")
    assert bounce(router)[-1] == b"old"
    assert bounce(router)[-1] == b"new"
    assert recv_within(req) == b"old"
