"""DEALER and ROUTER as specified by ZeroMQ RFC 28.

Modelled on libzmq's tests/test_spec_dealer.cpp and tests/test_spec_router.cpp.
"""

from __future__ import annotations

import time

import pytest

import brokerless as zmq
from tests.helpers import bind, connect, recv_within

SERVICES = 5


# -- DEALER -------------------------------------------------------------------------------------


def test_dealer_round_robins_over_reps(make, endpoint):
    dealer = make(zmq.DEALER)
    addr = bind(dealer, endpoint())
    reps = [make(zmq.REP) for _ in range(SERVICES)]
    for rep in reps:
        connect(rep, addr, dealer)

    firsts = []
    for i in range(SERVICES):
        dealer.send_multipart([b"", b"%d" % i])
    for rep in reps:
        request = recv_within(rep)
        firsts.append(int(request))
        rep.send(b"re: " + request)
    assert sorted(firsts) == list(range(SERVICES))
    replies = [recv_within(dealer, multipart=True) for _ in range(SERVICES)]
    assert sorted(replies) == sorted([b"", b"re: %d" % i] for i in range(SERVICES))

    # The next round follows the same rotation.
    for i in range(SERVICES, 2 * SERVICES):
        dealer.send_multipart([b"", b"%d" % i])
    assert [int(recv_within(rep)) for rep in reps] == [n + SERVICES for n in firsts]


def test_dealer_receives_from_every_dealer(make, endpoint):
    receiver = make(zmq.DEALER)
    addr = bind(receiver, endpoint())
    senders = [make(zmq.DEALER) for _ in range(SERVICES)]
    for sender in senders:
        connect(sender, addr)

    for _ in range(2):
        senders[0].send(b"A")
        assert recv_within(receiver) == b"A"

    for n, sender in enumerate(senders):
        sender.send(b"B%d" % n)
    got = [recv_within(receiver) for _ in range(SERVICES)]
    assert sorted(got) == [b"B%d" % n for n in range(SERVICES)]


def test_dealer_without_peers_noblock_raises_again(make):
    dealer = make(zmq.DEALER)
    with pytest.raises(zmq.Again):
        dealer.send(b"", zmq.NOBLOCK)


def test_dealer_without_peers_times_out(make):
    dealer = make(zmq.DEALER)
    dealer.setsockopt(zmq.SNDTIMEO, 200)
    start = time.monotonic()
    with pytest.raises(zmq.Again):
        dealer.send(b"")
    assert 0.15 <= time.monotonic() - start < 2


def test_dealer_message_reaches_router_with_routing_id(make, endpoint):
    router = make(zmq.ROUTER)
    addr = bind(router, endpoint())
    dealer = make(zmq.DEALER)
    dealer.setsockopt(zmq.ROUTING_ID, b"dealer-1")
    connect(dealer, addr)

    dealer.send_multipart([b"x", b"y"])
    assert recv_within(router, multipart=True) == [b"dealer-1", b"x", b"y"]
    router.send_multipart([b"dealer-1", b"z", b""])
    assert recv_within(dealer, multipart=True) == [b"z", b""]


# -- ROUTER -------------------------------------------------------------------------------------


def test_router_generates_routing_ids(make, endpoint):
    """Peers without ROUTING_ID get distinct 5-byte ids starting with a zero byte."""
    router = make(zmq.ROUTER)
    addr = bind(router, endpoint())
    one, two = make(zmq.DEALER), make(zmq.DEALER)
    connect(one, addr)
    connect(two, addr)

    one.send(b"from one")
    id_one, body = recv_within(router, multipart=True)
    assert body == b"from one"
    two.send(b"from two")
    id_two, body = recv_within(router, multipart=True)
    assert body == b"from two"

    for peer_id in (id_one, id_two):
        assert len(peer_id) == 5
        assert peer_id[0] == 0
    assert id_one != id_two

    # The id is stable and addresses that peer.
    one.send(b"again")
    assert recv_within(router, multipart=True) == [id_one, b"again"]
    router.send_multipart([id_two, b"to two"])
    router.send_multipart([id_one, b"to one"])
    assert recv_within(one) == b"to one"
    assert recv_within(two) == b"to two"


