"""ROUTER_MANDATORY, ROUTER_HANDOVER and PROBE_ROUTER.

Modelled on libzmq's tests/test_router_mandatory.cpp, tests/test_router_handover.cpp and
tests/test_probe_router.cpp.
"""

from __future__ import annotations

import time

import pytest

import brokerless as zmq
from tests.helpers import bind, connect, recv_within
from tests.ports import free_port

# Enough traffic to overrun every buffer between a ROUTER and a peer that does not read,
# including the kernel's socket buffers once tcp joins the suite.
FLOOD_COUNT = 5000
FLOOD_SIZE = 4096


def named_dealer(make, addr: str, routing_id: bytes, router):
    """A DEALER with ``routing_id`` connected to ``router``, which has heard from it."""
    dealer = make(zmq.DEALER)
    dealer.setsockopt(zmq.ROUTING_ID, routing_id)
    connect(dealer, addr)
    dealer.send(b"Hello")
    assert recv_within(router, multipart=True) == [routing_id, b"Hello"]
    return dealer


# -- ROUTER_MANDATORY ---------------------------------------------------------------------------


def test_mandatory_unknown_peer_is_ehostunreach(make, endpoint):
    router = make(zmq.ROUTER)
    addr = bind(router, endpoint())

    # By default a message to an unknown peer vanishes without an error.
    router.send(b"UNKNOWN", zmq.SNDMORE)
    router.send(b"DATA")

    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    with pytest.raises(zmq.ZMQError) as info:
        router.send(b"UNKNOWN", zmq.SNDMORE)
    assert info.value.errno == zmq.EHOSTUNREACH

    # The failed routing frame started no message: the next frame is a routing id again.
    dealer = named_dealer(make, addr, b"X", router)
    router.send(b"X", zmq.SNDMORE)
    router.send(b"Hello")
    assert recv_within(dealer, multipart=True) == [b"Hello"]


def test_mandatory_peer_at_hwm_raises_again(make, endpoint, transport):
    router = make(zmq.ROUTER)
    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    router.setsockopt(zmq.SNDHWM, 1)
    addr = bind(router, endpoint())
    dealer = make(zmq.DEALER)
    dealer.setsockopt(zmq.RCVHWM, 1)
    dealer.setsockopt(zmq.ROUTING_ID, b"X")
    connect(dealer, addr)
    dealer.send(b"Hello")
    assert recv_within(router, multipart=True) == [b"X", b"Hello"]

    payload = b"p" * FLOOD_SIZE
    sent = 0
    while True:
        assert sent < 20 * FLOOD_COUNT, "the ROUTER never reported the peer's HWM"
        # Routing happens on the id frame, so that is the frame which fails.
        try:
            router.send(b"X", zmq.SNDMORE | zmq.NOBLOCK)
        except zmq.Again:
            # Over ipc/tcp an I/O thread may still be draining into the kernel: blocked means
            # no room comes back (with one peer, POLLOUT is that peer's room).
            if not router.poll(200, zmq.POLLOUT):
                break
            continue
        router.send(payload, zmq.NOBLOCK)
        sent += 1
    assert sent > 0
    if transport == "inproc":
        assert sent == 2  # an inproc pipe holds SNDHWM + RCVHWM messages

    # A blocking send waits out SNDTIMEO instead.
    router.setsockopt(zmq.SNDTIMEO, 200)
    start = time.monotonic()
    with pytest.raises(zmq.Again):
        router.send(b"X", zmq.SNDMORE)
    assert 0.15 <= time.monotonic() - start < 2

    # Once the peer reads, the ROUTER can reach it again.
    for _ in range(sent):
        assert recv_within(dealer) == payload
    router.setsockopt(zmq.SNDTIMEO, 2000)
    router.send_multipart([b"X", b"after"])
    assert recv_within(dealer) == b"after"


