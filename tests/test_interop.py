"""Interoperability with real libzmq (through pyzmq) over tcp:// and ipc://.

Every valid socket pair runs with brokerless on either end of it, binding and connecting, over
both transports: one side is a brokerless socket, the other a libzmq socket in its own
``libzmq.Context()``.  The payloads cover multipart messages, empty frames, the short/long frame
boundary (255/256 octets) and bodies above 64 KiB; subscriptions and cancellations cross in both
directions; routing ids set on one side reach the ROUTER on the other; and ZMTP heartbeats set
on either side keep a live connection up.

Rules kept here: no sleeping (waits are bounded polls), and a libzmq sender is never closed
before the receiver has everything (libzmq 4.3.5 can lose the tail of an ipc stream otherwise).

Under ``BROKERLESS_TEST_AGAINST=pyzmq`` both ends are libzmq, which checks the tests themselves.
"""

from __future__ import annotations

import itertools
import time

import pytest
import zmq as libzmq
from zmq.utils.monitor import recv_monitor_message

import brokerless as zmq

DEADLINE = 5.0  # seconds any wait below may take before the test fails
TIMEOUT_MS = 5000  # RCVTIMEO/SNDTIMEO of every socket

_names = itertools.count()

# Payloads: single and multipart, empty frames, 255/256 octets (the short/long frame boundary),
# above 64 KiB, and one of 1 MiB (written by the kernel in several pieces).
PAYLOADS: list[list[bytes]] = [
    [b"hello"],
    [b"multi", b"part", b"message"],
    [b""],
    [b"", b"", b""],
    [b"a" * 255],
    [b"b" * 256],
    [b"c" * 300, b"d"],
    [bytes(range(256)) * 300],  # 76,800 octets
    [b"head", b"e" * 70_000, b"", b"tail"],
    [b"f" * (1 << 20)],
]


def _reply_to(msg: list[bytes]) -> list[bytes]:
    """A reply that differs from the request, so echoes are told apart."""
    return [b"re:" + part[:16] for part in reversed(msg)]


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture
def bmake(make):
    """brokerless socket factory (conftest's ``make``) with this module's timeouts."""

    def factory(kind, **options):
        return make(kind, RCVTIMEO=TIMEOUT_MS, SNDTIMEO=TIMEOUT_MS, **options)

    return factory


@pytest.fixture
def link(bmake, lmake, tmp_path):
    """``link(a_kind, b_kind, transport, brokerless=..., binder=...)`` -> ``(a, b)`` connected.

    ``brokerless`` and ``binder`` name which side ("a" or "b") is the brokerless socket and
    which binds; the other side is libzmq / connects.  ``a_opts``/``b_opts`` are set before.
    """

    def build(a_kind, b_kind, transport, *, brokerless, binder, a_opts=None, b_opts=None):
        a = (bmake if brokerless == "a" else lmake)(a_kind, **(a_opts or {}))
        b = (bmake if brokerless == "b" else lmake)(b_kind, **(b_opts or {}))
        server, client = (a, b) if binder == "a" else (b, a)
        server.bind(_bind_address(transport, tmp_path))
        client.connect(server.getsockopt(libzmq.LAST_ENDPOINT).decode())
        return a, b

    return build


def _bind_address(transport: str, tmp_path) -> str:
    if transport == "tcp":
        return "tcp://127.0.0.1:*"
    return f"ipc://{tmp_path}/s{next(_names)}"


# -- helpers -------------------------------------------------------------------------------------


def recv(sock, timeout_ms: int = TIMEOUT_MS) -> list[bytes]:
    """One whole message, or the test fails (never hangs)."""
    if not sock.poll(timeout_ms, libzmq.POLLIN):
        raise AssertionError(f"no message within {timeout_ms} ms on {sock!r}")
    return sock.recv_multipart()


def assert_nothing(sock, timeout_ms: int = 0) -> None:
    if sock.poll(timeout_ms, libzmq.POLLIN):
        raise AssertionError(f"unexpected message {sock.recv_multipart()!r} on {sock!r}")


