"""The ZMTP codec against real libzmq (through pyzmq) over plain TCP sockets on 127.0.0.1.

Each test drives one ``brokerless.zmtp.Connection`` by hand over a ``socket.socket`` and talks to
a pyzmq socket at the other end.  Everything is bounded: plain sockets are read through
``select`` with deadlines, pyzmq sockets have RCVTIMEO/SNDTIMEO and LINGER 0.
"""

from __future__ import annotations

import select
import socket
import time

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from brokerless.constants import SocketType as T
from brokerless.zmtp import (
    ERROR_STATE,
    TRAFFIC,
    Connection,
    HandshakeError,
    Ping,
    Pong,
    Ready,
)

pytestmark = pytest.mark.timeout(20)

TIMEOUT = 2.0  # seconds, for anything that should happen "at once"
EVENTS = (Ready, Ping, Pong)


class Peer:
    """A Connection over a plain TCP socket, pumped by hand (sends whatever the codec queues,
    e.g. PONGs, unless ``auto_flush`` is off)."""

    def __init__(self, sock: socket.socket, conn: Connection) -> None:
        self.sock = sock
        self.conn = conn
        self.inbox: list = []
        self.eof = False
        self.auto_flush = True
        self.raw = bytearray()  # everything the peer sent, for inspection
        sock.settimeout(TIMEOUT)

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def pump(self, timeout: float) -> None:
        """Read once (waiting at most ``timeout``) and feed the codec."""
        if self.auto_flush:
            self.flush()
        readable, _, _ = select.select([self.sock], [], [], max(timeout, 0))
        if not readable:
            return
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return
        self.raw += data
        self.inbox += self.conn.receive_data(data)
        if self.auto_flush:
            self.flush()

    def pump_for(self, seconds: float) -> None:
        """Keep the connection serviced for a while (answering PINGs) without waiting on it."""
        deadline = time.monotonic() + seconds
        while not self.eof and (left := deadline - time.monotonic()) > 0:
            self.pump(left)

    def until(self, done, timeout: float = TIMEOUT, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {what}; got {self.inbox!r}")
            if self.eof:
                raise AssertionError(f"peer closed while waiting for {what}; got {self.inbox!r}")
            self.pump(left)

    def handshake(self) -> Ready:
        self.until(lambda: self.conn.state is TRAFFIC, what="the handshake")
        ready = self.inbox.pop(0)
        assert isinstance(ready, Ready)
        return ready

    def messages(self, n: int, timeout: float = TIMEOUT) -> list:
        """The next ``n`` messages (events stay in the inbox)."""
        self.until(lambda: len(self._messages()) >= n, timeout, f"{n} messages")
        got = self._messages()[:n]
        for m in got:
            self.inbox.remove(m)
        return got

    def events(self, kind) -> list:
        return [e for e in self.inbox if isinstance(e, kind)]

    def _messages(self) -> list:
        return [m for m in self.inbox if not isinstance(m, EVENTS)]

    def send(self, *msgs) -> None:
        for m in msgs:
            self.conn.send_message(m)
        self.flush()

    def wait_closed(self, timeout: float = TIMEOUT) -> None:
        self.until(lambda: self.eof, timeout, "the peer to close the connection")


def as_parts(msg) -> list[bytes]:
    return msg if isinstance(msg, list) else [msg]


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture
def zctx():
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


@pytest.fixture
def zsock(zctx):
    """pyzmq socket factory with bounded blocking calls."""

    def make(kind, **options):
        sock = zctx.socket(kind)
        sock.linger = 0
        sock.rcvtimeo = int(TIMEOUT * 1000)
        sock.sndtimeo = int(TIMEOUT * 1000)
        for name, value in options.items():
            sock.setsockopt(getattr(zmq, name), value)
        return sock

    return make


@pytest.fixture
def monitor():
    """``monitor(zsocket)``: a monitor socket for a pyzmq socket, disabled after the test (a
    monitor left attached when its socket closes can stall the next socket's handshake)."""
    made = []

    def attach(zsocket):
        mon = zsocket.get_monitor_socket()
        made.append((zsocket, mon))
        return mon

    yield attach
    for zsocket, mon in made:
        zsocket.disable_monitor()
        mon.close(linger=0)


def next_event(mon, timeout: float = TIMEOUT, skip=(zmq.EVENT_LISTENING, zmq.EVENT_ACCEPTED)):
    """The next monitor event not in ``skip``, as its number."""
    deadline = time.monotonic() + timeout
    while mon.poll(max(0, int((deadline - time.monotonic()) * 1000))):
        event = recv_monitor_message(mon)["event"]
        if event not in skip:
            return event
    raise AssertionError("no monitor event within the timeout")


@pytest.fixture
def plain_sockets():
    made: list[socket.socket] = []
    yield made
    for s in made:
        s.close()


@pytest.fixture
def dial(plain_sockets):
    """Bind a pyzmq socket on 127.0.0.1 and connect a Peer running ``Connection(*args)``."""

    def connect(zsocket, socket_type: T, routing_id: bytes = b"", **kw) -> Peer:
        port = zsocket.bind_to_random_port("tcp://127.0.0.1")
        sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        plain_sockets.append(sock)
        return Peer(sock, Connection(socket_type, routing_id, **kw))

    return connect


@pytest.fixture
def accept(plain_sockets):
    """Listen on 127.0.0.1, have a pyzmq socket connect, and accept it as a Peer."""

    def serve(zsocket, socket_type: T, routing_id: bytes = b"", **kw) -> Peer:
        listener = socket.socket()
        plain_sockets.append(listener)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(TIMEOUT)
        zsocket.connect(f"tcp://127.0.0.1:{listener.getsockname()[1]}")
        sock, _ = listener.accept()
        plain_sockets.append(sock)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return Peer(sock, Connection(socket_type, routing_id, as_server=True, **kw))

    return serve


# -- our sender, libzmq receiver ---------------------------------------------------------------

VARIED = [
    b"hello",
    [b"multi", b"part", b"message"],
    b"",
    [b"", b""],
    [b"", b"after an empty delimiter"],
    b"x" * 255,
    b"y" * 256,
    [b"z" * 300, b"short", b"w" * 256],
    b"L" * (64 * 1024 + 1),
    [b"head", bytes(range(256)) * 400, b""],  # a 102400-octet middle part
]


def test_our_push_to_pyzmq_pull(zsock, dial):
    pull = zsock(zmq.PULL)
    peer = dial(pull, T.PUSH)
    ready = peer.handshake()
    assert ready.socket_type is T.PULL
    assert ready.minor_version == 1
    peer.send(*VARIED)
    assert [pull.recv_multipart() for _ in VARIED] == [as_parts(m) for m in VARIED]


def test_our_push_batches_through_sendmsg(zsock, dial):
    """``encode`` into one buffer list written with a single sendmsg, as the transport will."""
    pull = zsock(zmq.PULL)
    peer = dial(pull, T.PUSH)
    peer.handshake()
    peer.flush()
    out: list = []
    msgs = [b"%d" % i if i % 3 else [b"%d" % i, b"x" * (i % 300)] for i in range(1000)]
    for m in msgs:
        peer.conn.encode(out, m)
    for i in range(0, len(out), 512):  # IOV_MAX is 1024 on Linux
        group = out[i : i + 512]
        sent = peer.sock.sendmsg(group)
        if sent < sum(len(b) for b in group):  # a partial write: send the rest plainly
            peer.sock.sendall(b"".join(group)[sent:])
    assert [pull.recv_multipart() for _ in msgs] == [as_parts(m) for m in msgs]


def test_our_dealer_identity_reaches_pyzmq_router(zsock, dial):
    router = zsock(zmq.ROUTER)
    peer = dial(router, T.DEALER, b"our-dealer")
    assert peer.handshake().socket_type is T.ROUTER
    peer.send([b"", b"request"])
    assert router.recv_multipart() == [b"our-dealer", b"", b"request"]
    router.send_multipart([b"our-dealer", b"", b"reply"])
    assert peer.messages(1) == [[b"", b"reply"]]


# -- libzmq sender, our receiver -------------------------------------------------------------------


def test_pyzmq_push_to_our_pull(zsock, accept):
    push = zsock(zmq.PUSH)
    peer = accept(push, T.PULL)
    for m in VARIED:
        push.send_multipart(as_parts(m))
    ready = peer.handshake()
    assert ready.socket_type is T.PUSH
    assert ready.routing_id == b""
    assert peer.messages(len(VARIED)) == VARIED


def test_pyzmq_dealer_to_our_router(zsock, accept):
    dealer = zsock(zmq.DEALER, ROUTING_ID=b"dealer-7")
    peer = accept(dealer, T.ROUTER)
    dealer.send_multipart([b"", b"request"])
    dealer.send(b"one part")
    ready = peer.handshake()
    assert ready.socket_type is T.DEALER
    assert ready.routing_id == b"dealer-7"
    assert ready.metadata["identity"] == b"dealer-7"
    assert peer.messages(2) == [[b"", b"request"], b"one part"]
    peer.send([b"", b"reply"], b"y" * 70000)
    assert dealer.recv_multipart() == [b"", b"reply"]
    assert dealer.recv() == b"y" * 70000


def test_pyzmq_dealer_without_routing_id(zsock, accept):
    dealer = zsock(zmq.DEALER)
    peer = accept(dealer, T.ROUTER)
    ready = peer.handshake()
    assert ready.routing_id == b""


def test_pyzmq_req_to_our_rep(zsock, accept):
    req = zsock(zmq.REQ, ROUTING_ID=b"req-1")
    peer = accept(req, T.REP)
    req.send(b"question")
    ready = peer.handshake()
    assert ready.socket_type is T.REQ
    assert ready.routing_id == b"req-1"
    assert peer.messages(1) == [[b"", b"question"]]  # REQ adds the empty delimiter
    peer.send([b"", b"answer"])
    assert req.recv() == b"answer"
    req.send(b"again")
    assert peer.messages(1) == [[b"", b"again"]]


@pytest.mark.parametrize("ours", ["REQ", "DEALER", "ROUTER"])
def test_our_identity_is_libzmq_routing_id(zsock, dial, ours):
    """libzmq ROUTER learns our routing id from READY: it can address us by it."""
    router = zsock(zmq.ROUTER, ROUTER_MANDATORY=1)
    peer = dial(router, T[ours], b"our-" + ours.encode())
    peer.handshake()
    deadline = time.monotonic() + TIMEOUT
    while True:  # libzmq may finish its side of the handshake a moment after we do
        try:
            router.send_multipart([b"our-" + ours.encode(), b"", b"to you"])
            break
        except zmq.ZMQError as e:
            assert e.errno == zmq.EHOSTUNREACH and time.monotonic() < deadline
            peer.pump(0.01)
    assert peer.messages(1) == [[b"", b"to you"]]


def test_pyzmq_router_talks_to_our_req(zsock, dial):
    router = zsock(zmq.ROUTER)
    peer = dial(router, T.REQ, b"our-req")
    peer.handshake()
    peer.send([b"", b"hi"])
    assert router.recv_multipart() == [b"our-req", b"", b"hi"]
    router.send_multipart([b"our-req", b"", b"ho"])
    assert peer.messages(1) == [[b"", b"ho"]]


def test_pyzmq_dealer_to_our_rep(zsock, accept):
    dealer = zsock(zmq.DEALER)
    peer = accept(dealer, T.REP)
    dealer.send_multipart([b"", b"q"])
    assert peer.handshake().socket_type is T.DEALER
    assert peer.messages(1) == [[b"", b"q"]]
    peer.send([b"", b"a"])
    assert dealer.recv_multipart() == [b"", b"a"]


# -- publish-subscribe -----------------------------------------------------------------------------


def test_pyzmq_sub_to_our_xpub(zsock, accept):
    sub = zsock(zmq.SUB)
    peer = accept(sub, T.XPUB)
    sub.subscribe(b"topic")
    ready = peer.handshake()
    assert ready.socket_type is T.SUB
    assert peer.messages(1) == [b"\x01topic"]
    peer.send([b"topic", b"data"], b"other", b"topical")
    assert sub.recv_multipart() == [b"topic", b"data"]
    assert sub.recv() == b"topical"  # libzmq's SUB filters too: "other" is dropped
    sub.unsubscribe(b"topic")
    assert peer.messages(1) == [b"\x00topic"]
    sub.subscribe(b"")
    assert peer.messages(1) == [b"\x01"]


def test_pyzmq_xsub_to_our_xpub(zsock, accept):
    xsub = zsock(zmq.XSUB)
    peer = accept(xsub, T.XPUB)
    xsub.send(b"\x01abc")
    xsub.send(b"\x00abc")
    peer.handshake()
    assert peer.messages(2) == [b"\x01abc", b"\x00abc"]


def collect_until(peer: Peer, publish, stop, timeout: float = TIMEOUT) -> list:
    """Publish (``publish()``) and service ``peer`` in a loop until ``stop(messages)``; a PUB
    drops until it has processed the subscription, so the publishing is retried."""
    got: list = []
    deadline = time.monotonic() + timeout
    while not stop(got):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out publishing; got {got!r}")
        publish()
        peer.pump(0.02)
        got += [m for m in peer.inbox if not isinstance(m, EVENTS)]
        peer.inbox = [e for e in peer.inbox if isinstance(e, EVENTS)]
    return got


def test_our_sub_to_pyzmq_pub(zsock, dial):
    pub = zsock(zmq.PUB)
    peer = dial(pub, T.SUB)
    assert peer.handshake().minor_version == 1  # so SUBSCRIBE goes as a command
    peer.send(b"\x01news")

    def publish():
        pub.send_multipart([b"news", b"1"])
        pub.send(b"weather")

    got = collect_until(peer, publish, lambda got: got)
    assert all(m == [b"news", b"1"] for m in got)

    # CANCEL then SUBSCRIBE: once "later" arrives the CANCEL was processed too (one pipe, in
    # order), so nothing libzmq sends after the first "later" may be "news".
    peer.send(b"\x00news", b"\x01later")

    def publish_both():
        pub.send(b"news")
        pub.send(b"later")

    got = collect_until(peer, publish_both, lambda got: b"later" in got)
    publish_both()
    pub.send(b"later: end")
    got += collect_until(peer, lambda: None, lambda more: b"later: end" in more)
    after = got[got.index(b"later") :]
    assert b"news" not in after
    assert after[-1] == b"later: end"
    assert set(after) == {b"later", b"later: end"}


# -- heartbeats ------------------------------------------------------------------------------------


def test_pyzmq_heartbeats_are_answered(zsock, dial):
    pull = zsock(zmq.PULL, HEARTBEAT_IVL=50, HEARTBEAT_TIMEOUT=250, HEARTBEAT_TTL=2000)
    peer = dial(pull, T.PUSH)
    peer.handshake()
    # Stay quiet except for the automatic PONGs for twice libzmq's heartbeat timeout.
    peer.pump_for(0.6)
    pings = peer.events(Ping)
    assert len(pings) >= 3
    assert all(p.ttl == 20 and p.context == b"" for p in pings)  # TTL in deciseconds
    assert not peer.eof
    peer.send(b"still alive")
    assert pull.recv() == b"still alive"


def test_unanswered_heartbeats_close_the_connection(zsock, dial):
    """The control for the test above: without our PONGs libzmq gives up on us."""
    pull = zsock(zmq.PULL, HEARTBEAT_IVL=50, HEARTBEAT_TIMEOUT=250)
    start = time.monotonic()  # before the handshake: libzmq's clock starts at its own end of it
    peer = dial(pull, T.PUSH)
    peer.handshake()
    peer.auto_flush = False
    peer.wait_closed()
    assert time.monotonic() - start >= 0.2
    assert peer.events(Ping)


@pytest.mark.parametrize("context", [b"", b"ctx-1", b"0123456789abcdef"])
def test_our_ping_gets_a_pong_from_libzmq(zsock, dial, context):
    pull = zsock(zmq.PULL)
    peer = dial(pull, T.PUSH)
    peer.handshake()
    peer.conn.send_ping(0, context)
    peer.until(lambda: peer.events(Pong), what="PONG")
    assert peer.events(Pong) == [Pong(context)]


def test_our_ping_ttl_is_honoured_by_libzmq(zsock, dial):
    """A PING's TTL (tenths of a second, big-endian) makes libzmq close a silent connection."""
    pull = zsock(zmq.PULL)
    peer = dial(pull, T.PUSH)
    peer.handshake()
    start = time.monotonic()
    peer.conn.send_ping(3, b"ttl")
    peer.wait_closed()
    assert 0.25 <= time.monotonic() - start < TIMEOUT
    assert peer.events(Pong) == [Pong(b"ttl")]


# -- refusals --------------------------------------------------------------------------------------


def read_until_closed(sock: socket.socket, timeout: float = TIMEOUT) -> tuple[bytes, bool]:
    """Everything ``sock`` receives until EOF; (data, whether EOF came within the timeout)."""
    data = b""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([sock], [], [], left)
        if not readable:
            break
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def exchange_greetings(peer: Peer) -> bytes:
    """Exchange greetings (ours goes out in steps, as libzmq's does), reading no further than
    libzmq's; returns what our codec queued after its greeting (our READY), not sent."""
    sent = received = 0
    while received < 64:
        data = peer.conn.data_to_send()
        peer.sock.sendall(data)
        sent += len(data)
        chunk = peer.sock.recv(64 - received)  # bounded by the socket timeout
        assert chunk, "libzmq closed during the greeting"
        received += len(chunk)
        assert peer.conn.receive_data(chunk) == []
    data = peer.conn.data_to_send()  # the rest of our greeting, then our READY
    peer.sock.sendall(data[: 64 - sent])
    return data[64 - sent :]


def send_ready_first(peer: Peer) -> bytes:
    """Exchange greetings, take libzmq's READY off the wire, then send ours: we cannot refuse
    libzmq before it has judged us, and its READY is sent before ours reaches it.  Returns
    libzmq's READY, not yet fed to our codec."""
    ours = exchange_greetings(peer)
    header = recv_exact(peer.sock, 2)
    if header[0] & 0x02:
        header += recv_exact(peer.sock, 7)
    theirs = header + recv_exact(peer.sock, int.from_bytes(header[1:], "big"))
    peer.sock.sendall(ours)
    return theirs


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))  # bounded by the socket timeout
        assert chunk, f"connection closed after {len(data)} of {n} octets"
        data += chunk
    return data


