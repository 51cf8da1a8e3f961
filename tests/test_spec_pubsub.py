"""PUB, SUB, XPUB and XSUB: filtering, subscription forwarding and the XPUB/XSUB pair.

Modelled on libzmq's tests/test_pubsub.cpp, test_sub_forward.cpp, test_pub_invert_matching.cpp,
test_xpub_topic.cpp and the user-message case of test_xpub_manual.cpp.

Timing: a SUB's subscription travels to its publisher asynchronously (libzmq applies it when the
publisher next processes commands, in practice on a later send), so a test never publishes
straight after subscribing.  ``fence`` below publishes probes until the subscribers see them; an
XPUB instead hands the subscription to the application, and once the XPUB has produced the
``b"\\x01topic"`` notification the subscription is in force there.
"""

from __future__ import annotations

import itertools
import time

import pytest

import brokerless as zmq

from .helpers import bind, recv_within
from .ports import unbound_address

DEADLINE = 5.0  # seconds any wait below may take before the test fails
SILENCE_MS = 100  # how long "nothing arrives" is watched, where no fence can prove it

_fence_ids = itertools.count()


def _subscribe(sock, topic: bytes) -> None:
    """Subscribe a SUB (socket option) or an XSUB (subscription message) to ``topic``."""
    if sock.getsockopt(zmq.TYPE) == zmq.XSUB:
        sock.send(b"\x01" + topic)
    else:
        sock.setsockopt(zmq.SUBSCRIBE, topic)


def _is_probe(msg: list[bytes]) -> bool:
    return len(msg) == 1 and msg[0].startswith(b"\xfefence-")


def fence(pub, *subs) -> list[list[list[bytes]]]:
    """Wait until every earlier (un)subscription of ``subs`` is in force at ``pub``.

    Each subscriber subscribes to a fresh fence topic and ``pub`` publishes probes on those
    topics until every subscriber has received one.  A subscriber's subscriptions travel in
    order, so once its fence subscription works, everything it (un)subscribed before does too;
    and messages travel in order, so everything ``pub`` sent before the last probe has arrived.

    Returns, for each subscriber, the messages (multipart lists, probes removed) it received
    before the last probe.
    """
    topics = []
    for sub in subs:
        topic = b"\xfefence-%d/" % next(_fence_ids)
        _subscribe(sub, topic)
        topics.append(topic)
    received: list[list[list[bytes]]] = [[] for _ in subs]
    own_seen = [0] * len(subs)  # sequence number of the latest own probe each subscriber saw

    def take(i: int, msg: list[bytes]) -> None:
        if not _is_probe(msg):
            received[i].append(msg)
        elif msg[0].startswith(topics[i]):
            own_seen[i] = int(msg[0][len(topics[i]) :])

    end = time.monotonic() + DEADLINE
    seq = 0
    while 0 in own_seen:
        if time.monotonic() > end:
            raise AssertionError("subscription never reached the publisher")
        seq += 1
        for topic in topics:
            pub.send(topic + b"%d" % seq)
        for i, sub in enumerate(subs):
            timeout = 10
            while sub.poll(timeout, zmq.POLLIN):
                timeout = 0
                take(i, sub.recv_multipart())
    # Everything up to the last probe is on its way: read each subscriber up to it.
    for i, sub in enumerate(subs):
        while own_seen[i] != seq:
            take(i, recv_within(sub, int(DEADLINE * 1000), multipart=True))
    return received


def notifications_until_fence(xpub, sub) -> list[bytes]:
    """The notifications ``xpub`` delivers for ``sub`` before a fresh fence subscription of it."""
    topic = b"\xfefence-%d" % next(_fence_ids)
    _subscribe(sub, topic)
    got = []
    while (msg := recv_within(xpub, int(DEADLINE * 1000))) != b"\x01" + topic:
        got.append(msg)
    return got


@pytest.fixture
def pub_sub(make, endpoint):
    """A bound PUB and a SUB connected to it (no subscriptions yet)."""
    pub = make(zmq.PUB)
    addr = bind(pub, endpoint())
    sub = make(zmq.SUB)
    sub.connect(addr)
    return pub, sub


def send_all(sock, *messages) -> None:
    for msg in messages:
        if isinstance(msg, list):
            sock.send_multipart(msg)
        else:
            sock.send(msg)


# --- SUB filtering -----------------------------------------------------------------------------