def send_when_routable(sock, msg: list[bytes]) -> None:
    """Send from a ROUTER_MANDATORY router, retrying EHOSTUNREACH until the peer is known."""
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            sock.send_multipart(msg)
            return
        except (zmq.ZMQError, libzmq.ZMQError) as exc:
            if exc.errno != libzmq.EHOSTUNREACH or time.monotonic() > deadline:
                raise
        sock.poll(10, libzmq.POLLIN)  # a bounded pause: nothing can arrive before we send


def recv_notification(xpub, sub) -> list[bytes]:
    """The next subscription message at ``xpub``.

    A libzmq socket attaches a connection that it accepted only when the application next uses
    the socket, and only then sends its subscriptions: so ``sub`` is polled while waiting.
    """
    deadline = time.monotonic() + DEADLINE
    while not xpub.poll(10, libzmq.POLLIN):
        if time.monotonic() > deadline:
            raise AssertionError(f"no subscription message reached {xpub!r}")
        sub.poll(0, libzmq.POLLIN)
    return xpub.recv_multipart()


def kind_of(sock) -> int:
    return sock.getsockopt(libzmq.TYPE)


def subscribe(sock, topic: bytes) -> None:
    if kind_of(sock) == libzmq.XSUB:
        sock.send(b"\x01" + topic)
    else:
        sock.setsockopt(libzmq.SUBSCRIBE, topic)


def unsubscribe(sock, topic: bytes) -> None:
    if kind_of(sock) == libzmq.XSUB:
        sock.send(b"\x00" + topic)
    else:
        sock.setsockopt(libzmq.UNSUBSCRIBE, topic)


def until_flowing(pub, sub, topic: bytes, noise: bytes | None = None):
    """Publish ``topic`` probes (each after one ``noise`` message, if given) until one reaches
    ``sub``; then publish an end marker and read up to it.

    Returns ``(before, after)``: the messages other than probes that ``sub`` received before the
    first probe, and after it (up to the end marker).  Messages travel in order, so everything
    published after the end marker is subject to every subscription change ``sub`` made before
    its first probe arrived.
    """
    probe = topic + b"\xfeprobe"
    end = topic + b"\xfeend"
    before: list[list[bytes]] = []
    deadline = time.monotonic() + DEADLINE
    while True:
        if time.monotonic() > deadline:
            raise AssertionError(f"subscription to {topic!r} never reached the publisher")
        if noise is not None:
            pub.send(noise)
        pub.send(probe)
        if sub.poll(20, libzmq.POLLIN):
            msg = sub.recv_multipart()
            if msg == [probe]:
                break
            before.append(msg)
    pub.send(end)
    after: list[list[bytes]] = []
    while (msg := recv(sub)) != [end]:
        if msg != [probe]:
            after.append(msg)
    return before, after


# -- the pairs -----------------------------------------------------------------------------------


def exchange_both_ways(a, b) -> None:
    """PAIR/PAIR and DEALER/DEALER: every payload a -> b, then b -> a."""
    for msg in PAYLOADS:
        a.send_multipart(msg)
    for msg in PAYLOADS:
        assert recv(b) == msg
    for msg in PAYLOADS:
        b.send_multipart(msg)
    for msg in PAYLOADS:
        assert recv(a) == msg


def push_pull(push, pull) -> None:
    for msg in PAYLOADS:
        push.send_multipart(msg)
    for msg in PAYLOADS:
        assert recv(pull) == msg


def publish(pub, sub) -> None:
    subscribe(sub, b"")
    if kind_of(pub) == libzmq.XPUB:
        assert recv_notification(pub, sub) == [b"\x01"]
    before, after = until_flowing(pub, sub, b"")
    assert before == after == []
    for msg in PAYLOADS:
        pub.send_multipart(msg)
    for msg in PAYLOADS:
        assert recv(sub) == msg


def req_rep(req, rep) -> None:
    for msg in PAYLOADS:
        req.send_multipart(msg)
        assert recv(rep) == msg
        rep.send_multipart(_reply_to(msg))
        assert recv(req) == _reply_to(msg)


def req_router(req, router) -> None:
    for msg in PAYLOADS:
        req.send_multipart(msg)
        assert recv(router) == [b"req-1", b"", *msg]
        router.send_multipart([b"req-1", b"", *_reply_to(msg)])
        assert recv(req) == _reply_to(msg)