# The RFC 37 table, written out (as in test_zmtp_codec.py) rather than taken from the code.
RFC37_PEERS = {
    "REQ": {"REP", "ROUTER"},
    "REP": {"REQ", "DEALER"},
    "DEALER": {"REP", "DEALER", "ROUTER"},
    "ROUTER": {"REQ", "DEALER", "ROUTER"},
    "PUB": {"SUB", "XSUB"},
    "XPUB": {"SUB", "XSUB"},
    "SUB": {"PUB", "XPUB"},
    "XSUB": {"PUB", "XPUB"},
    "PUSH": {"PULL"},
    "PULL": {"PUSH"},
    "PAIR": {"PAIR"},
}


@pytest.mark.parametrize("theirs", list(RFC37_PEERS))
@pytest.mark.parametrize("ours", list(RFC37_PEERS))
def test_socket_type_table_agrees_with_libzmq(zsock, dial, monitor, ours, theirs):
    zsocket = zsock(getattr(zmq, theirs))
    mon = monitor(zsocket)
    peer = dial(zsocket, T[ours], b"id")
    their_ready = send_ready_first(peer)
    if theirs in RFC37_PEERS[ours]:
        assert next_event(mon) == zmq.EVENT_HANDSHAKE_SUCCEEDED
        peer.inbox += peer.conn.receive_data(their_ready)
        assert peer.handshake().socket_type is T[theirs]
    else:
        rest, closed = read_until_closed(peer.sock)
        assert closed, "libzmq did not close the connection"
        assert next_event(mon) == zmq.EVENT_DISCONNECTED
        with pytest.raises(HandshakeError):
            peer.conn.receive_data(their_ready + rest)


