"""A REQ's or REP's thread blocked in ``recv`` with one network peer reads that connection itself.

brokerless lends the connection's input to the waiting thread (no hand-over to the I/O thread,
see ``brokerless/transport/engine_lent.py``).  Whatever happens on the connection
while a thread waits there must still be handled as the I/O thread would: the peer's heartbeats
answered, a silent peer dropped, garbage costing only that connection, PINGs between requests
neither delivered nor reordering anything -- and the waiting thread must get the next good
peer's request afterwards.  A REP echo thread stays in ``recv`` for the whole scenario.  The
peers are libzmq or raw sockets speaking hand-written ZMTP, so the same tests hold for pyzmq.

Between two waits the socket keeps the loan (nobody reads the connection then): the last tests
check that it goes back to the I/O thread whenever the connection could need reading otherwise
-- the socket left alone, polled, asked for its FD or EVENTS, tried without blocking, closed.
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import zmq as libzmq

import brokerless as zmq
from brokerless.socket import waiting
from brokerless.transport import engine_lent
from tests.helpers import bind, connect
from tests.security_helpers import make_keys, secure
from tests.test_faults import OVERSIZE_HEADER, frame, handshake, read_exact

pytestmark = pytest.mark.timeout(30)

DEADLINE = 5.0  # seconds


class Echo:
    """A thread that answers ``count`` requests on a REP socket, waiting in ``recv`` (RCVTIMEO
    ``DEADLINE``) in between."""

    def __init__(self, rep, count: int) -> None:
        self.requests: list[bytes] = []
        self.error: BaseException | None = None
        rep.setsockopt(zmq.RCVTIMEO, int(DEADLINE * 1000))
        self._thread = threading.Thread(target=self._run, args=(rep, count), daemon=True)
        self._thread.start()

    def _run(self, rep, count: int) -> None:
        try:
            for _ in range(count):
                request = rep.recv()
                self.requests.append(request)
                rep.send(request)
        except BaseException as exc:  # reported by result()
            self.error = exc

    def result(self) -> list[bytes]:
        self._thread.join(DEADLINE * 2)
        assert not self._thread.is_alive(), "the echo thread is still blocked"
        if self.error is not None:
            raise self.error
        return self.requests


def _request(body: bytes) -> bytes:
    """A request as a REQ sends it: an empty delimiter frame, then the body."""
    return frame(b"", more=True) + frame(body)


def _raw_req(addr: str) -> socket.socket:
    host, port = addr[len("tcp://") :].rsplit(":", 1)
    raw = socket.create_connection((host, int(port)), timeout=DEADLINE)
    handshake(raw, b"REQ")
    return raw


def _read_frames(raw: socket.socket, count: int) -> list[tuple[int, bytes]]:
    """The next ``count`` short frames as (flags, body)."""
    frames = []
    for _ in range(count):
        flags, size = read_exact(raw, 2)
        frames.append((flags, read_exact(raw, size)))
    return frames


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


def _raw_rep(make, rep_path: str | None = None, **options):
    """A REQ connected to a raw socket speaking ZMTP as a REP, over tcp or, given a path, over
    ipc: (req, raw)."""
    if rep_path is None:
        server = socket.create_server(("127.0.0.1", 0))
        endpoint = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    else:
        server = socket.socket(socket.AF_UNIX)
        server.bind(rep_path)
        server.listen()
        endpoint = f"ipc://{rep_path}"
    with server:
        server.settimeout(DEADLINE)
        req = make(zmq.REQ, RCVTIMEO=int(DEADLINE * 1000), **options)
        req.connect(endpoint)
        raw, _ = server.accept()
    raw.settimeout(DEADLINE)
    handshake(raw, b"REP")
    return req, raw


def _answer(raw: socket.socket, body: bytes) -> None:
    """Read one request (past any command: a PING, with heartbeats on), reply ``body``."""
    frames: list[tuple[int, bytes]] = []
    while len(frames) < 2:
        frames += [f for f in _read_frames(raw, 1) if not f[0] & 0x04]
    assert frames[0] == (0x01, b"")
    raw.sendall(_request(body))


def _round_trips(req, raw: socket.socket) -> None:
    """Requests answered until the REQ's thread, waiting in ``recv``, read the last reply
    itself and kept the connection's input for its next wait -- the scenario under test.  Each
    reply is sent once the thread has borrowed the input (or, when it could not -- the I/O
    thread was reading --, a moment later: then the I/O thread reads it, and the next request
    tries again)."""
    (pipe,) = req._pipes
    engine = pipe.source.engine
    borrowed = threading.Event()
    lend_input = engine.lend_input

    def noted(large_only: bool = False) -> bool:
        lent = lend_input(large_only)
        if lent:
            borrowed.set()
        return lent

    def answer(body: bytes) -> None:
        borrowed.wait(0.1)
        _answer(raw, body)

    engine.lend_input = noted  # (the session asks its engine through the attribute)
    try:
        for i in range(1000):
            borrowed.clear()
            req.send(b"%d" % i)
            answering = threading.Thread(target=answer, args=(b"%d" % i,), daemon=True)
            answering.start()
            assert req.recv() == b"%d" % i
            answering.join(DEADLINE)
            if req._loan_kept:
                return
    finally:
        del engine.lend_input
    raise AssertionError("the REQ never kept its connection's input")


def _ask(make, addr: str, body: bytes) -> bytes:
    req = make(zmq.REQ)
    connect(req, addr)
    req.send(body)
    return req.recv()


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_libzmq_heartbeats_are_answered_while_a_thread_waits_in_recv(
    make, lmake, transport, tmp_path
):
    rep = make(zmq.REP)
    addr = bind(rep, "tcp://127.0.0.1:*" if transport == "tcp" else f"ipc://{tmp_path}/rep")
    req = lmake(libzmq.REQ, HEARTBEAT_IVL=50, HEARTBEAT_TIMEOUT=200)
    theirs = req.get_monitor_socket(libzmq.EVENT_HANDSHAKE_SUCCEEDED | libzmq.EVENT_DISCONNECTED)
    req.connect(addr)
    assert _events(theirs, libzmq.EVENT_HANDSHAKE_SUCCEEDED) == [libzmq.EVENT_HANDSHAKE_SUCCEEDED]
    echo = Echo(rep, 1)
    # Three heartbeat timeouts in which only our answers to libzmq's PINGs keep it up:
    # libzmq must not disconnect (a bounded wait for an event that must not come).
    assert not theirs.poll(600), "libzmq dropped us: PINGs went unanswered"
    req.send(b"still connected")
    assert req.recv() == b"still connected"
    assert echo.result() == [b"still connected"]


def test_a_silent_peer_is_dropped_while_a_thread_waits_in_recv(make):
    rep = make(zmq.REP, HEARTBEAT_IVL=100, HEARTBEAT_TIMEOUT=300)
    monitor = rep.get_monitor_socket(zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED)
    addr = bind(rep, "tcp://127.0.0.1:*")
    echo = Echo(rep, 1)
    with _raw_req(addr) as raw:  # handshakes, then reads nothing and answers no PING
        assert _events(monitor, zmq.EVENT_DISCONNECTED)[-2:] == [
            zmq.EVENT_HANDSHAKE_SUCCEEDED,
            zmq.EVENT_DISCONNECTED,
        ]
        assert _closed_by_peer(raw), "the dropped connection's descriptor was not closed"
    assert _ask(make, addr, b"after") == b"after"
    assert echo.result() == [b"after"]
    rep.disable_monitor()
    monitor.close()


def test_garbage_while_a_thread_waits_in_recv_costs_only_that_connection(make):
    rep = make(zmq.REP, MAXMSGSIZE=1024)
    monitor = rep.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    addr = bind(rep, "tcp://127.0.0.1:*")
    echo = Echo(rep, 2)
    with _raw_req(addr) as raw:
        raw.sendall(_request(b"good") + OVERSIZE_HEADER + b"y" * 100)
        assert _events(monitor, zmq.EVENT_DISCONNECTED) == [zmq.EVENT_DISCONNECTED]
        assert _closed_by_peer(raw)
    assert _ask(make, addr, b"after") == b"after"
    assert echo.result() == [b"good", b"after"]
    rep.disable_monitor()
    monitor.close()


def test_a_ping_between_requests_is_answered_while_a_thread_waits_in_recv(make):
    rep = make(zmq.REP)
    addr = bind(rep, "tcp://127.0.0.1:*")
    echo = Echo(rep, 2)
    ping = frame(b"\x04PING" + (0).to_bytes(2, "big") + b"hb-1", command=True)
    with _raw_req(addr) as raw:
        raw.sendall(_request(b"one") + ping + _request(b"two"))
        frames = _read_frames(raw, 5)  # a PONG and two replies of two frames each
    pong = (0x04, b"\x04PONG" + b"hb-1")
    assert pong in frames
    frames.remove(pong)
    assert frames == [(0x01, b""), (0x00, b"one"), (0x01, b""), (0x00, b"two")]
    assert echo.result() == [b"one", b"two"]


def test_requests_beyond_the_hwm_are_answered_in_order_while_a_thread_waits_in_recv(make):
    """More requests at once than the REP's pipe holds (RCVHWM 100): reading stops at the HWM
    and resumes as the thread takes them, whichever thread read them off the connection."""
    count = 1000
    rep = make(zmq.REP, RCVHWM=100)
    addr = bind(rep, "tcp://127.0.0.1:*")
    echo = Echo(rep, count)
    with _raw_req(addr) as raw:
        raw.sendall(b"".join(_request(b"%d" % i) for i in range(count)))
        replies = [body for _, body in _read_frames(raw, 2 * count)[1::2]]
    assert replies == [b"%d" % i for i in range(count)]
    assert echo.result() == replies


def test_a_peer_that_leaves_while_a_thread_waits_in_recv_is_dropped_without_spinning(make):
    """The only peer closes while the REP's thread waits for its request: the end of the stream
    is the I/O thread's to read (it reports DISCONNECTED), and the waiting thread goes on
    waiting quietly -- it once took the input back at every look, so the I/O thread never read
    the end and the thread spun on the readable descriptor for as long as it waited."""
    rep = make(zmq.REP)
    monitor = rep.get_monitor_socket(zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED)
    addr = bind(rep, "tcp://127.0.0.1:*")
    cpu: list[float] = []

    def wait_for_a_request() -> None:
        rep.setsockopt(zmq.RCVTIMEO, 2000)
        start = time.thread_time()
        try:
            rep.recv()
        except zmq.Again:
            pass
        cpu.append(time.thread_time() - start)

    with _raw_req(addr) as raw:
        assert _events(monitor, zmq.EVENT_HANDSHAKE_SUCCEEDED)[-1:] == [
            zmq.EVENT_HANDSHAKE_SUCCEEDED
        ]
        waiter = threading.Thread(target=wait_for_a_request, daemon=True)
        waiter.start()
        raw.sendall(frame(b"", more=True))  # part of a request: the thread reads it, waits on
        raw.close()
    assert _events(monitor, zmq.EVENT_DISCONNECTED)[-1:] == [zmq.EVENT_DISCONNECTED]
    waiter.join(DEADLINE * 2)
    assert not waiter.is_alive()
    assert cpu[0] < 0.5, f"the waiting thread used {cpu[0]:.1f} s of CPU in 2 s"


def test_a_connection_kept_by_a_socket_left_alone_is_read_again(make):
    """After its last reply the REQ does nothing more: within two LOAN_IDLE the I/O thread
    reads the connection again, so the peer's PING is answered."""
    req, raw = _raw_rep(make)
    with raw:
        _round_trips(req, raw)
        raw.sendall(frame(b"\x04PING" + (0).to_bytes(2, "big") + b"hb-2", command=True))
        assert _read_frames(raw, 1) == [(0x04, b"\x04PONGhb-2")]