def dealer_rep(dealer, rep) -> None:
    for msg in PAYLOADS:
        dealer.send_multipart([b"", *msg])
        assert recv(rep) == msg
        rep.send_multipart(_reply_to(msg))
        assert recv(dealer) == [b"", *_reply_to(msg)]


def dealer_router(dealer, router) -> None:
    for msg in PAYLOADS:
        dealer.send_multipart(msg)
        assert recv(router) == [b"dealer-1", *msg]
    for msg in PAYLOADS:
        router.send_multipart([b"dealer-1", *_reply_to(msg)])
        assert recv(dealer) == _reply_to(msg)


def router_router(a, b) -> None:
    send_when_routable(a, [b"router-b", b"hello"])
    assert recv(b) == [b"router-a", b"hello"]
    for msg in PAYLOADS:
        a.send_multipart([b"router-b", *msg])
        assert recv(b) == [b"router-a", *msg]
        b.send_multipart([b"router-a", *_reply_to(msg)])
        assert recv(a) == [b"router-b", *_reply_to(msg)]


_MANDATORY = {"ROUTER_MANDATORY": 1}
PAIRS = {
    # name: (a kind, b kind, conversation, a options, b options)
    "PAIR-PAIR": (libzmq.PAIR, libzmq.PAIR, exchange_both_ways, {}, {}),
    "PUB-SUB": (libzmq.PUB, libzmq.SUB, publish, {}, {}),
    "XPUB-XSUB": (libzmq.XPUB, libzmq.XSUB, publish, {}, {}),
    "PUB-XSUB": (libzmq.PUB, libzmq.XSUB, publish, {}, {}),
    "XPUB-SUB": (libzmq.XPUB, libzmq.SUB, publish, {}, {}),
    "REQ-REP": (libzmq.REQ, libzmq.REP, req_rep, {}, {}),
    "REQ-ROUTER": (libzmq.REQ, libzmq.ROUTER, req_router, {"ROUTING_ID": b"req-1"}, {}),
    "DEALER-REP": (libzmq.DEALER, libzmq.REP, dealer_rep, {}, {}),
    "DEALER-ROUTER": (
        libzmq.DEALER, libzmq.ROUTER, dealer_router, {"ROUTING_ID": b"dealer-1"}, {}
    ),
    "DEALER-DEALER": (libzmq.DEALER, libzmq.DEALER, exchange_both_ways, {}, {}),
    "ROUTER-ROUTER": (
        libzmq.ROUTER,
        libzmq.ROUTER,
        router_router,
        {"ROUTING_ID": b"router-a", **_MANDATORY},
        {"ROUTING_ID": b"router-b", **_MANDATORY},
    ),
    "PUSH-PULL": (libzmq.PUSH, libzmq.PULL, push_pull, {}, {}),
}  # fmt: skip

_KIND_NAMES = {
    libzmq.PAIR: "PAIR", libzmq.PUB: "PUB", libzmq.SUB: "SUB", libzmq.XPUB: "XPUB",
    libzmq.XSUB: "XSUB", libzmq.REQ: "REQ", libzmq.REP: "REP", libzmq.DEALER: "DEALER",
    libzmq.ROUTER: "ROUTER", libzmq.PUSH: "PUSH", libzmq.PULL: "PULL",
}  # fmt: skip


def _sides(a_kind, b_kind):
    """(brokerless side, binding side, id) for every arrangement of one pair."""
    kinds = {"a": _KIND_NAMES[a_kind], "b": _KIND_NAMES[b_kind]}
    for brokerless in ("a",) if a_kind == b_kind else ("a", "b"):
        for binder in ("a", "b"):
            who = "" if a_kind == b_kind else f"bl={kinds[brokerless]}-"
            role = "bl_binds" if brokerless == binder else "bl_connects"
            yield brokerless, binder, who + role


def _pair_cases():
    for name, (a_kind, b_kind, *_rest) in PAIRS.items():
        for transport in ("tcp", "ipc"):
            for brokerless, binder, sid in _sides(a_kind, b_kind):
                yield pytest.param(
                    name, transport, brokerless, binder, id=f"{name}-{transport}-{sid}"
                )


