"""What a subscriber's choice of topics can cost a publisher: matching a message must look at
each of its octets a bounded number of times, however many topic lengths the subscribers chose
(libzmq's trie walk looks at each once), and must match exactly what a prefix test matches.

The wire test runs against libzmq too (``BROKERLESS_TEST_AGAINST=pyzmq``); the others look at
brokerless's subscription table itself.
"""

from __future__ import annotations

import random
import socket
import threading

import pytest

import brokerless as zmq

from .helpers import recv_within
from .test_faults import frame, handshake, read_exact

pytestmark = pytest.mark.timeout(60)

DEADLINE = 10.0
LENGTHS = 4000  # distinct topic lengths a hostile subscriber asks for (8 MB of subscriptions)


class Counted(bytes):
    """A message that counts the octets matching looks at (slices, indexing, ``startswith``)."""

    looked = 0

    def __getitem__(self, key):
        got = super().__getitem__(key)
        Counted.looked += len(got) if isinstance(key, slice) else 1
        return got

    def startswith(self, prefix, start=0, *args):
        Counted.looked += len(prefix)
        return super().startswith(prefix, start, *args)


@pytest.mark.beyond_libzmq  # brokerless's own table
def test_matching_looks_at_each_octet_a_bounded_number_of_times():
    """Topics of 4,000 lengths, none a prefix of the message: matching a 4 KiB message used to
    slice and hash every length up to its own (8 MB); now at most a few times its length."""
    from brokerless.patterns.trie import SubscriptionTable

    table = SubscriptionTable()
    for n in range(1, LENGTHS + 1):
        table.add(b"q" * n, "hostile")
    table.add(b"x" * 10 + b"y", "good")
    Counted.looked = 0
    assert list(table.match(Counted(b"x" * 4096))) == []
    assert Counted.looked <= 2 * 4096, Counted.looked
    Counted.looked = 0
    assert list(table.match(Counted(b"x" * 10 + b"y" * 4086))) == ["good"]
    assert Counted.looked <= 2 * 4096, Counted.looked


@pytest.mark.beyond_libzmq  # brokerless's own table
@pytest.mark.parametrize("many_lengths", [False, True], ids=["by_length", "radix"])
def test_the_table_matches_what_a_prefix_test_matches(many_lengths):
    """Random subscriptions and cancellations over a small alphabet (so topics share prefixes,
    split and merge tree edges), checked against ``data.startswith(topic)`` after every step."""
    from brokerless.patterns.trie import SubscriptionTable

    rng = random.Random(7)
    table = SubscriptionTable()
    expected: dict[bytes, set[str]] = {}
    if many_lengths:  # past the length budget: the table matches through its radix tree
        for n in range(100, 200):
            table.add(b"z" * n, "long")
            expected.setdefault(b"z" * n, set()).add("long")
    messages = [bytes(rng.choices(b"ab", k=rng.randrange(12))) for _ in range(40)]
    for _ in range(600):
        topic = bytes(rng.choices(b"ab", k=rng.randrange(8)))
        pipe = rng.choice("pqr")
        if rng.random() < 0.6:
            table.add(topic, pipe)
            expected.setdefault(topic, set()).add(pipe)
        else:
            table.rm(topic, pipe)
            expected.get(topic, set()).discard(pipe)
        for data in [*messages, b"z" * 150 + b"a"]:
            want = set().union(*(p for t, p in expected.items() if data.startswith(t)))
            assert set(table.match(data)) == want, (data, topic)


def test_a_publisher_with_a_hostile_subscriber_delivers_by_prefix(make):
    """A raw subscriber asks for 4,000 topics of as many lengths (all of them prefixes of a
    message the test publishes), a good SUB for two topics: each gets exactly its matches."""
    pub = make(zmq.PUB, SNDHWM=0)
    pub.bind("tcp://127.0.0.1:*")
    port = int(pub.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1])
    good = make(zmq.SUB, RCVHWM=0)
    good.setsockopt(zmq.SUBSCRIBE, b"news.")
    good.setsockopt(zmq.SUBSCRIBE, b"n")
    good.connect(f"tcp://127.0.0.1:{port}")
    long_topic = b"q" * LENGTHS
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as raw:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        handshake(raw, b"SUB")
        subscriptions = b"".join(
            frame(b"\x09SUBSCRIBE" + long_topic[:n], command=True) for n in range(1, LENGTHS + 1)
        )
        sender = threading.Thread(target=raw.sendall, args=(subscriptions,))
        sender.start()  # the PUB takes subscriptions as it sends: keep it sending meanwhile
        while sender.is_alive() or not good.poll(0):
            pub.send(b"news.sync")
            sender.join(0.01)
        sender.join()
        # the last subscription is in once a message only it matches reaches the raw peer
        while True:
            pub.send(long_topic)
            raw_got = read_exact(raw, 9)
            assert raw_got[0] == 0x02, raw_got
            size = int.from_bytes(raw_got[1:], "big")
            if read_exact(raw, size) == long_topic:
                break
        for message in (b"x" * 4096, b"news.today", b"q" * 10, b"nq", long_topic):
            pub.send(message)
        pub.send(b"news.end")
        got = []
        while not got or got[-1] != b"news.end":
            message = recv_within(good, int(DEADLINE * 1000))
            if message != b"news.sync":  # (the good SUB may still be receiving those)
                got.append(message)
        assert got == [b"news.today", b"nq", b"news.end"]
