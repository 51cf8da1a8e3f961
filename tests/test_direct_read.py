"""A thread blocked in ``recv`` on a socket with one network peer reads that connection itself.

brokerless lends the connection's input to the waiting thread (no hand-over to the I/O thread,
see "Lent input" in ``brokerless/transport/engine.py``).  Whatever happens on the connection
while a thread waits there must still be handled as the I/O thread would: the peer's heartbeats
answered, a silent peer dropped, garbage costing only that connection, PINGs between messages
neither delivered nor reordering anything -- and the waiting thread must get the next good
peer's message afterwards.  Each test keeps a thread in ``recv`` for the whole scenario.  The
peers are libzmq or raw sockets speaking hand-written ZMTP, so the same tests hold for pyzmq.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
import zmq as libzmq

import brokerless as zmq
from tests.helpers import bind, connect
from tests.test_faults import OVERSIZE_HEADER, frame, handshake

pytestmark = pytest.mark.timeout(30)

DEADLINE = 5.0  # seconds


class Receiver:
    """A thread that stays in ``recv`` (RCVTIMEO ``DEADLINE``) until it has ``count`` messages."""

    def __init__(self, sock, count: int) -> None:
        self.messages: list[bytes] = []
        self.error: BaseException | None = None
        sock.setsockopt(zmq.RCVTIMEO, int(DEADLINE * 1000))
        self._thread = threading.Thread(target=self._run, args=(sock, count), daemon=True)
        self._thread.start()

    def _run(self, sock, count: int) -> None:
        try:
            for _ in range(count):
                self.messages.append(sock.recv())
        except BaseException as exc:  # reported by result()
            self.error = exc

    def result(self) -> list[bytes]:
        self._thread.join(DEADLINE * 2)
        assert not self._thread.is_alive(), "the receiving thread is still blocked"
        if self.error is not None:
            raise self.error
        return self.messages


def _address(transport: str, tmp_path) -> str:
    return "tcp://127.0.0.1:*" if transport == "tcp" else f"ipc://{tmp_path}/direct"


def _raw_client(addr: str) -> socket.socket:
    host, port = addr[len("tcp://") :].rsplit(":", 1)
    raw = socket.create_connection((host, int(port)), timeout=DEADLINE)
    handshake(raw, b"PUSH")
    return raw


def _closed_by_peer(raw: socket.socket) -> bool:
    """Read until the other side closes (True) or ``DEADLINE`` passes (False)."""
    raw.settimeout(DEADLINE)
    try:
        while raw.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


def _events(monitor, want: int) -> list[int]:
    """Monitor events up to and including ``want`` (fails after ``DEADLINE``)."""
    seen = []
    deadline = time.monotonic() + DEADLINE
    while want not in seen:
        left = int((deadline - time.monotonic()) * 1000)
        assert left > 0 and monitor.poll(left), f"no event {want} (saw {seen})"
        seen.append(int.from_bytes(monitor.recv_multipart()[0][:2], "little"))
    return seen


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_libzmq_heartbeats_are_answered_while_a_thread_waits_in_recv(make, transport, tmp_path):
    pull = make(zmq.PULL)
    addr = bind(pull, _address(transport, tmp_path))
    lctx = libzmq.Context()
    push = lctx.socket(libzmq.PUSH)
    push.setsockopt(libzmq.LINGER, 0)
    for option, value in (("HEARTBEAT_IVL", 50), ("HEARTBEAT_TIMEOUT", 200)):
        push.setsockopt(getattr(libzmq, option), value)
    theirs = push.get_monitor_socket(libzmq.EVENT_HANDSHAKE_SUCCEEDED | libzmq.EVENT_DISCONNECTED)
    try:
        push.connect(addr)
        assert _events(theirs, libzmq.EVENT_HANDSHAKE_SUCCEEDED) == [
            libzmq.EVENT_HANDSHAKE_SUCCEEDED
        ]
        receiver = Receiver(pull, 1)
        # Three heartbeat timeouts in which only our answers to libzmq's PINGs keep it up:
        # libzmq must not disconnect (a bounded wait for an event that must not come).
        assert not theirs.poll(600), "libzmq dropped us: PINGs went unanswered"
        push.send(b"still connected")
        assert receiver.result() == [b"still connected"]
    finally:
        push.disable_monitor()
        theirs.close(linger=0)
        push.close(linger=0)
        lctx.term()


def test_a_silent_peer_is_dropped_while_a_thread_waits_in_recv(make):
    pull = make(zmq.PULL, HEARTBEAT_IVL=100, HEARTBEAT_TIMEOUT=300)
    monitor = pull.get_monitor_socket(zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED)
    addr = bind(pull, "tcp://127.0.0.1:*")
    receiver = Receiver(pull, 1)
    with _raw_client(addr) as raw:  # handshakes, then reads nothing and answers no PING
        assert _events(monitor, zmq.EVENT_DISCONNECTED)[-2:] == [
            zmq.EVENT_HANDSHAKE_SUCCEEDED,
            zmq.EVENT_DISCONNECTED,
        ]
        assert _closed_by_peer(raw), "the dropped connection's descriptor was not closed"
    push = make(zmq.PUSH)
    connect(push, addr)
    push.send(b"after")
    assert receiver.result() == [b"after"]
    pull.disable_monitor()
    monitor.close()


def test_garbage_while_a_thread_waits_in_recv_costs_only_that_connection(make):
    pull = make(zmq.PULL, MAXMSGSIZE=1024)
    monitor = pull.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    addr = bind(pull, "tcp://127.0.0.1:*")
    receiver = Receiver(pull, 2)
    with _raw_client(addr) as raw:
        raw.sendall(frame(b"good") + OVERSIZE_HEADER + b"y" * 100)
        assert _events(monitor, zmq.EVENT_DISCONNECTED) == [zmq.EVENT_DISCONNECTED]
        assert _closed_by_peer(raw)
    push = make(zmq.PUSH)
    connect(push, addr)
    push.send(b"after")
    assert receiver.result() == [b"good", b"after"]
    pull.disable_monitor()
    monitor.close()


def test_a_ping_between_messages_is_answered_while_a_thread_waits_in_recv(make):
    pull = make(zmq.PULL)
    addr = bind(pull, "tcp://127.0.0.1:*")
    receiver = Receiver(pull, 3)
    ping = frame(b"\x04PING" + (0).to_bytes(2, "big") + b"hb-1", command=True)
    with _raw_client(addr) as raw:
        raw.sendall(frame(b"one") + ping + frame(b"two"))
        pong = frame(b"\x04PONG" + b"hb-1", command=True)
        raw.settimeout(DEADLINE)
        got = b""
        while len(got) < len(pong):
            chunk = raw.recv(len(pong) - len(got))
            assert chunk, "closed instead of answering the PING"
            got += chunk
        assert got == pong
        raw.sendall(frame(b"three"))
        assert receiver.result() == [b"one", b"two", b"three"]
