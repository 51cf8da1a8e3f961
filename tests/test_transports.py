"""tcp:// and ipc:// specifics: addresses, ports, socket files, heartbeats."""

from __future__ import annotations

import os
import socket
import threading

import pytest

import brokerless as zmq
from tests.helpers import bind, connect, recv_within


def _exchange(make, bind_addr: str, **options) -> str:
    """Bind a PULL at ``bind_addr``, connect a PUSH to what it reports, pass one message."""
    pull = make(zmq.PULL, **options)
    addr = bind(pull, bind_addr)
    push = make(zmq.PUSH, **options)
    connect(push, addr)
    push.send(b"over " + addr.encode())
    assert recv_within(pull) == b"over " + addr.encode()
    return addr


def test_tcp_port_zero_and_star_report_the_real_port(make):
    addr = _exchange(make, "tcp://127.0.0.1:0")
    assert addr.startswith("tcp://127.0.0.1:") and not addr.endswith(":0")
    assert _exchange(make, "tcp://*:*").startswith("tcp://0.0.0.0:")


def test_tcp_interface_name_binds_its_address(make):
    assert _exchange(make, "tcp://lo:*").startswith("tcp://127.0.0.1:")


def test_tcp_ipv6(make):
    addr = _exchange(make, "tcp://[::1]:*", IPV6=1)
    assert addr.startswith("tcp://[::1]:")