def _poll(req) -> bytes:
    assert req.poll(int(DEADLINE * 1000)) == zmq.POLLIN
    return req.recv(zmq.NOBLOCK)


def _poller(req) -> bytes:
    poller = zmq.Poller()
    poller.register(req, zmq.POLLIN)
    assert poller.poll(int(DEADLINE * 1000)) == [(req, zmq.POLLIN)]
    return req.recv(zmq.NOBLOCK)


def _fd(req) -> bytes:
    fd = req.getsockopt(zmq.FD)
    while not req.getsockopt(zmq.EVENTS) & zmq.POLLIN:
        assert select.select([fd], [], [], DEADLINE)[0], "the FD never signalled the reply"
    return req.recv(zmq.NOBLOCK)


def _noblock(req) -> bytes:
    deadline = time.monotonic() + DEADLINE  # an application's loop of tries, as under test
    while True:
        try:
            return req.recv(zmq.NOBLOCK)
        except zmq.Again:
            assert time.monotonic() < deadline, "a loop of non-blocking tries never got the reply"


@contextlib.contextmanager
def _kept_and_answered(make, monkeypatch, body: bytes) -> Iterator[Any]:
    """A REQ that keeps its connection's input (LOAN_IDLE made an hour, so only the socket
    gives it back), with its request ``body`` answered by the raw peer."""
    monkeypatch.setattr(engine_lent, "LOAN_IDLE", 3600.0)
    req, raw = _raw_rep(make)
    with raw:
        _round_trips(req, raw)
        req.send(body)
        _answer(raw, body)
        yield req