def test_without_mandatory_peer_at_hwm_drops(make, endpoint, transport):
    """Without ROUTER_MANDATORY, messages to a peer at its HWM are accepted and dropped."""
    router = make(zmq.ROUTER)
    router.setsockopt(zmq.SNDHWM, 1)
    addr = bind(router, endpoint())
    dealer = make(zmq.DEALER)
    dealer.setsockopt(zmq.RCVHWM, 1)
    dealer.setsockopt(zmq.ROUTING_ID, b"X")
    connect(dealer, addr)
    dealer.send(b"Hello")
    assert recv_within(router, multipart=True) == [b"X", b"Hello"]

    padding = b"p" * FLOOD_SIZE
    for i in range(FLOOD_COUNT):
        router.send_multipart([b"X", b"%d" % i, padding], zmq.NOBLOCK)

    received = []
    while dealer.poll(200, zmq.POLLIN):
        seq, pad = dealer.recv_multipart()
        assert pad == padding
        received.append(int(seq))
    assert 0 < len(received) < FLOOD_COUNT
    assert received == sorted(received)
    if transport == "inproc":
        # The inproc pipe holds SNDHWM + RCVHWM messages; everything after them was dropped.
        assert received == [0, 1]


# -- ROUTER_HANDOVER ----------------------------------------------------------------------------


def test_handover_gives_routing_id_to_newest_peer(make, endpoint):
    router = make(zmq.ROUTER)
    router.setsockopt(zmq.ROUTER_HANDOVER, 1)
    addr = bind(router, endpoint())
    first = named_dealer(make, addr, b"X", router)
    second = named_dealer(make, addr, b"X", router)

    router.send_multipart([b"X", b"for X"])
    assert recv_within(second) == b"for X"
    assert first.poll(200, zmq.POLLIN) == 0


def claimed_twice(make, endpoint):
    """A ROUTER, a DEALER named X it has heard from, and a second DEALER named X that has
    sent Hello, which the ROUTER has not heard (the first keeps the id)."""
    router = make(zmq.ROUTER)
    addr = bind(router, endpoint())
    first = named_dealer(make, addr, b"X", router)
    second = make(zmq.DEALER)
    second.setsockopt(zmq.ROUTING_ID, b"X")
    connect(second, addr)
    second.send(b"Hello")
    assert router.poll(200, zmq.POLLIN) == 0
    return router, first, second


def test_without_handover_duplicate_routing_id_is_ignored(make, endpoint):
    """The first peer keeps the id; the ROUTER does not hear a newcomer claiming it."""
    router, first, second = claimed_twice(make, endpoint)
    router.send_multipart([b"X", b"for X"])
    assert recv_within(first) == b"for X"
    assert second.poll(200, zmq.POLLIN) == 0


@pytest.mark.parametrize("handover", [0, 1])
@pytest.mark.parametrize("implementation", ["brokerless", "libzmq"])
def test_a_peer_whose_routing_id_is_taken_keeps_its_connection(
    make, lmake, implementation, handover
):
    """libzmq leaves the connection of a peer whose routing id another has open, unread --
    the newcomer's without ROUTER_HANDOVER, the old holder's with it -- so that peer does not
    reconnect.  brokerless closed it, and the peer, coming back with the same id at once, did
    so about ten times a second for as long as both lived (with handover the two took the id
    from each other back and forth)."""
    import zmq as libzmq

    lib = zmq if implementation == "brokerless" else libzmq
    router = (make if lib is zmq else lmake)(lib.ROUTER, ROUTER_HANDOVER=handover)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealers, monitors = [], []
    for name in (b"a", b"b"):
        dealer = lmake(libzmq.DEALER, ROUTING_ID=b"SAME")
        monitor = dealer.get_monitor_socket(libzmq.EVENT_DISCONNECTED)
        dealer.connect(f"tcp://127.0.0.1:{port}")
        dealer.send(b"from " + name)
        dealers.append(dealer)
        monitors.append(monitor)
        if name == b"a":
            assert router.recv_multipart() == [b"SAME", b"from a"]
    holder, idle = (dealers[1], dealers[0]) if handover else (dealers[0], dealers[1])
    if handover:  # (the newcomer's first message arrives: it has the id now)
        assert router.recv_multipart() == [b"SAME", b"from b"]
    router.send_multipart([b"SAME", b"reply"])
    assert holder.recv() == b"reply"
    assert not idle.poll(300)
    assert not any(monitor.poll(300) for monitor in monitors), "a connection was closed"


def test_a_peer_whose_routing_id_is_taken_gets_it_when_it_is_free(make, endpoint):
    """Once the peer that had the id goes, a peer that waited with it takes it: what it sent
    meanwhile arrives then, and replies reach it."""
    router, first, second = claimed_twice(make, endpoint)
    first.close(linger=0)
    assert recv_within(router, 5000, multipart=True) == [b"X", b"Hello"]
    router.send_multipart([b"X", b"for the second"])
    assert recv_within(second) == b"for the second"


