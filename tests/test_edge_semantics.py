"""Review findings: libzmq semantics the suite did not cover.

Each test fails on brokerless (as of b367768/66761ac) and passes against libzmq
(``BROKERLESS_TEST_AGAINST=pyzmq``).
"""

from __future__ import annotations

import brokerless as zmq


def _drain(sock, within_ms: int = 300) -> list:
    got = []
    while sock.poll(within_ms):
        got.append(sock.recv())
    return got


def test_router_connecting_before_bind_learns_binder_routing_id(make):
    """A ROUTER whose inproc connect is parked (nobody bound yet) attaches its end at once with
    a generated id; the binder's ROUTING_ID set later on the pipe is never used."""
    router = make(zmq.ROUTER, ROUTER_MANDATORY=1)
    router.connect("inproc://review-rid")
    dealer = make(zmq.DEALER, ROUTING_ID=b"D")
    dealer.bind("inproc://review-rid")
    router.send_multipart([b"D", b"hi"])  # brokerless: EHOSTUNREACH
    assert dealer.recv() == b"hi"
    dealer.send(b"up")
    assert router.recv_multipart() == [b"D", b"up"]


def test_xpub_verboser_reports_every_unsubscribe_of_a_closed_subscriber(make):
    xpub = make(zmq.XPUB, XPUB_VERBOSER=1)
    xpub.bind("inproc://review-verboser")
    s1 = make(zmq.SUB)
    s1.connect("inproc://review-verboser")
    s1.setsockopt(zmq.SUBSCRIBE, b"t")
    s2 = make(zmq.SUB)
    s2.connect("inproc://review-verboser")
    s2.setsockopt(zmq.SUBSCRIBE, b"t")
    assert _drain(xpub) == [b"\x01t", b"\x01t"]
    s1.close()
    assert _drain(xpub) == [b"\x00t"]  # libzmq: rm(pipe, ..., call_on_uniq=!verbose_unsubs)


def test_xpub_manual_reports_unsubscribe_of_a_closed_subscriber(make):
    xpub = make(zmq.XPUB, XPUB_MANUAL=1)
    xpub.bind("inproc://review-manual")
    sub = make(zmq.SUB)
    sub.connect("inproc://review-manual")
    sub.setsockopt(zmq.SUBSCRIBE, b"t")
    assert _drain(xpub) == [b"\x01t"]
    xpub.setsockopt(zmq.SUBSCRIBE, b"t")
    sub.close()
    assert _drain(xpub) == [b"\x00t"]


def test_last_part_of_multipart_does_not_raise_again_when_peer_left(make):
    """Once the first part is accepted, the rest of the message never fails with EAGAIN
    (libzmq drops it if the peer went away).  brokerless raises Again on the last part after
    discarding the parts already given, so a retry of the last part sends a truncated message."""
    push = make(zmq.PUSH)
    push.bind("inproc://review-mp")
    pull = make(zmq.PULL)
    pull.connect("inproc://review-mp")
    push.send(b"head", zmq.SNDMORE)
    pull.close()
    push.poll(50, zmq.POLLIN)  # let the disconnect arrive
    push.send(b"tail", zmq.NOBLOCK)


def test_tracker_completes_when_the_message_is_dropped(make):
    """PUB with no subscriber drops the message: libzmq releases it, the tracker is done.
    brokerless releases trackers only when a receiver takes the frame."""
    pub = make(zmq.PUB)
    pub.bind("inproc://review-track")
    tracker = pub.send(bytearray(200_000), copy=False, track=True)
    tracker.wait(2)