@pytest.mark.parametrize(("pair", "transport", "brokerless", "binder"), list(_pair_cases()))
def test_pair_exchanges_every_payload(link, pair, transport, brokerless, binder):
    a_kind, b_kind, conversation, a_opts, b_opts = PAIRS[pair]
    a, b = link(
        a_kind,
        b_kind,
        transport,
        brokerless=brokerless,
        binder=binder,
        a_opts=a_opts,
        b_opts=b_opts,
    )
    conversation(a, b)


# -- subscriptions -------------------------------------------------------------------------------


def _pubsub_cases():
    for pub_kind, sub_kind in (
        (libzmq.PUB, libzmq.SUB),
        (libzmq.PUB, libzmq.XSUB),
        (libzmq.XPUB, libzmq.SUB),
        (libzmq.XPUB, libzmq.XSUB),
    ):
        for transport in ("tcp", "ipc"):
            for brokerless, binder, sid in _sides(pub_kind, sub_kind):
                name = f"{_KIND_NAMES[pub_kind]}-{_KIND_NAMES[sub_kind]}"
                yield pytest.param(
                    pub_kind, sub_kind, transport, brokerless, binder,
                    id=f"{name}-{transport}-{sid}",
                )  # fmt: skip


@pytest.mark.parametrize(
    ("pub_kind", "sub_kind", "transport", "brokerless", "binder"), list(_pubsub_cases())
)
def test_subscribe_and_unsubscribe(link, pub_kind, sub_kind, transport, brokerless, binder):
    """The publisher sends a topic only while it is subscribed: against an XSUB (which does not
    filter what it receives) this shows the publisher itself stops; an XPUB sees the
    ``\\x01topic``/``\\x00topic`` messages."""
    pub, sub = link(pub_kind, sub_kind, transport, brokerless=brokerless, binder=binder)
    is_xpub = pub_kind == libzmq.XPUB

    subscribe(sub, b"A")
    if is_xpub:
        assert recv_notification(pub, sub) == [b"\x01A"]
    # B is not subscribed: the publisher must drop it, before and after A flows.
    before, after = until_flowing(pub, sub, b"A", noise=b"B-early")
    assert before == after == []

    unsubscribe(sub, b"A")
    subscribe(sub, b"B")
    if is_xpub:
        assert recv_notification(pub, sub) == [b"\x00A"]
        assert recv_notification(pub, sub) == [b"\x01B"]
    # A may still pass until the publisher has the cancel, which travels just before the
    # subscription to B: once B flows, A is cut off.
    before, after = until_flowing(pub, sub, b"B", noise=b"A-late")
    assert all(msg == [b"A-late"] for msg in before)
    assert after == []
    pub.send(b"A-after")
    pub.send(b"B-last")
    assert recv(sub) == [b"B-last"]
    if is_xpub:
        assert_nothing(pub)


# -- routing ids ---------------------------------------------------------------------------------


def _router_cases():
    for transport in ("tcp", "ipc"):
        for brokerless, binder, sid in _sides(libzmq.DEALER, libzmq.ROUTER):
            yield pytest.param(transport, brokerless, binder, id=f"{transport}-{sid}")


@pytest.mark.parametrize(("transport", "brokerless", "binder"), list(_router_cases()))
def test_router_generates_ids_for_anonymous_peers(
    bmake, lmake, tmp_path, transport, brokerless, binder
):
    """Two DEALERs without ROUTING_ID: the ROUTER gives each its own id, and replies addressed
    to those ids reach the right DEALER."""
    router_make, dealer_make = (lmake, bmake) if brokerless == "a" else (bmake, lmake)
    router = router_make(libzmq.ROUTER)
    dealers = [dealer_make(libzmq.DEALER), dealer_make(libzmq.DEALER)]
    if binder == "b":  # the ROUTER binds
        router.bind(_bind_address(transport, tmp_path))
        address = router.getsockopt(libzmq.LAST_ENDPOINT).decode()
        for dealer in dealers:
            dealer.connect(address)
    else:  # each DEALER binds and the ROUTER connects to both
        for dealer in dealers:
            dealer.bind(_bind_address(transport, tmp_path))
            router.connect(dealer.getsockopt(libzmq.LAST_ENDPOINT).decode())

    ids = {}
    for n, dealer in enumerate(dealers):
        dealer.send_multipart([b"from %d" % n])
    for _ in dealers:
        routing_id, body = recv(router)
        assert routing_id, "the ROUTER must give an anonymous peer a non-empty id"
        ids[body] = routing_id
    assert len(set(ids.values())) == 2
    for n, dealer in enumerate(dealers):
        router.send_multipart([ids[b"from %d" % n], b"to %d" % n])
        assert recv(dealer) == [b"to %d" % n]