@pytest.mark.parametrize("wait", [_poll, _poller, _fd, _noblock])
def test_a_kept_connection_goes_back_when_the_socket_waits_otherwise(make, monkeypatch, wait):
    """A reply that comes while the REQ polls (or tries without blocking) is read by the I/O
    thread at once -- not after LOAN_IDLE."""
    with _kept_and_answered(make, monkeypatch, b"polled") as req:
        assert wait(req) == b"polled"


@pytest.fixture
def read_begins(monkeypatch) -> threading.Event:
    """Set as a lock-step socket begins to wait in the read of its lent connection (see
    "Waiting in the read" in engine_lent.py), the descriptor blocking."""
    begun = threading.Event()
    read_lent = engine_lent.LentInputMixin.read_lent

    def noted(self, wait_ms=0, flags=socket.MSG_DONTWAIT):
        if not flags:
            begun.set()
        return read_lent(self, wait_ms, flags)

    monkeypatch.setattr(engine_lent.LentInputMixin, "read_lent", noted)
    return begun


@pytest.fixture
def waiting_in_the_read(monkeypatch, read_begins) -> threading.Event:
    """``read_begins``, with a socket's whole wait spent in that read."""
    monkeypatch.setattr(waiting, "READ_FIRST_MS", 60_000)
    return read_begins


