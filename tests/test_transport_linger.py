"""A closing connection whose engine has already read everything its socket sent (the pipe's
end included) still delivers it, within LINGER.

Two notices race with the engine when a socket closes: the transport's "socket closed" and the
pipe's PIPE_TERM.  Either may reach the connection's I/O thread only after the engine, in the
same turn, completed its handshake and read the whole pipe -- messages and the end of the
stream -- while much of it still waits to be written.  Seen as a program that queued ten 1 MB
messages and exited delivering four: "socket closed" found no pipe and dropped the connection.
The tests make that order happen on a real connection: the I/O thread is held just before it
handles the peer's READY while the socket closes."""

from __future__ import annotations

import socket
import threading

import pytest

import brokerless as zmq
from brokerless.zmtp import Connection

pytestmark = pytest.mark.timeout(60)
MESSAGES = 10
SIZE = 1 << 20


class Peer:
    """A PULL peer on a plain socket: its handshake and reading are the test's to time."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(1)
        self.endpoint = f"tcp://127.0.0.1:{self._listener.getsockname()[1]}"
        self.conn = Connection(zmq.PULL)
        self.sock: socket.socket | None = None
        self.received: list = []
        self._handshaking: threading.Thread | None = None

    def accept(self) -> None:
        self.sock, _ = self._listener.accept()
        self.sock.settimeout(10)

    def start_handshake(self) -> None:
        """The handshake, in a thread of its own (the engine it talks to is held mid-way)."""
        self._handshaking = threading.Thread(target=self._handshake, daemon=True)
        self._handshaking.start()

    def _handshake(self) -> None:
        while self.conn.peer is None:  # the greeting goes out in steps
            self.sock.sendall(self.conn.data_to_send())
            self._read()
        self.sock.sendall(self.conn.data_to_send())

    def read_all(self) -> None:
        # The handshake's thread may still be feeding the engine's READY to ``conn``: one
        # reader at a time, or data would reach ``conn`` before the READY it follows.
        assert self._handshaking is not None
        self._handshaking.join(10)
        assert not self._handshaking.is_alive(), "the peer's handshake never completed"
        while len(self.received) < MESSAGES:
            self._read()

    def _read(self) -> None:
        data = self.sock.recv(1 << 20)
        assert data, "the connection was closed"
        self.received += [m for m in self.conn.receive_data(data) if isinstance(m, bytes)]

    def close(self) -> None:
        for s in (self.sock, self._listener):
            if s is not None:
                s.close()


def _closed_while_the_engine_completes_its_handshake(ctx, peer: Peer, linger: int):
    """A PUSH that queued MESSAGES messages, closed while its I/O thread is between reading
    the peer's READY and handling it; returns its session once that turn is over.  In that
    turn the engine completes the handshake and reads the whole pipe, end of stream included,
    and only then come the notices of the close."""
    push = ctx.socket(zmq.PUSH)
    push.linger = linger
    push.connect(peer.endpoint)
    peer.accept()
    for i in range(MESSAGES):
        push.send(bytes([i]) * SIZE)
    (session,) = ctx._network["tcp"]._sessions[(id(push._port), peer.endpoint)]
    gate = _hold_at_the_peers_ready(session, peer)
    push.close()
    gate.set()
    session.io.call_and_wait(lambda _: None)  # the turn is over, the close's notices handled
    assert session.pipe is None  # the engine read everything, the end of the stream included
    return session


def _hold_at_the_peers_ready(session, peer: Peer) -> threading.Event:
    """Start ``peer``'s handshake and hold ``session``'s I/O thread, once, just before it
    handles the peer's READY; returns the gate that lets it go on."""
    io = session.io
    engine = None
    while engine is None:  # each look is one turn of the I/O thread
        io.call_and_wait(lambda _: None)
        engine = session.engine
    conn = engine.conn
    receive = conn.receive
    entered, gate = threading.Event(), threading.Event()

    def pause_at_ready(data):
        if b"\x05READY" in bytes(data):  # the peer's READY (the greeting may come with it)
            conn.receive = receive
            entered.set()
            assert gate.wait(10)
        return receive(data)

    conn.receive = pause_at_ready
    peer.start_handshake()
    assert entered.wait(10), "the peer's READY never arrived"
    return gate