def test_router_uses_peer_routing_id(make, endpoint):
    router = make(zmq.ROUTER)
    addr = bind(router, endpoint())
    dealer = make(zmq.DEALER)
    dealer.setsockopt(zmq.ROUTING_ID, b"named")
    connect(dealer, addr)

    dealer.send(b"hi")
    assert recv_within(router) == b"named"
    assert router.getsockopt(zmq.RCVMORE) == 1
    assert router.recv() == b"hi"
    assert router.getsockopt(zmq.RCVMORE) == 0


@pytest.mark.parametrize("transport", ["inproc"])
def test_router_fair_queues_in(make, endpoint):
    """After a burst from every peer, the next N messages come one from each peer.

    Relies on every message being queued at the ROUTER before the first read (immediate over
    inproc; libzmq's own test settles for a while over tcp).
    """
    receiver = make(zmq.ROUTER)
    addr = bind(receiver, endpoint())
    senders = [make(zmq.DEALER) for _ in range(SERVICES)]
    ids = [b"%c" % (ord("A") + n) for n in range(SERVICES)]
    for sender, peer_id in zip(senders, ids, strict=True):
        sender.setsockopt(zmq.ROUTING_ID, peer_id)
        connect(sender, addr)

    for _ in range(2):
        senders[0].send(b"M")
        assert recv_within(receiver, multipart=True) == [b"A", b"M"]

    for sender in senders:
        sender.send(b"M1")
        sender.send(b"M2")
    first = [recv_within(receiver, multipart=True) for _ in range(SERVICES)]
    second = [recv_within(receiver, multipart=True) for _ in range(SERVICES)]
    assert sorted(first) == [[peer_id, b"M1"] for peer_id in ids]
    assert sorted(second) == [[peer_id, b"M2"] for peer_id in ids]


def test_router_drops_unroutable_messages(make, endpoint):
    """Without ROUTER_MANDATORY a message to an unknown id is accepted and silently dropped."""
    router = make(zmq.ROUTER)
    addr = bind(router, endpoint())
    dealer = make(zmq.DEALER)
    dealer.setsockopt(zmq.ROUTING_ID, b"known")
    connect(dealer, addr)
    dealer.send(b"hello")
    assert recv_within(router, multipart=True) == [b"known", b"hello"]

    router.send_multipart([b"unknown", b"lost", b"parts"], zmq.NOBLOCK)
    router.send_multipart([b"known", b"delivered"])
    assert recv_within(dealer, multipart=True) == [b"delivered"]
    assert dealer.poll(100, zmq.POLLIN) == 0


def test_router_connects_to_bound_dealer(make, endpoint):
    """A connecting ROUTER learns the bound peer's ROUTING_ID and can address it first."""
    dealer = make(zmq.DEALER)
    dealer.setsockopt(zmq.ROUTING_ID, b"server")
    addr = bind(dealer, endpoint())
    router = make(zmq.ROUTER)
    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    connect(router, addr)

    router.send_multipart([b"server", b"ping"])
    assert recv_within(dealer, multipart=True) == [b"ping"]
    dealer.send(b"pong")
    assert recv_within(router, multipart=True) == [b"server", b"pong"]


def test_router_to_dealer_multipart_is_whole(make, endpoint):
    router = make(zmq.ROUTER)
    addr = bind(router, endpoint())
    dealer = make(zmq.DEALER)
    dealer.setsockopt(zmq.ROUTING_ID, b"d")
    connect(dealer, addr)
    dealer.send(b"hello")
    recv_within(router, multipart=True)

    router.send(b"d", zmq.SNDMORE)
    router.send(b"1", zmq.SNDMORE)
    assert dealer.poll(100, zmq.POLLIN) == 0
    router.send(b"2", zmq.SNDMORE)
    router.send(b"3")
    assert dealer.poll(2000, zmq.POLLIN)
    got = []
    for _ in range(3):
        got.append((dealer.recv(zmq.NOBLOCK), dealer.getsockopt(zmq.RCVMORE)))
    assert got == [(b"1", 1), (b"2", 1), (b"3", 0)]