@pytest.fixture(params=["tcp", "ipc"])
def rep_path(request, tmp_path) -> str | None:
    """Where a raw peer listens: None for tcp, else its ipc path."""
    return None if request.param == "tcp" else str(tmp_path / "rep")


def _served(make) -> None:
    """The I/O thread serves a new connection (a PULL reads its first message there)."""
    pull = make(zmq.PULL, RCVTIMEO=int(DEADLINE * 1000))
    push = make(zmq.PUSH)
    connect(push, bind(pull, "tcp://127.0.0.1:*"))
    push.send(b"served")
    assert pull.recv() == b"served"


def test_the_io_thread_writes_without_waiting_while_the_socket_waits_in_the_read(
    make, waiting_in_the_read, rep_path
):
    """The I/O thread writes the rest of a large request as the peer makes room, while the
    REQ's thread waits for the reply in the read (the descriptor blocking): it writes what
    fits and goes on serving its other connections -- a write that waited for the peer would
    stop them all."""
    req, raw = _raw_rep(make, rep_path)
    with raw:
        _round_trips(req, raw)
        request = _request(b"x" * 32_000_000)  # more than the kernel's buffers hold
        req.send(b"x" * 32_000_000)
        outcome: list[Any] = []
        waiter = threading.Thread(target=_recv_into, args=(req, outcome), daemon=True)
        waiter.start()
        assert waiting_in_the_read.wait(DEADLINE)
        read = 0
        while read < 1_000_000:  # the kernel takes more: the I/O thread writes
            read += len(raw.recv(65536))
        _served(make)
        while read < len(request):  # the rest of the request, then the reply
            read += len(raw.recv(1 << 20))
        raw.sendall(_request(b"done"))
        waiter.join(DEADLINE)
    assert outcome == [b"done"]