def test_empty_subscription_receives_everything(pub_sub):
    pub, sub = pub_sub
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    fence(pub, sub)
    send_all(pub, b"test", b"", b"\x00\xff")
    [got] = fence(pub, sub)
    assert got == [[b"test"], [b""], [b"\x00\xff"]]


def test_subscription_is_a_prefix_match(pub_sub):
    pub, sub = pub_sub
    sub.setsockopt(zmq.SUBSCRIBE, b"ab")
    fence(pub, sub)
    send_all(pub, b"a", b"ab", b"abc", b"b", b"xab", b"AB")
    [got] = fence(pub, sub)
    assert got == [[b"ab"], [b"abc"]]


def test_several_subscriptions(pub_sub):
    pub, sub = pub_sub
    sub.setsockopt(zmq.SUBSCRIBE, b"news.")
    sub.setsockopt(zmq.SUBSCRIBE, b"weather.")
    fence(pub, sub)
    send_all(pub, b"news.1", b"sport.1", b"weather.1", b"news.2", b"new")
    [got] = fence(pub, sub)
    assert got == [[b"news.1"], [b"weather.1"], [b"news.2"]]


def test_nested_subscriptions_deliver_once(pub_sub):
    """A message matching several of a SUB's prefixes is delivered once."""
    pub, sub = pub_sub
    sub.setsockopt(zmq.SUBSCRIBE, b"a")
    sub.setsockopt(zmq.SUBSCRIBE, b"ab")
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    fence(pub, sub)
    pub.send(b"abc")
    [got] = fence(pub, sub)
    assert got == [[b"abc"]]


def test_without_subscription_nothing_arrives(pub_sub):
    pub, sub = pub_sub
    fence(pub, sub)  # subscribes to its fence topic only
    send_all(pub, b"", b"hello", b"\xfe")
    [got] = fence(pub, sub)
    assert got == []


def test_multipart_filtered_on_first_frame_and_delivered_whole(pub_sub):
    pub, sub = pub_sub
    sub.setsockopt(zmq.SUBSCRIBE, b"key")
    fence(pub, sub)
    send_all(
        pub,
        [b"key.1", b"body", b"more"],
        [b"other", b"key.2"],  # later frames are not matched
        [b"keyed", b""],
    )
    [got] = fence(pub, sub)
    assert got == [[b"key.1", b"body", b"more"], [b"keyed", b""]]


def test_subscriptions_are_counted(pub_sub):
    """Subscribing twice then unsubscribing once leaves the subscription in place."""
    pub, sub = pub_sub
    sub.setsockopt(zmq.SUBSCRIBE, b"a")
    sub.setsockopt(zmq.SUBSCRIBE, b"a")
    sub.setsockopt(zmq.UNSUBSCRIBE, b"a")
    fence(pub, sub)
    pub.send(b"a1")
    [got] = fence(pub, sub)
    assert got == [[b"a1"]]

    sub.setsockopt(zmq.UNSUBSCRIBE, b"a")
    fence(pub, sub)
    pub.send(b"a2")
    [got] = fence(pub, sub)
    assert got == []


def test_unsubscribe_stops_delivery(pub_sub):
    pub, sub = pub_sub
    sub.setsockopt(zmq.SUBSCRIBE, b"a")
    sub.setsockopt(zmq.SUBSCRIBE, b"b")
    fence(pub, sub)
    sub.setsockopt(zmq.UNSUBSCRIBE, b"a")
    fence(pub, sub)
    send_all(pub, b"a1", b"b1")
    [got] = fence(pub, sub)
    assert got == [[b"b1"]]


def test_unsubscribe_unknown_topic_is_harmless(pub_sub):
    pub, sub = pub_sub
    sub.setsockopt(zmq.SUBSCRIBE, b"a")
    sub.setsockopt(zmq.UNSUBSCRIBE, b"never-subscribed")
    sub.setsockopt(zmq.UNSUBSCRIBE, b"")
    fence(pub, sub)
    pub.send(b"a1")
    [got] = fence(pub, sub)
    assert got == [[b"a1"]]