# -- PROBE_ROUTER -------------------------------------------------------------------------------


def test_probe_from_dealer(make, endpoint):
    """A DEALER with PROBE_ROUTER sends an empty message as soon as it connects."""
    server = make(zmq.ROUTER)
    addr = bind(server, endpoint())
    client = make(zmq.DEALER)
    client.setsockopt(zmq.ROUTING_ID, b"X")
    client.setsockopt(zmq.PROBE_ROUTER, 1)
    connect(client, addr)

    assert recv_within(server, multipart=True) == [b"X", b""]
    server.send_multipart([b"X", b"Hello"])
    assert recv_within(client, multipart=True) == [b"Hello"]


def test_probe_from_router(make, endpoint):
    """Router-to-router: the probe lets the bound ROUTER address the connecting one first."""
    server = make(zmq.ROUTER)
    addr = bind(server, endpoint())
    client = make(zmq.ROUTER)
    client.setsockopt(zmq.ROUTING_ID, b"X")
    client.setsockopt(zmq.PROBE_ROUTER, 1)
    connect(client, addr)

    assert recv_within(server, multipart=True) == [b"X", b""]
    server.send_multipart([b"X", b"Hello"])
    server_id, body = recv_within(client, multipart=True)
    assert body == b"Hello"
    # The server set no ROUTING_ID, so the client made one up for it.
    assert len(server_id) == 5
    assert server_id[0] == 0


def test_probe_from_bound_side(make, endpoint):
    """The probe goes out on every new connection, whichever side connected."""
    server = make(zmq.ROUTER)
    server.setsockopt(zmq.PROBE_ROUTER, 1)
    addr = bind(server, endpoint())
    client = make(zmq.DEALER)
    connect(client, addr)

    # libzmq's bound socket takes up a new connection only while it runs its own machinery
    # (a send, recv or poll on it), so poll both ends together until the probe arrives.
    poller = zmq.Poller()
    poller.register(server, zmq.POLLIN)
    poller.register(client, zmq.POLLIN)
    assert client in dict(poller.poll(2000))
    assert client.recv_multipart(zmq.NOBLOCK) == [b""]


@pytest.mark.parametrize(
    ("kind", "option"),
    [
        (zmq.DEALER, zmq.ROUTER_MANDATORY),
        (zmq.DEALER, zmq.ROUTER_HANDOVER),
        (zmq.PUSH, zmq.PROBE_ROUTER),
    ],
)
def test_router_options_rejected_by_other_socket_types(make, kind, option):
    sock = make(kind)
    with pytest.raises(zmq.ZMQError) as info:
        sock.setsockopt(option, 1)
    assert info.value.errno == zmq.EINVAL


# -- CONNECT_ROUTING_ID -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("peer", "transport"),
    [("brokerless", "inproc"), ("brokerless", "ipc"), ("brokerless", "tcp"), ("libzmq", "ipc"),
     ("libzmq", "tcp")],
)  # fmt: skip
def test_connect_routing_id_names_the_peer_a_router_connects_to(
    make, lmake, tmp_path, peer, transport
):
    """A ROUTER that connects with CONNECT_ROUTING_ID sends to the peer by that name at once,
    over every transport, whichever library binds (zmq_setsockopt(3)).  Over tcp and ipc the
    name was lost when the handshake made the pipe: the message was dropped (EHOSTUNREACH with
    ROUTER_MANDATORY)."""
    where = {
        "inproc": f"inproc://connect-routing-id-{id(tmp_path)}",
        "ipc": f"ipc://{tmp_path}/crid",
        "tcp": f"tcp://127.0.0.1:{free_port()}",
    }[transport]
    dealer = make(zmq.DEALER) if peer == "brokerless" else lmake(zmq.DEALER)
    dealer.bind(where)
    router = make(zmq.ROUTER, ROUTER_MANDATORY=1)
    router.setsockopt(zmq.CONNECT_ROUTING_ID, b"peerA")
    connect(router, where)  # (returns once the handshake is done)
    router.send_multipart([b"peerA", b"hello"])
    assert dealer.recv() == b"hello"
    dealer.send(b"back")
    assert recv_within(router, multipart=True) == [b"peerA", b"back"]