def test_bind_to_random_port(make):
    pull = make(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1", min_port=20000, max_port=60000)
    assert 20000 <= port < 60000
    assert pull.last_endpoint.decode() == f"tcp://127.0.0.1:{port}"


def test_tcp_bind_to_a_port_in_use_raises_eaddrinuse(make):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(zmq.ZMQError) as info:
            make(zmq.PULL).bind(f"tcp://127.0.0.1:{port}")
    assert info.value.errno == zmq.EADDRINUSE


@pytest.mark.beyond_libzmq
@pytest.mark.parametrize("how", ["unbind", "close"])
def test_ipc_socket_file_is_removed(make, tmp_path, how):
    """The socket file goes with the endpoint (libzmq removes it asynchronously; brokerless
    before ``unbind``/``close`` returns)."""
    path = tmp_path / "endpoint"
    pull = make(zmq.PULL)
    pull.bind(f"ipc://{path}")
    assert path.exists()
    if how == "unbind":
        pull.unbind(f"ipc://{path}")
    else:
        pull.close()
    assert not path.exists()


def test_ipc_stale_socket_file_is_replaced(make, tmp_path):
    """A file left by a crashed process does not block a new bind."""
    path = str(tmp_path / "stale")
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.close()  # the file stays, nobody listens
    assert os.path.exists(path)
    _exchange(make, f"ipc://{path}")


_PUSH_GREETING_AND_READY = (
    b"\xff" + (1).to_bytes(8, "big") + b"\x7f"  # signature
    + b"\x03\x01" + b"NULL".ljust(20, b"\x00") + b"\x00" + bytes(31)  # 3.1, NULL, client
    + b"\x04\x1a\x05READY\x0bSocket-Type\x00\x00\x00\x04PUSH"  # READY command frame
)  # fmt: skip


def _monitor_events(sock):
    return sock.get_monitor_socket(zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED)


def _next_event(monitor, timeout_ms: int = 3000) -> int:
    assert monitor.poll(timeout_ms), "no monitor event"
    header, _endpoint = monitor.recv_multipart()
    return int.from_bytes(header[:2], "little")


def test_heartbeat_drops_a_peer_that_stops_answering(make):
    """A peer that completed the handshake, then went silent (no PONG), is dropped."""
    pull = make(zmq.PULL, HEARTBEAT_IVL=100, HEARTBEAT_TIMEOUT=300)
    monitor = _monitor_events(pull)
    addr = bind(pull, "tcp://127.0.0.1:*")
    host, port = addr[len("tcp://") :].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(_PUSH_GREETING_AND_READY)  # RFC 37, written out by hand
        assert _next_event(monitor) == zmq.EVENT_HANDSHAKE_SUCCEEDED
        # from here on the peer reads nothing and answers no PING
        assert _next_event(monitor) == zmq.EVENT_DISCONNECTED
    pull.disable_monitor()
    monitor.close()


_PING = b"\x04\x07\x04PING\x00\x00"  # a PING command frame, TTL 0, no context (RFC 37)


def test_heartbeat_does_not_drop_a_peer_whose_traffic_waits_unread(make, ctx):
    """A stall of the I/O thread past the timeout (a loaded machine, a long collection) is not
    the peer's silence: its PINGs wait in the socket, and are looked for before it is judged."""
    pull = make(zmq.PULL, HEARTBEAT_IVL=50, HEARTBEAT_TIMEOUT=100)
    monitor = _monitor_events(pull)
    addr = bind(pull, "tcp://127.0.0.1:*")
    host, port = addr[len("tcp://") :].rsplit(":", 1)
    done = threading.Event()
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(_PUSH_GREETING_AND_READY)
        assert _next_event(monitor) == zmq.EVENT_HANDSHAKE_SUCCEEDED

        def keep_pinging() -> None:  # a live peer: traffic every 20 ms, whatever comes back
            while not done.wait(0.02):
                raw.sendall(_PING)

        pinger = threading.Thread(target=keep_pinging, daemon=True)
        pinger.start()
        try:
            # Hold the engine's I/O thread for 4x the interval plus timeout; its ping timer
            # comes due meanwhile and runs right after the hold, before the socket is read.
            (io,) = ctx._io_threads
            held = threading.Event()
            io.call_and_wait(lambda _: held.wait(0.6))
            assert not monitor.poll(500), "a live peer was dropped after the I/O thread's stall"
        finally:
            done.set()
            pinger.join(5)
    pull.disable_monitor()
    monitor.close()


def test_heartbeats_lose_nothing_while_a_receiver_is_full(make):
    """A receiver at its HWM stops reading; its sender's last messages then wait in the pipe
    and the sockets while PINGs and PONGs go on.  Nothing may be dropped (the waiting bytes are
    not silence) and nothing may stay behind (a PONG written in between must not leave the
    sender's output idle with messages in its pipe): every message arrives, in order."""
    pull = make(zmq.PULL, RCVHWM=1, HEARTBEAT_IVL=50, HEARTBEAT_TIMEOUT=100)
    monitor = _monitor_events(pull)
    addr = bind(pull, "tcp://127.0.0.1:*")
    push = make(zmq.PUSH, SNDHWM=1, HEARTBEAT_IVL=50, HEARTBEAT_TIMEOUT=100)
    connect(push, addr)
    assert _next_event(monitor) == zmq.EVENT_HANDSHAKE_SUCCEEDED
    body = bytes(100_000)
    sent = 0
    while push.poll(200, zmq.POLLOUT):  # until the queues and the socket buffers are full
        try:
            push.send(body + sent.to_bytes(4, "big"), zmq.NOBLOCK)
        except zmq.Again:  # (POLLOUT can come a moment before the room)
            continue
        sent += 1
    # ten heartbeat timeouts with the receiver away: the connection must stay
    assert not monitor.poll(1500), "the connection was dropped while its messages waited"
    got = [int.from_bytes(pull.recv()[-4:], "big") for _ in range(sent)]
    assert got == list(range(sent))
    pull.disable_monitor()
    monitor.close()


def test_heartbeat_keeps_an_idle_live_peer(make):
    pull = make(zmq.PULL, HEARTBEAT_IVL=50, HEARTBEAT_TIMEOUT=150)
    monitor = _monitor_events(pull)
    addr = bind(pull, "tcp://127.0.0.1:*")
    push = make(zmq.PUSH, HEARTBEAT_IVL=50, HEARTBEAT_TIMEOUT=150)
    connect(push, addr)
    assert _next_event(monitor) == zmq.EVENT_HANDSHAKE_SUCCEEDED
    # several heartbeat timeouts of idleness: no disconnection may be reported
    assert not monitor.poll(600)
    push.send(b"still here")
    assert recv_within(pull) == b"still here"
    pull.disable_monitor()
    monitor.close()



def _keepalive_settings(port: int) -> dict[str, tuple[int, int]]:
    """The OS settings (SO_KEEPALIVE, TCP_KEEPIDLE) of this process's tcp connections on
    127.0.0.1 using ``port``: the side whose local port it is ("bound") and the other side
    ("connecting"), read from duplicates of the process's open socket descriptors."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue  # not a socket (or already closed)
        with sock:
            if sock.family != socket.AF_INET or sock.type != socket.SOCK_STREAM:
                continue
            try:
                local, remote = sock.getsockname()[1], sock.getpeername()[1]
            except OSError:
                continue  # a listener
            side = "bound" if local == port else "connecting" if remote == port else None
            if side:
                found[side] = (
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                )
    return found


@pytest.mark.parametrize("keepalive_on", ["bound", "connecting"])
def test_tcp_keepalive_options_reach_the_os(make, keepalive_on):
    on = {"TCP_KEEPALIVE": 1, "TCP_KEEPALIVE_IDLE": 300}
    off = {"TCP_KEEPALIVE": 0}
    pull = make(zmq.PULL, **(on if keepalive_on == "bound" else off))
    addr = bind(pull, "tcp://127.0.0.1:*")
    push = make(zmq.PUSH, **(on if keepalive_on == "connecting" else off))
    connect(push, addr, pull)
    push.send(b"x")
    assert recv_within(pull) == b"x"
    settings = _keepalive_settings(int(addr.rsplit(":", 1)[1]))
    other = "connecting" if keepalive_on == "bound" else "bound"
    assert settings[keepalive_on] == (1, 300)
    assert settings[other][0] == 0