def test_pub_fans_out_to_matching_subscribers(make, endpoint):
    pub = make(zmq.PUB)
    addr = bind(pub, endpoint())
    everything, only_a, only_b = make(zmq.SUB), make(zmq.SUB), make(zmq.SUB)
    for sub, topic in ((everything, b""), (only_a, b"a"), (only_b, b"b")):
        sub.connect(addr)
        sub.setsockopt(zmq.SUBSCRIBE, topic)
    fence(pub, everything, only_a, only_b)
    send_all(pub, b"a1", b"b1", b"c1", b"a2")
    got = fence(pub, everything, only_a, only_b)
    assert got == [
        [[b"a1"], [b"b1"], [b"c1"], [b"a2"]],
        [[b"a1"], [b"a2"]],
        [[b"b1"]],
    ]


@pytest.mark.parametrize("binder", ["pub", "sub"])
def test_subscription_made_before_connecting(make, endpoint, binder):
    """A subscription made before the connection exists is sent once the peers connect."""
    pub, sub = make(zmq.PUB), make(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"early")
    if binder == "pub":
        sub.connect(bind(pub, endpoint()))
    else:
        pub.connect(bind(sub, endpoint()))
    fence(pub, sub)
    send_all(pub, b"early1", b"late1")
    [got] = fence(pub, sub)
    assert got == [[b"early1"]]


def test_subscriber_connects_before_publisher_binds(make, endpoint):
    addr = unbound_address(endpoint())
    pub, sub = make(zmq.PUB), make(zmq.SUB)
    sub.connect(addr)
    sub.setsockopt(zmq.SUBSCRIBE, b"t")
    pub.bind(addr)
    fence(pub, sub)
    send_all(pub, b"t1", b"x1")
    [got] = fence(pub, sub)
    assert got == [[b"t1"]]


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
@pytest.mark.parametrize("kind", ["SUB", "XSUB"])
def test_subscriptions_survive_the_publisher_restarting(make, endpoint, kind):
    """A connecting subscriber sends its subscriptions again on every reconnection (libzmq's
    session hiccups the pipe and the SUB/XSUB resends them): a publisher that restarts at the
    same address -- a Jupyter kernel restarted under a client's iopub SUB -- gets them all."""
    addr = unbound_address(endpoint())
    sub = make(getattr(zmq, kind))
    _subscribe(sub, b"t")
    sub.connect(addr)
    first_life = zmq.Context()
    pub = first_life.socket(zmq.PUB)
    pub.bind(addr)
    fence(pub, sub)
    pub.close(linger=0)
    first_life.term()  # the address is free again once term() returns
    pub = make(zmq.PUB)
    pub.bind(addr)
    fence(pub, sub)
    send_all(pub, b"t1", b"x1")
    [got] = fence(pub, sub)
    assert got == [[b"t1"]]


def test_pub_cannot_receive(pub_sub):
    pub, _ = pub_sub
    with pytest.raises(zmq.ZMQError) as err:
        pub.recv(zmq.NOBLOCK)
    assert err.value.errno == zmq.ENOTSUP


def test_sub_cannot_send(pub_sub):
    _, sub = pub_sub
    with pytest.raises(zmq.ZMQError) as err:
        sub.send(b"x", zmq.NOBLOCK)
    assert err.value.errno == zmq.ENOTSUP


def test_pub_send_without_subscribers_does_not_block(make, endpoint):
    pub = make(zmq.PUB)
    bind(pub, endpoint())
    for i in range(5000):
        pub.send(b"%d" % i, zmq.NOBLOCK)


# --- XPUB --------------------------------------------------------------------------------------


@pytest.fixture
def xpub_sub(make, endpoint):
    """A bound XPUB and a SUB connected to it."""
    xpub = make(zmq.XPUB)
    addr = bind(xpub, endpoint())
    sub = make(zmq.SUB)
    sub.connect(addr)
    return xpub, sub


@pytest.mark.parametrize("topic", [b"A", b"", b"x" * 1000, b"\x00\x01\xff"])
def test_xpub_receives_subscribe_and_unsubscribe(xpub_sub, topic):
    xpub, sub = xpub_sub
    sub.setsockopt(zmq.SUBSCRIBE, topic)
    assert recv_within(xpub) == b"\x01" + topic
    sub.setsockopt(zmq.UNSUBSCRIBE, topic)
    assert recv_within(xpub) == b"\x00" + topic


def test_xpub_delivers_to_matching_subscribers(xpub_sub):
    xpub, sub = xpub_sub
    sub.setsockopt(zmq.SUBSCRIBE, b"a")
    assert recv_within(xpub) == b"\x01a"
    # Once the XPUB has produced the notification the subscription is in force there.
    send_all(xpub, b"b1", [b"a1", b"x"], b"a2")
    assert recv_within(sub, multipart=True) == [b"a1", b"x"]
    assert recv_within(sub) == b"a2"


