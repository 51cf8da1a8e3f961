"""STREAM: raw tcp / ipc connections to peers that do not speak ZMTP.

Modelled on libzmq's doc for ZMQ_STREAM (zmq_socket) and its tests test_stream.cpp,
test_stream_disconnect.cpp and test_stream_empty.cpp: every message is ``[routing id, data]``;
with STREAM_NOTIFY (the default) a connection's opening and its end both show as ``[id, b""]``;
sending ``[id, b""]`` closes that connection; an unknown id is EHOSTUNREACH.

The peers are plain Python sockets (an HTTP-like exchange), libzmq's own STREAM (through
pyzmq), and a ZMTP socket whose greeting a STREAM sees as bytes.  Under
``BROKERLESS_TEST_AGAINST=pyzmq`` the sockets under test are libzmq's.
"""

from __future__ import annotations

import errno
import socket
import struct
import threading

import pytest
import zmq as libzmq

import brokerless as zmq
from tests.helpers import bind, recv_within

WAIT = 5.0  # seconds a plain socket waits for the other side

# Over ipc the plain peer is an AF_UNIX socket, over tcp a TCP one.
WIRES = ["ipc", "tcp"]


@pytest.fixture(params=WIRES)
def wire(request):
    return request.param


@pytest.fixture
def address(wire, tmp_path):
    """A fresh endpoint for ``bind`` on the wire under test."""
    counter = iter(range(1000))

    def make() -> str:
        if wire == "ipc":
            return f"ipc://{tmp_path}/stream{next(counter)}"
        return "tcp://127.0.0.1:*"

    return make


def plain_connect(endpoint: str) -> socket.socket:
    """A plain (non-ZMTP) client connected to a bound ``endpoint``."""
    transport, _, where = endpoint.partition("://")
    if transport == "ipc":
        peer = socket.socket(socket.AF_UNIX)
        peer.connect(where)
    else:
        host, _, port = where.rpartition(":")
        peer = socket.create_connection((host, int(port)))
    peer.settimeout(WAIT)
    return peer


def plain_listener(wire: str, tmp_path) -> tuple[socket.socket, str]:
    """A plain listening socket and the endpoint a STREAM connects to."""
    if wire == "ipc":
        path = f"{tmp_path}/plain.sock"
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        endpoint = f"ipc://{path}"
    else:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        endpoint = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    listener.listen()
    listener.settimeout(WAIT)
    return listener, endpoint


def read_until_closed(peer: socket.socket) -> bytes:
    """Everything the peer receives until the other side closes (fails on timeout)."""
    data = b""
    while chunk := peer.recv(65536):
        data += chunk
    return data