# -- heartbeats ----------------------------------------------------------------------------------

HEARTBEATS = {"HEARTBEAT_IVL": 50, "HEARTBEAT_TIMEOUT": 200, "HEARTBEAT_TTL": 300}


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
@pytest.mark.parametrize("role", ["bl_binds", "bl_connects"])
@pytest.mark.parametrize("heartbeats_on", ["libzmq", "brokerless", "both"])
def test_heartbeats_keep_a_live_connection_up(
    bmake, lmake, tmp_path, transport, role, heartbeats_on
):
    """With 50 ms heartbeats and a 200 ms timeout, an idle connection survives many intervals:
    each side's monitor sees one handshake and no disconnection, and messages still flow."""
    ours = bmake(libzmq.PAIR, **(HEARTBEATS if heartbeats_on != "libzmq" else {}))
    theirs = lmake(libzmq.PAIR, **(HEARTBEATS if heartbeats_on != "brokerless" else {}))
    monitors = {"libzmq": theirs.get_monitor_socket(), "brokerless": ours.get_monitor_socket()}
    server, client = (ours, theirs) if role == "bl_binds" else (theirs, ours)
    server.bind(_bind_address(transport, tmp_path))
    client.connect(server.getsockopt(libzmq.LAST_ENDPOINT).decode())

    events: dict[str, list[int]] = {side: [] for side in monitors}

    def watch(ms: int) -> None:
        """Collect both sides' connection events for ``ms`` milliseconds (a bounded wait)."""
        end = time.monotonic() + ms / 1000
        while True:
            for side, monitor in monitors.items():
                while monitor.poll(0, libzmq.POLLIN):
                    events[side].append(recv_monitor_message(monitor)["event"])
            if time.monotonic() >= end:
                return
            monitors["libzmq"].poll(10, libzmq.POLLIN)

    ours.send(b"ping-1")
    assert recv(theirs) == [b"ping-1"]
    theirs.send(b"pong-1")
    assert recv(ours) == [b"pong-1"]
    watch(500)  # ten heartbeat intervals, more than twice the timeout, with no messages
    ours.send(b"ping-2")
    assert recv(theirs) == [b"ping-2"]
    theirs.send(b"pong-2")
    assert recv(ours) == [b"pong-2"]
    watch(0)

    for side, seen in events.items():
        assert seen.count(libzmq.EVENT_HANDSHAKE_SUCCEEDED) == 1, (side, seen)
        assert libzmq.EVENT_DISCONNECTED not in seen, (side, seen)
    theirs.disable_monitor()
    ours.disable_monitor()


@pytest.mark.parametrize(("client", "server"), [("brokerless", "libzmq"), ("libzmq", "brokerless")])
def test_a_connection_from_a_source_address_comes_from_it(client, server):
    """zmq_tcp(7)'s ``tcp://source;address``: the connection's socket is bound to the source
    (here 127.0.0.2, any port) first, so the peer sees that address; brokerless refused the
    endpoint (EINVAL)."""
    lib = {"brokerless": zmq, "libzmq": libzmq}
    contexts = [lib[server].Context(), lib[client].Context()]
    try:
        router = contexts[0].socket(lib[server].ROUTER)
        router.rcvtimeo = 5000
        port = router.bind_to_random_port("tcp://127.0.0.1")
        dealer = contexts[1].socket(lib[client].DEALER)
        where = f"tcp://127.0.0.2:0;127.0.0.1:{port}"
        dealer.connect(where)
        assert dealer.last_endpoint == where.encode()
        dealer.send(b"from the source")
        *_, body = router.recv_multipart(copy=False)
        assert (body.bytes, body.get("Peer-Address")) == (b"from the source", "127.0.0.2")
    finally:
        for ctx in contexts:
            ctx.destroy(linger=0)