def test_xpub_reports_unsubscribe_when_last_subscriber_leaves(make, endpoint):
    xpub = make(zmq.XPUB)
    addr = bind(xpub, endpoint())
    first, second = make(zmq.SUB), make(zmq.SUB)
    first.connect(addr)
    second.connect(addr)
    first.setsockopt(zmq.SUBSCRIBE, b"t")
    assert recv_within(xpub) == b"\x01t"
    second.setsockopt(zmq.SUBSCRIBE, b"t")
    assert notifications_until_fence(xpub, second) == []  # duplicate: not reported
    first.setsockopt(zmq.UNSUBSCRIBE, b"t")
    assert notifications_until_fence(xpub, first) == []  # second still subscribed
    second.setsockopt(zmq.UNSUBSCRIBE, b"t")
    assert recv_within(xpub) == b"\x00t"


def test_xpub_reports_unsubscribes_when_subscriber_closes(make, endpoint):
    xpub = make(zmq.XPUB)
    addr = bind(xpub, endpoint())
    sub = make(zmq.SUB)
    sub.connect(addr)
    for topic in (b"a", b"b", b"c"):
        sub.setsockopt(zmq.SUBSCRIBE, topic)
    sub.setsockopt(zmq.UNSUBSCRIBE, b"b")
    assert [recv_within(xpub) for _ in range(4)] == [b"\x01a", b"\x01b", b"\x01c", b"\x00b"]
    sub.close(linger=0)
    assert sorted(recv_within(xpub) for _ in range(2)) == [b"\x00a", b"\x00c"]


def test_xpub_passes_user_messages_from_xsub(make, endpoint):
    """XSUB traffic that is not a (un)subscription reaches the XPUB application as sent."""
    xpub = make(zmq.XPUB)
    addr = bind(xpub, endpoint())
    xsub = make(zmq.XSUB)
    xsub.connect(addr)
    xsub.send(b"\x02A\x00")
    xsub.send(b"plain")
    assert recv_within(xpub) == b"\x02A\x00"
    assert recv_within(xpub) == b"plain"


def test_xpub_recv_without_subscribers_would_block(make, endpoint):
    xpub = make(zmq.XPUB)
    bind(xpub, endpoint())
    with pytest.raises(zmq.Again):
        xpub.recv(zmq.NOBLOCK)


# --- XSUB --------------------------------------------------------------------------------------


@pytest.fixture
def pub_xsub(make, endpoint):
    """A bound PUB and an XSUB connected to it."""
    pub = make(zmq.PUB)
    addr = bind(pub, endpoint())
    xsub = make(zmq.XSUB)
    xsub.connect(addr)
    return pub, xsub


def test_xsub_subscription_message_reaches_pub(pub_xsub):
    pub, xsub = pub_xsub
    xsub.send(b"\x01a")
    fence(pub, xsub)
    send_all(pub, b"a1", b"b1", [b"a2", b"tail"])
    [got] = fence(pub, xsub)
    assert got == [[b"a1"], [b"a2", b"tail"]]


def test_xsub_unsubscription_message_reaches_pub(pub_xsub):
    pub, xsub = pub_xsub
    xsub.send(b"\x01a")
    xsub.send(b"\x01b")
    xsub.send(b"\x00a")
    fence(pub, xsub)
    send_all(pub, b"a1", b"b1")
    [got] = fence(pub, xsub)
    assert got == [[b"b1"]]


def test_xsub_subscription_reaches_xpub(make, endpoint):
    xpub = make(zmq.XPUB)
    addr = bind(xpub, endpoint())
    xsub = make(zmq.XSUB)
    xsub.connect(addr)
    xsub.send(b"\x01topic")
    assert recv_within(xpub) == b"\x01topic"
    xpub.send(b"topic!")
    assert recv_within(xsub) == b"topic!"
    xsub.send(b"\x00topic")
    assert recv_within(xpub) == b"\x00topic"


def test_xsub_subscription_made_before_connecting(make, endpoint):
    """An XSUB replays its subscriptions to a peer that connects later."""
    xpub = make(zmq.XPUB)
    addr = bind(xpub, endpoint())
    xsub = make(zmq.XSUB)
    xsub.send(b"\x01early")  # no peer yet: kept, not lost
    xsub.connect(addr)
    assert recv_within(xpub) == b"\x01early"


