"""PAIR as specified by ZeroMQ RFC 31 (modelled on libzmq's tests/test_pair_inproc.cpp)."""

from __future__ import annotations

import pytest

import brokerless as zmq
from tests.helpers import bind, connect, recv_within


@pytest.fixture
def pair(make, endpoint):
    """A bound PAIR and the PAIR connected to it."""
    server = make(zmq.PAIR)
    addr = bind(server, endpoint())
    client = make(zmq.PAIR)
    connect(client, addr)
    return server, client


def test_pair_exchanges_both_ways(pair):
    server, client = pair
    for i in range(3):
        client.send(b"ping %d" % i)
        assert recv_within(server) == b"ping %d" % i
        server.send(b"pong %d" % i)
        assert recv_within(client) == b"pong %d" % i


def test_pair_keeps_order(pair):
    server, client = pair
    for i in range(100):
        client.send(b"%d" % i)
    assert [recv_within(server) for _ in range(100)] == [b"%d" % i for i in range(100)]


def test_pair_multipart(pair):
    server, client = pair
    client.send_multipart([b"a", b"", b"c"])
    assert recv_within(server, multipart=True) == [b"a", b"", b"c"]

    server.send(b"x", zmq.SNDMORE)
    assert client.poll(100, zmq.POLLIN) == 0
    server.send(b"y")
    assert client.poll(2000, zmq.POLLIN)
    assert client.recv() == b"x"
    assert client.getsockopt(zmq.RCVMORE) == 1
    assert client.recv() == b"y"
    assert client.getsockopt(zmq.RCVMORE) == 0


def test_pair_without_peer_noblock_raises_again(make):
    lonely = make(zmq.PAIR)
    with pytest.raises(zmq.Again):
        lonely.send(b"", zmq.NOBLOCK)


def test_pair_refuses_second_peer(make, endpoint):
    """A PAIR talks to its first peer only; a second one gets nothing and is not heard."""
    server = make(zmq.PAIR)
    addr = bind(server, endpoint())
    first = make(zmq.PAIR)
    connect(first, addr)
    server.send(b"hello first")
    assert recv_within(first) == b"hello first"

    intruder = make(zmq.PAIR)
    intruder.connect(addr)
    try:
        intruder.send(b"intrusion", zmq.NOBLOCK)
    except zmq.Again:
        pass  # refusing the send outright is as good as dropping the message

    for i in range(5):
        server.send(b"for first %d" % i)
    first.send(b"from first")
    assert [recv_within(first) for _ in range(5)] == [b"for first %d" % i for i in range(5)]
    assert recv_within(server) == b"from first"
    assert intruder.poll(100, zmq.POLLIN) == 0
    assert server.poll(100, zmq.POLLIN) == 0