def test_libzmq_refuses_a_wrong_socket_type(zsock, dial):
    """Our READY says PUB to a libzmq PUSH: libzmq closes the connection (without ERROR)."""
    push = zsock(zmq.PUSH)
    peer = dial(push, T.PUB)
    their_ready = send_ready_first(peer)
    rest, closed = read_until_closed(peer.sock)
    assert closed, "libzmq did not close the connection"
    assert their_ready == b"\x04\x1a\x05READY\x0bSocket-Type\x00\x00\x00\x04PUSH"
    assert rest == b""  # no ERROR
    with pytest.raises(HandshakeError, match="PUSH"):
        peer.conn.receive_data(their_ready)  # and we refuse its READY in turn
    assert peer.conn.state is ERROR_STATE


def test_we_refuse_a_wrong_socket_type_from_libzmq(zsock, accept):
    pub = zsock(zmq.PUB)
    peer = accept(pub, T.PULL)
    exchange_greetings(peer)  # our READY held back: libzmq must not refuse us first
    peer.auto_flush = False
    with pytest.raises(HandshakeError, match="PULL socket cannot talk to a PUB"):
        peer.until(lambda: False, what="a refusal")
    assert peer.conn.state is ERROR_STATE
    assert peer.conn.data_to_send().endswith(b"\x04\x1a\x05ERROR\x13Invalid socket type")


def test_libzmq_closes_on_a_frame_over_its_maxmsgsize(zsock, dial):
    """libzmq's MAXMSGSIZE limits each frame, as ours does; the limit itself is allowed."""
    pull = zsock(zmq.PULL, MAXMSGSIZE=1000)
    peer = dial(pull, T.PUSH)
    peer.handshake()
    peer.send([b"a" * 1000, b"b" * 1000])
    assert pull.recv_multipart() == [b"a" * 1000, b"b" * 1000]
    peer.send(b"c" * 1001)
    peer.wait_closed()