def test_a_close_noticed_after_the_engine_read_everything_loses_nothing():
    ctx = zmq.Context()
    peer = Peer()
    try:
        session = _closed_while_the_engine_completes_its_handshake(ctx, peer, linger=-1)
        assert not session.done, "the connection was dropped with its messages unwritten"
        peer.read_all()
        assert [m[0] for m in peer.received] == list(range(MESSAGES))
        ctx.term()
    finally:
        peer.close()
        ctx.destroy(linger=0)


def test_linger_bounds_a_connection_whose_engine_read_everything():
    """PIPE_TERM, which arms LINGER, came after the engine read the pipe: LINGER must still
    hold for what the engine has not written, so term() returns though the peer reads
    nothing.  (Before either fix the dropped connection hid this one.)"""
    ctx = zmq.Context()
    peer = Peer()
    try:
        _closed_while_the_engine_completes_its_handshake(ctx, peer, linger=200)
        done = threading.Event()
        threading.Thread(target=lambda: (ctx.term(), done.set()), daemon=True).start()
        assert done.wait(10), "term() waits for ever: LINGER was never armed"
    finally:
        peer.close()
        ctx.destroy(linger=0)


def test_a_pipe_handed_to_a_socket_after_it_closed_is_ended():
    """A connecting session with no pipe yet (IMMEDIATE; a ROUTER too) makes one when its
    handshake completes and hands it to the socket (ATTACH).  The socket closed meanwhile, after
    it had ended the pipes still queued for it: the pipe landed in a mailbox nobody reads, the
    session kept it and its engine, and term() waited for ever."""
    ctx = zmq.Context()
    peer = Peer()
    done = threading.Event()
    terming = threading.Thread(target=lambda: (ctx.term(), done.set()), daemon=True)
    try:
        push = ctx.socket(zmq.PUSH)
        push.immediate = True
        push.linger = 0
        push.connect(peer.endpoint)
        peer.accept()
        (session,) = ctx._network["tcp"]._sessions[(id(push._port), peer.endpoint)]
        assert session.pipe is None  # IMMEDIATE: made when the handshake completes
        gate = _hold_at_the_peers_ready(session, peer)
        push.close()  # ends the pipes queued for it: none yet
        gate.set()  # the handshake completes: a pipe for the closed socket
        terming.start()
        assert done.wait(10), "term() waits for ever: the late pipe was never ended"
        assert session.done
    finally:
        peer.close()
        if not terming.is_alive():  # (a term() that hangs would hang destroy() too)
            ctx.destroy(linger=0)


def test_linger_0_close_while_the_engine_reads_the_pipes_end_raises_nothing(capfd):
    """A PUSH kept at its HWM by a slow PULL, closed with LINGER 0: the I/O thread's next
    read of the pipe can take messages and the pipe's end together, and that end closes the
    connection at once (LINGER 0) -- inside the read.  The engine then encoded the messages
    it had just taken for a connection no longer there: a RuntimeError traceback on stderr
    from the I/O thread (4 to 15 of these 20 tries, every run).  The messages are to be dropped,
    quietly."""
    ctx = zmq.Context()
    try:
        for _ in range(20):
            push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
            push.sndhwm = pull.rcvhwm = 2
            pull.bind("tcp://127.0.0.1:0")
            push.connect(pull.last_endpoint)
            with pytest.raises(zmq.Again):  # until the pipe is full: its I/O thread lags
                for _ in range(100_000):
                    push.send(b"x" * 1000, zmq.NOBLOCK)
            for _ in range(20):  # one out, one in: the PUSH stays at its HWM
                assert pull.poll(5000), "the PULL got nothing"
                pull.recv()
                assert push.poll(5000, zmq.POLLOUT), "the PUSH has no room"
                push.send(b"y" * 1000, zmq.NOBLOCK)
            push.close(linger=0)
            pull.close(linger=0)
            ctx._io_threads[0].call_and_wait(lambda _: None)  # its turn after the close is over
        ctx.term()
    finally:
        ctx.destroy(linger=0)
    assert "Traceback" not in capfd.readouterr().err