def test_a_silent_peer_is_dropped_at_once_while_the_socket_waits_in_the_read(
    make, waiting_in_the_read, rep_path
):
    """The I/O thread's heartbeat finds the peer silent while the REQ's thread waits in the
    read: its look for anything unread does not wait either, so the peer is dropped within
    the heartbeat's timeout (not once the REQ's read gives up)."""
    req, raw = _raw_rep(make, rep_path, HEARTBEAT_IVL=50, HEARTBEAT_TIMEOUT=100)
    req.setsockopt(zmq.RCVTIMEO, 2500)
    monitor = req.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    with raw:  # it answers no PING
        _round_trips(req, raw)
        req.send(b"unanswered")
        outcome: list[Any] = []
        waiter = threading.Thread(target=_recv_into, args=(req, outcome), daemon=True)
        waiter.start()
        assert waiting_in_the_read.wait(DEADLINE)
        began = time.monotonic()
        assert _events(monitor, zmq.EVENT_DISCONNECTED) == [zmq.EVENT_DISCONNECTED]
        assert time.monotonic() - began < 1.5
        waiter.join(DEADLINE)
    assert [type(exc) for exc in outcome] == [zmq.Again]
    req.disable_monitor()
    monitor.close()


def test_a_look_after_a_wait_in_the_read_does_not_wait(make, waiting_in_the_read, rep_path):
    """A descriptor a lent read waited in stays blocking (see "Waiting in the read" in
    engine_lent.py): a look that must not wait, which gives the kept connection back reading
    first what came, still returns at once when nothing did."""
    req, raw = _raw_rep(make, rep_path)
    with raw:
        _round_trips(req, raw)
        assert waiting_in_the_read.is_set()
        began = time.monotonic()
        assert req.poll(0) == 0
        assert time.monotonic() - began < 1.0


def test_a_signal_that_comes_as_the_wait_in_the_read_ends_is_handled_at_once(
    make, read_begins, rep_path
):
    """A signal that comes as the wait in the read times out (so the read does not fail with
    EINTR) has its handler run before the socket waits on: Ctrl-C does not wait for the reply.
    ``_thread.interrupt_main`` marks SIGINT pending without interrupting the read."""
    req, raw = _raw_rep(make, rep_path)
    with raw:
        _round_trips(req, raw)
        read_begins.clear()
        req.setsockopt(zmq.RCVTIMEO, -1)
        req.send(b"request")
        handled = threading.Event()

        def interrupt() -> None:  # (runs once the main thread is in the read: it holds the GIL)
            if read_begins.wait(DEADLINE):
                _thread.interrupt_main()
            if not handled.wait(1.0):  # the handler did not run: the reply ends the wait
                _answer(raw, b"reply")

        helper = threading.Thread(target=interrupt, daemon=True)
        helper.start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            req.recv()
        handled.set()
        assert time.monotonic() - began < 0.5
        helper.join(DEADLINE)