def test_xpub_xsub_proxy_forwards_subscriptions_and_messages(make, endpoint):
    """SUB -> XPUB | proxy | XSUB -> PUB, with the proxy loop written out by hand."""
    frontend = make(zmq.XSUB)  # faces the publisher
    backend = make(zmq.XPUB)  # faces the subscribers
    pub, sub = make(zmq.PUB), make(zmq.SUB)
    pub.connect(bind(frontend, endpoint()))
    sub.connect(bind(backend, endpoint()))

    sub.setsockopt(zmq.SUBSCRIBE, b"t")
    subscription = recv_within(backend)
    assert subscription == b"\x01t"
    frontend.send(subscription)

    # The subscription reaches the PUB asynchronously: probe through the proxy until it works.
    end = time.monotonic() + DEADLINE
    while not frontend.poll(10, zmq.POLLIN):
        assert time.monotonic() < end, "subscription never crossed the proxy"
        pub.send(b"t-probe")

    send_all(pub, [b"other", b"1"], [b"t1", b"body"])
    while (forwarded := recv_within(frontend, multipart=True)) == [b"t-probe"]:
        pass  # probes are not forwarded
    assert forwarded == [b"t1", b"body"]
    backend.send_multipart(forwarded)
    assert recv_within(sub, multipart=True) == [b"t1", b"body"]

    sub.setsockopt(zmq.UNSUBSCRIBE, b"t")
    assert recv_within(backend) == b"\x00t"


# --- INVERT_MATCHING ---------------------------------------------------------------------------


def test_invert_matching_delivers_what_does_not_match(make, endpoint):
    """Both ends invert: each SUB gets exactly the messages matching none of its prefixes.

    (libzmq's test uses a PUB and sleeps; an XPUB reports when subscriptions are in force.)
    """
    xpub = make(zmq.XPUB)
    xpub.setsockopt(zmq.INVERT_MATCHING, 1)
    addr = bind(xpub, endpoint())
    sub1, sub2 = make(zmq.SUB), make(zmq.SUB)
    for sub, prefix in ((sub1, b"prefi_x1"), (sub2, b"prefi_x2")):
        sub.setsockopt(zmq.INVERT_MATCHING, 1)
        assert sub.getsockopt(zmq.INVERT_MATCHING) == 1
        sub.connect(addr)
        sub.setsockopt(zmq.SUBSCRIBE, prefix)
    assert sorted(recv_within(xpub) for _ in range(2)) == [b"\x01prefi_x1", b"\x01prefi_x2"]

    send_all(xpub, b"prefi_x1 one", b"prefi_x2 two", b"neither")
    assert [recv_within(sub1) for _ in range(2)] == [b"prefi_x2 two", b"neither"]
    assert [recv_within(sub2) for _ in range(2)] == [b"prefi_x1 one", b"neither"]


def test_inverting_publisher_needs_inverting_subscribers(make, endpoint):
    """A plain SUB filters out everything an inverting publisher sends it."""
    xpub = make(zmq.XPUB)
    xpub.setsockopt(zmq.INVERT_MATCHING, 1)
    addr = bind(xpub, endpoint())
    plain, inverted = make(zmq.SUB), make(zmq.SUB)
    inverted.setsockopt(zmq.INVERT_MATCHING, 1)
    for sub in (plain, inverted):
        sub.connect(addr)
        sub.setsockopt(zmq.SUBSCRIBE, b"a")
    notifications = notifications_until_fence(xpub, plain)
    notifications += notifications_until_fence(xpub, inverted)
    assert notifications == [b"\x01a"]
    send_all(xpub, b"a1", b"b1")
    assert recv_within(inverted) == b"b1"
    assert not plain.poll(SILENCE_MS, zmq.POLLIN)


# --- beyond libzmq -----------------------------------------------------------------------------