def read_exactly(peer: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = peer.recv(size - len(data))
        assert chunk, f"connection closed after {len(data)} of {size} octets"
        data += chunk
    return data


def stream_data(sock, rid: bytes, size: int) -> bytes:
    """``size`` octets of data from connection ``rid`` (a read may come in several messages)."""
    data = b""
    while len(data) < size:
        got_rid, chunk = recv_within(sock, multipart=True)
        assert got_rid == rid
        assert chunk, "the connection ended early"
        data += chunk
    return data


def expect_opened(sock) -> bytes:
    """The routing id of the connection whose opening ``sock`` announces now."""
    rid, data = recv_within(sock, multipart=True)
    assert data == b""
    assert rid
    return rid


# -- a STREAM server and plain clients -------------------------------------------------------------


def test_http_like_exchange_with_a_plain_client(make, address):
    server = make(zmq.STREAM)
    endpoint = bind(server, address())
    client = plain_connect(endpoint)

    rid = expect_opened(server)
    assert server.getsockopt(zmq.RCVMORE) == 0

    request = b"GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n"
    client.sendall(request)
    assert stream_data(server, rid, len(request)) == request

    body = b"<h1>hello</h1>"
    response = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    server.send(rid, zmq.SNDMORE)
    server.send(response)
    assert read_exactly(client, len(response)) == response

    # The client hangs up: the data it sent first, then the end of the connection.
    client.sendall(b"bye")
    client.close()
    assert stream_data(server, rid, 3) == b"bye"
    assert recv_within(server, multipart=True) == [rid, b""]


@pytest.mark.beyond_libzmq  # libzmq 4.3.5 closes only once the peer sends something more
def test_sending_an_empty_frame_closes_the_connection(make, address):
    server = make(zmq.STREAM, LINGER=5000)  # what was sent first goes out within LINGER
    endpoint = bind(server, address())
    client = plain_connect(endpoint)
    rid = expect_opened(server)

    big = bytes(range(256)) * 1024  # 256 KiB: written by reference, in several pieces
    server.send_multipart([rid, b"first "])
    server.send_multipart([rid, big])
    server.send_multipart([rid, b""])
    assert read_until_closed(client) == b"first " + big  # everything sent before the close
    # The socket forgot the connection: no notification, and the id routes nowhere now.
    assert server.poll(100) == 0
    with pytest.raises(zmq.ZMQError) as info:
        server.send_multipart([rid, b"too late"])
    assert info.value.errno == zmq.EHOSTUNREACH


def test_each_client_has_its_own_routing_id(make, address):
    server = make(zmq.STREAM)
    endpoint = bind(server, address())
    clients = [plain_connect(endpoint) for _ in range(3)]
    rids = [expect_opened(server) for _ in clients]
    assert len(set(rids)) == 3
    assert server.getsockopt(zmq.ROUTING_ID) in rids  # libzmq: the last id it made

    for n, client in enumerate(clients):
        client.sendall(b"client %d" % n)
    by_rid = {}
    for _ in clients:
        rid, data = recv_within(server, multipart=True)
        by_rid[rid] = data
    for rid, data in by_rid.items():
        server.send_multipart([rid, b"re: " + data])
    for n, client in enumerate(clients):
        assert read_exactly(client, 12) == b"re: client %d" % n


def test_large_data_both_ways(make, address):
    server = make(zmq.STREAM)
    endpoint = bind(server, address())
    client = plain_connect(endpoint)
    rid = expect_opened(server)
    payload = bytes(range(251)) * 8000  # ~2 MB: several reads and writes each way

    sender = threading.Thread(target=client.sendall, args=(payload,))
    sender.start()
    assert stream_data(server, rid, len(payload)) == payload
    sender.join(WAIT)

    server.send_multipart([rid, payload], copy=False)
    assert read_exactly(client, len(payload)) == payload


def test_received_data_comes_in_pieces_of_at_most_8_kib(make, address):
    """As libzmq: a read is handed over in messages of at most 8 KiB, so what a peer can make
    the socket hold is bounded by RCVHWM messages of that size."""
    server = make(zmq.STREAM)
    endpoint = bind(server, address())
    client = plain_connect(endpoint)
    rid = expect_opened(server)
    payload = bytes(range(256)) * 400  # 102,400 octets
    client.sendall(payload)
    data = b""
    while len(data) < len(payload):
        got_rid, chunk = recv_within(server, multipart=True)
        assert got_rid == rid
        assert 0 < len(chunk) <= 8192
        data += chunk
    assert data == payload


def test_notifications_off(make, address):
    server = make(zmq.STREAM, STREAM_NOTIFY=0)
    endpoint = bind(server, address())
    client = plain_connect(endpoint)
    client.sendall(b"ping")
    _, data = recv_within(server, multipart=True)
    assert data == b"ping"  # no [id, b""] came first
    client.close()
    assert server.poll(300) == 0  # and none when it ends
    with pytest.raises(zmq.Again):
        server.recv(zmq.NOBLOCK)


def test_a_zmtp_peer_is_just_bytes(make, lmake, wire, address):
    """A ZMTP socket connecting to a STREAM: the STREAM sees its greeting as raw data."""
    server = make(zmq.STREAM)
    endpoint = bind(server, address())
    dealer = lmake(libzmq.DEALER)
    dealer.connect(endpoint)
    rid = expect_opened(server)
    signature = stream_data(server, rid, 10)[:10]
    assert signature[0] == 0xFF and signature[9] == 0x7F  # ZMTP's greeting signature


# -- a STREAM client and a plain server ------------------------------------------------------------


def test_connecting_stream_to_a_plain_server(make, wire, tmp_path):
    listener, endpoint = plain_listener(wire, tmp_path)
    client = make(zmq.STREAM)
    client.setsockopt(zmq.CONNECT_ROUTING_ID, b"upstream")
    client.connect(endpoint)
    client.send_multipart([b"upstream", b"sent before the connection is up"])

    peer, _ = listener.accept()
    peer.settimeout(WAIT)
    assert recv_within(client, multipart=True) == [b"upstream", b""]
    assert read_exactly(peer, 32) == b"sent before the connection is up"
    peer.sendall(b"welcome")
    assert stream_data(client, b"upstream", 7) == b"welcome"

    # The server hangs up: the STREAM says so, reconnects, and says so again, under the same id.
    peer.close()
    assert recv_within(client, multipart=True) == [b"upstream", b""]
    again, _ = listener.accept()
    again.settimeout(WAIT)
    assert recv_within(client, multipart=True) == [b"upstream", b""]
    client.send_multipart([b"upstream", b"still here"])
    assert read_exactly(again, 10) == b"still here"


def test_connect_routing_id_is_generated_and_readable(make, wire, tmp_path):
    listener, endpoint = plain_listener(wire, tmp_path)
    client = make(zmq.STREAM)
    client.connect(endpoint)
    rid = client.getsockopt(zmq.ROUTING_ID)  # libzmq: known as soon as connect returns
    assert rid and rid[0] == 0
    peer, _ = listener.accept()
    assert recv_within(client, multipart=True) == [rid, b""]
    peer.close()


@pytest.mark.beyond_libzmq  # libzmq 4.3.5 aborts the process (assertion in stream.cpp)
def test_connect_routing_id_in_use_is_refused(make, tmp_path):
    listener, endpoint = plain_listener("tcp", tmp_path)
    client = make(zmq.STREAM)
    client.setsockopt(zmq.CONNECT_ROUTING_ID, b"dup")
    client.connect(endpoint)
    client.setsockopt(zmq.CONNECT_ROUTING_ID, b"dup")
    with pytest.raises(zmq.ZMQError) as info:
        client.connect(endpoint)
    assert info.value.errno == zmq.EINVAL
    assert "dup" in str(info.value)
    listener.close()


# -- STREAM and libzmq's STREAM --------------------------------------------------------------------


def opened_with_libzmq(make, lmake, address, binder: str):
    """A brokerless STREAM and a libzmq STREAM connected (``binder`` binds), each having
    announced the connection: (ours, theirs, our routing id, theirs)."""
    ours = make(zmq.STREAM)
    theirs = lmake(libzmq.STREAM)
    if binder == "brokerless":
        theirs.connect(bind(ours, address()))
    else:
        ours.connect(bind(theirs, address()))
    return ours, theirs, expect_opened(ours), expect_opened(theirs)


@pytest.mark.parametrize("binder", ["brokerless", "libzmq"])
def test_talks_to_libzmq_stream(make, lmake, wire, address, binder):
    ours, theirs, rid, theirs_rid = opened_with_libzmq(make, lmake, address, binder)
    ours.send_multipart([rid, b"hello from brokerless"])
    assert stream_data(theirs, theirs_rid, 21) == b"hello from brokerless"
    theirs.send_multipart([theirs_rid, b"hello from libzmq"])
    assert stream_data(ours, rid, 17) == b"hello from libzmq"


@pytest.mark.beyond_libzmq  # libzmq 4.3.5 closes only once the peer sends something more
@pytest.mark.parametrize("binder", ["brokerless", "libzmq"])
def test_closing_is_seen_by_libzmq_stream(make, lmake, wire, address, binder):
    ours, theirs, rid, theirs_rid = opened_with_libzmq(make, lmake, address, binder)
    ours.send_multipart([rid, b"last words"])
    ours.send_multipart([rid, b""])
    assert stream_data(theirs, theirs_rid, 10) == b"last words"
    assert recv_within(theirs, 5000, multipart=True) == [theirs_rid, b""]


@pytest.mark.parametrize("binder", ["brokerless", "libzmq"])
def test_libzmq_stream_going_away_is_announced(make, lmake, wire, address, binder):
    ours, theirs, rid, _ = opened_with_libzmq(make, lmake, address, binder)
    theirs.close(linger=0)
    assert recv_within(ours, 5000, multipart=True) == [rid, b""]


def connection_events(monitor, recv_monitor_message) -> list[tuple[int, int | None]]:
    """A STREAM monitor's events up to the first DISCONNECTED: (event, value), the value left
    out (None) where it is a descriptor."""
    fds = {libzmq.EVENT_LISTENING, libzmq.EVENT_ACCEPTED, libzmq.EVENT_DISCONNECTED}
    seen: list[tuple[int, int | None]] = []
    while not seen or seen[-1][0] != libzmq.EVENT_DISCONNECTED:
        event = recv_monitor_message(monitor)
        number = int(event["event"])
        seen.append((number, None if number in fds else int(event["value"])))
    return seen


@pytest.mark.parametrize("ending", ["closed", "reset"])
def test_the_monitor_sees_a_plain_clients_connection_as_libzmqs_does(make, lmake, ending):
    """libzmq's raw connection has no handshake: its monitor shows no HANDSHAKE_SUCCEEDED, and
    when the peer ends the connection, HANDSHAKE_FAILED_NO_DETAIL with the errno (EPIPE when it
    closed, ECONNRESET when it reset) before DISCONNECTED.  brokerless reported a handshake
    that succeeded at once, and nothing at the end but DISCONNECTED."""
    from zmq.utils.monitor import recv_monitor_message

    found = []
    for server in (make(zmq.STREAM), lmake(libzmq.STREAM)):
        monitor = server.get_monitor_socket()
        monitor.rcvtimeo = int(WAIT * 1000)
        client = plain_connect(bind(server, "tcp://127.0.0.1:*"))
        expect_opened(server)
        client.sendall(b"ping")
        assert recv_within(server, multipart=True)[1] == b"ping"
        if ending == "reset":  # SO_LINGER 0: the close sends RST
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        assert recv_within(server, 5000, multipart=True)[1] == b""  # (STREAM_NOTIFY)
        found.append(connection_events(monitor, recv_monitor_message))
    code = errno.EPIPE if ending == "closed" else errno.ECONNRESET
    assert found[1][-2:] == [
        (libzmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, code),
        (libzmq.EVENT_DISCONNECTED, None),
    ]
    assert found[0] == found[1]


# -- sending: routing and errors -------------------------------------------------------------------


def test_unknown_routing_id_is_host_unreachable(make, address):
    server = make(zmq.STREAM)
    bind(server, address())
    with pytest.raises(zmq.ZMQError) as info:
        server.send_multipart([b"nobody", b"data"])
    assert info.value.errno == zmq.EHOSTUNREACH
    with pytest.raises(zmq.ZMQError) as info:
        server.send(b"nobody", zmq.SNDMORE)  # the id frame is where libzmq says so
    assert info.value.errno == zmq.EHOSTUNREACH
    with pytest.raises(zmq.ZMQError) as info:
        server.send_multipart([b"nobody", b""])  # closing an unknown connection too
    assert info.value.errno == zmq.EHOSTUNREACH
    assert server.poll(0, zmq.POLLOUT) == zmq.POLLOUT  # a STREAM is always writable


def test_full_connection_raises_again(make, address):
    server = make(zmq.STREAM, SNDHWM=1, SNDTIMEO=200)
    endpoint = bind(server, address())
    client = plain_connect(endpoint)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    rid = expect_opened(server)
    chunk = b"x" * 65536
    sent = 0
    with pytest.raises(zmq.Again):  # the client reads nothing: the kernel, then the pipe, fill
        while sent < 10_000:
            server.send_multipart([rid, chunk])  # until SNDTIMEO runs out
            sent += 1
    assert sent > 0
    with pytest.raises(zmq.Again):
        server.send_multipart([rid, chunk], zmq.NOBLOCK)
    with pytest.raises(zmq.Again):
        server.send(rid, zmq.SNDMORE | zmq.NOBLOCK)  # checked at the id frame


def test_frames_after_the_data_frame_start_a_new_pair(make, address):
    """MORE on a data frame is ignored (libzmq): ``[id, a, id, b]`` sends ``a`` and ``b``; a lone
    frame leaves the socket waiting for a data frame, which the next message's first part is."""
    server = make(zmq.STREAM)
    endpoint = bind(server, address())
    client = plain_connect(endpoint)
    rid = expect_opened(server)

    server.send_multipart([rid, b"a", rid, b"b"])
    assert read_exactly(client, 2) == b"ab"

    server.send(b"lone routing id")  # no MORE: names nothing
    server.send(b"its data: dropped")
    server.send_multipart([rid, b"c"])
    assert read_exactly(client, 1) == b"c"


def test_closing_with_open_connections_terminates(make, ctx, address):
    server = make(zmq.STREAM, bounded=True)
    endpoint = bind(server, address())
    clients = [plain_connect(endpoint) for _ in range(3)]
    for _ in clients:
        expect_opened(server)
    server.close(linger=0)
    done = threading.Event()
    threading.Thread(target=lambda: (ctx.term(), done.set()), daemon=True).start()
    assert done.wait(WAIT), "term() hung with raw connections open"
    for client in clients:
        assert read_until_closed(client) == b""


# -- options ---------------------------------------------------------------------------------------


def test_stream_options(make):
    server = make(zmq.STREAM)
    server.setsockopt(zmq.STREAM_NOTIFY, 0)
    with pytest.raises(zmq.ZMQError) as info:
        server.getsockopt(zmq.STREAM_NOTIFY)  # write-only, as in libzmq
    assert info.value.errno == zmq.EINVAL
    with pytest.raises(zmq.ZMQError) as info:
        server.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a ROUTER option: STREAM is always mandatory
    assert info.value.errno == zmq.EINVAL
    dealer = make(zmq.DEALER)
    with pytest.raises(zmq.ZMQError) as info:
        dealer.setsockopt(zmq.STREAM_NOTIFY, 0)
    assert info.value.errno == zmq.EINVAL


@pytest.mark.beyond_libzmq  # reads brokerless's own repr
def test_closed_connections_leave_nothing_behind(make, address):
    server = make(zmq.STREAM)
    endpoint = bind(server, address())
    for _ in range(20):
        client = plain_connect(endpoint)
        rid = expect_opened(server)
        server.send_multipart([rid, b""])
        assert read_until_closed(client) == b""
        client.close()
    for _ in range(20):
        client = plain_connect(endpoint)
        rid = expect_opened(server)
        client.close()
        assert recv_within(server, multipart=True) == [rid, b""]
    # One more connection: its opening is announced after the last one's end was queued.
    last = plain_connect(endpoint)
    expect_opened(server)
    assert server.poll(0) == 0  # takes in what the ended connections left for the socket
    assert " 1 peers" in repr(server)
    last.close()