def test_a_short_rcvtimeo_is_kept_by_a_socket_that_reads_its_connection(make, rep_path):
    """RCVTIMEO of a few ms holds to the ms for a REQ, which would first wait in the read
    (whose own timeout the kernel rounds up to whole ticks, 4-20 ms)."""
    req, raw = _raw_rep(make, rep_path)
    with raw:
        _round_trips(req, raw)
        req.send(b"unanswered")
        req.setsockopt(zmq.RCVTIMEO, 2)
        waits = []
        for _ in range(21):
            began = time.monotonic()
            with pytest.raises(zmq.Again):
                req.recv()
            waits.append(time.monotonic() - began)
        assert sorted(waits)[10] < 0.005, waits


def _recv_into(sock, outcome: list[Any]) -> None:
    """``sock.recv()``: what it returned or raised goes into ``outcome``."""
    try:
        outcome.append(sock.recv())
    except BaseException as exc:
        outcome.append(exc)


def test_a_kept_connection_is_closed_with_its_socket(make, monkeypatch):
    """Nobody borrows the kept input when the socket closes: the descriptor is closed all the
    same (the peer sees the end of the stream)."""
    monkeypatch.setattr(engine_lent, "LOAN_IDLE", 3600.0)
    req, raw = _raw_rep(make)
    with raw:
        _round_trips(req, raw)
        req.close(linger=0)
        assert _closed_by_peer(raw), "the kept connection's descriptor was not closed"


def test_a_kept_connection_whose_peer_falls_silent_is_dropped_and_closed(make, monkeypatch):
    """The REQ's heartbeats find the peer silent while it keeps the input, nobody borrowing
    it: the engine closes, and with it the descriptor (the peer sees the end of the stream)."""
    monkeypatch.setattr(engine_lent, "LOAN_IDLE", 3600.0)
    req, raw = _raw_rep(make, HEARTBEAT_IVL=50, HEARTBEAT_TIMEOUT=100)
    with raw:
        _round_trips(req, raw)
        assert _closed_by_peer(raw), "the dropped connection's descriptor was not closed"


def _readable(req) -> None:
    """Wait until the reply is in the kernel, unread, on the connection the REQ keeps."""
    fd = req._lent_poll[0].fileno
    assert select.select([fd], [], [], DEADLINE)[0], "the reply never arrived"


@pytest.mark.parametrize(
    "look",
    [
        lambda req: req.recv(zmq.NOBLOCK) == b"here",
        lambda req: req.poll(0) == zmq.POLLIN,
        lambda req: req.getsockopt(zmq.EVENTS) & zmq.POLLIN,
    ],
    ids=["noblock", "poll-0", "events"],
)
def test_a_reply_already_here_is_seen_by_one_look(make, monkeypatch, look):
    """The reply came while nobody read the kept connection: one look that does not wait
    reads it first (libzmq's I/O thread would have), not after LOAN_IDLE."""
    with _kept_and_answered(make, monkeypatch, b"here") as req:
        _readable(req)
        assert look(req)


def test_a_socket_blocked_in_recv_does_not_wake_its_io_thread(make, monkeypatch):
    """While one borrow lasts (a REP waiting for its next request) the watch over the kept
    loan stops: the I/O thread is not woken every LOAN_IDLE for nothing."""
    looks: list[float] = []
    watch = engine_lent.LentInputMixin._watch_loan

    def counted(self, _=None):
        looks.append(time.monotonic())
        watch(self, _)

    monkeypatch.setattr(engine_lent.LentInputMixin, "_watch_loan", counted)
    req, raw = _raw_rep(make)
    with raw:
        _round_trips(req, raw)
        req.send(b"unanswered")
        req.setsockopt(zmq.RCVTIMEO, 300)  # 30 LOAN_IDLE
        before = len(looks)
        with pytest.raises(zmq.Again):
            req.recv()
        assert len(looks) - before <= 3