@pytest.mark.beyond_libzmq
@pytest.mark.parametrize("kind", ["SUB", "XSUB"])
def test_subscription_reaches_peer_when_subscriber_binds(make, endpoint, kind):
    """A binding subscriber's subscription reaches a peer that connects later, unprompted.

    libzmq 4.3 attaches a connection to a *binding* socket only when that socket next processes
    commands (a call such as poll/recv/send on it), and a SUB/XSUB sends its subscriptions on
    attach.  So with the SUB or XSUB binding, the connecting XPUB/PUB sees nothing until the
    application happens to use the subscriber again (a PUB meanwhile drops everything).  With
    the publisher binding, or either side connecting before the other binds over inproc, the
    subscription arrives unprompted.  brokerless delivers it in every arrangement.
    """
    sub = make(getattr(zmq, kind))
    _subscribe(sub, b"t")
    addr = bind(sub, endpoint())
    xpub = make(zmq.XPUB)
    xpub.connect(addr)
    assert recv_within(xpub) == b"\x01t"


@pytest.mark.parametrize("module", ["brokerless", "libzmq"])
def test_a_manual_xpub_hears_a_leaving_subscriber_cancel_what_it_asked_for(module):
    """With XPUB_MANUAL, libzmq keeps what each subscriber asked for, granted or not, and
    reports it cancelled when the subscriber goes (in topic order); brokerless reported only
    the topics the application had granted."""
    import zmq as libzmq

    lib = zmq if module == "brokerless" else libzmq
    ctx = lib.Context()
    try:
        xpub = ctx.socket(lib.XPUB)
        xpub.setsockopt(lib.XPUB_MANUAL, 1)
        xpub.rcvtimeo = 5000
        port = xpub.bind_to_random_port("tcp://127.0.0.1")
        sub = ctx.socket(lib.SUB)
        sub.connect(f"tcp://127.0.0.1:{port}")
        sub.subscribe(b"k")
        sub.subscribe(b"j")
        got = [xpub.recv(), xpub.recv()]
        xpub.setsockopt(lib.SUBSCRIBE, b"k")  # only k is granted
        sub.unsubscribe(b"j")
        got.append(xpub.recv())
        sub.subscribe(b"z")
        got.append(xpub.recv())
        sub.close(linger=0)
        got += [xpub.recv(), xpub.recv()]
        assert got == [b"\x01k", b"\x01j", b"\x00j", b"\x01z", b"\x00k", b"\x00z"]
    finally:
        ctx.destroy(linger=0)


@pytest.mark.parametrize(
    ("sender", "receiver"),
    [
        ("brokerless", "brokerless"),
        ("brokerless", "libzmq"),
        ("libzmq", "brokerless"),
        ("libzmq", "libzmq"),
    ],
)
def test_subscriptions_sent_upstream_as_one_multipart_message_are_each_taken(sender, receiver):
    """An XSUB that sends several subscriptions as the frames of one message: libzmq takes each
    frame as a subscription (ONLY_FIRST_SUBSCRIBE is off), so the XPUB reports each and
    delivers what matches any; other multipart messages go up whole.  brokerless passed the
    message up whole and took none of its subscriptions -- and then none in a message that
    also had other frames (those topics' messages were never sent)."""
    import zmq as libzmq

    lib = {"brokerless": zmq, "libzmq": libzmq}
    contexts = []
    try:
        xpub_lib, xsub_lib = lib[receiver], lib[sender]
        contexts = [xpub_lib.Context(), xsub_lib.Context()]
        xpub = contexts[0].socket(xpub_lib.XPUB)
        xpub.rcvtimeo = 5000
        port = xpub.bind_to_random_port("tcp://127.0.0.1")
        xsub = contexts[1].socket(xsub_lib.XSUB)
        xsub.rcvtimeo = 5000
        xsub.connect(f"tcp://127.0.0.1:{port}")
        xsub.send_multipart([b"\x01one", b"\x01two"])
        xsub.send_multipart([b"hello", b"world"])
        # Mixed: libzmq takes the subscription in each, and one passed on ends a message.
        xsub.send_multipart([b"hello", b"\x01three"])
        xsub.send_multipart([b"\x01four", b"data"])
        assert [xpub.recv_multipart() for _ in range(6)] == [
            [b"\x01one"],
            [b"\x01two"],
            [b"hello", b"world"],
            [b"hello", b"\x01three"],
            [b"\x01four"],
            [b"data"],
        ]
        for msg in (b"twofold", b"nothing", b"onex", b"threes", b"four"):
            xpub.send(msg)
        assert [xsub.recv() for _ in range(4)] == [b"twofold", b"onex", b"threes", b"four"]
    finally:
        for ctx in contexts:
            ctx.destroy(linger=0)