def test_a_socket_collected_on_its_io_thread_does_not_deadlock_it(ctx):
    """The garbage collector may finalize (close) a dropped socket on any thread, the I/O
    thread included, at an allocation made while it holds its engine's locks: closing takes
    none of them."""

    def unheld(kind, **options):  # (the ``make`` fixture holds what it makes)
        sock = ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        for name, value in options.items():
            sock.setsockopt(getattr(zmq, name), value)
        return sock

    req, raw = _raw_rep(unheld)
    with raw:
        _round_trips(req, raw)
        engine = req._lent_poll[0]
        cycle: list = [req]
        cycle.append(cycle)
        del req, cycle
        collected = threading.Event()

        def collect_under_the_lock(_=None) -> None:
            with engine._interest_lock:  # as _watch_loan and _update_interest hold it
                gc.collect()
            collected.set()

        gc.disable()
        try:
            engine.io.call_soon(collect_under_the_lock)
            assert collected.wait(DEADLINE), "the I/O thread deadlocked closing the socket"
        finally:
            gc.enable()


def test_a_kept_connection_goes_back_when_a_proxy_takes_the_socket(make, monkeypatch):
    """A proxy waits on its sockets' mailboxes, not in ``recv``: the REQ's reply is read and
    forwarded at once, not after LOAN_IDLE, made an hour here."""
    monkeypatch.setattr(engine_lent, "LOAN_IDLE", 3600.0)
    req, raw = _raw_rep(make)
    with raw:
        _round_trips(req, raw)
        req.send(b"forwarded")  # its reply is the proxy's to forward
        push, pull, control, steer = (
            make(kind) for kind in (zmq.PUSH, zmq.PULL, zmq.PAIR, zmq.PAIR)
        )
        push.connect(bind(pull, "inproc://kept-loan-proxy-out"))
        steer.connect(bind(control, "inproc://kept-loan-proxy-control"))
        outcome: list = []

        def run() -> None:
            try:
                outcome.append(zmq.proxy_steerable(req, push, None, control))
            except BaseException as exc:  # reported below
                outcome.append(exc)

        proxy = threading.Thread(target=run, daemon=True)
        proxy.start()
        _answer(raw, b"forwarded")
        assert pull.recv() == b"forwarded"
        steer.send(b"TERMINATE")
        proxy.join(DEADLINE)
        assert outcome == [0]  # and a REQ whose reply is taken is not asked for another


def test_a_reply_already_here_is_kept_when_the_socket_stops_receiving(make, monkeypatch):
    """``stop_receiving`` keeps what had come in: a reply waiting unread on the connection the
    REQ kept is read before its input stops, and nothing is read after."""
    with _kept_and_answered(make, monkeypatch, b"in before the stop") as req:
        _readable(req)
        req.stop_receiving()
        assert req.recv(zmq.NOBLOCK) == b"in before the stop"


def test_a_pong_decoded_while_a_thread_waits_goes_before_its_next_message_over_curve(make, lmake):
    """A PING that the waiting thread decodes is answered by the I/O thread; a message the
    socket sends before that thread's turn comes must not overtake the PONG: over CURVE each
    is boxed with the next nonce, and libzmq drops a connection whose nonces go backwards."""
    router = lmake(libzmq.ROUTER, HEARTBEAT_IVL=50, HEARTBEAT_TIMEOUT=20000)
    req = make(zmq.REQ, REQ_RELAXED=1, RCVTIMEO=300)
    secure("curve", router, req, libzmq, zmq, make_keys(zmq))
    port = router.bind_to_random_port("tcp://127.0.0.1")
    req.connect(f"tcp://127.0.0.1:{port}")
    router.rcvtimeo = int(DEADLINE * 1000)
    req.send(b"a")
    peer, _, _ = router.recv_multipart()
    (pipe,) = req._pipes
    io = pipe.peer.owner.io  # the connection's I/O thread, held busy until the PONG is due
    turn = threading.Event()
    io.call_soon(lambda _: turn.wait(DEADLINE))
    with pytest.raises(zmq.Again):
        req.recv()  # no reply: libzmq's PINGs come meanwhile, read by this thread
    req.send(b"b")
    turn.set()
    io.call_and_wait(lambda _: None)  # its turn has come: the PONG is on the wire
    req.send(b"c")
    assert router.recv_multipart() == [peer, b"", b"b"]
    assert router.recv_multipart() == [peer, b"", b"c"], "libzmq dropped the connection"
