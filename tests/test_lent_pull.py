"""A PULL's thread blocked in ``recv`` reads its one connection itself while large frames come.

brokerless lends a connection's input to the socket's thread waiting in ``recv`` (see "Lent
input" in ``brokerless/transport/engine_lent.py``): a REQ or REP for every reply, a PULL only
while its peer's messages come as frames of ``LARGE`` octets or more, where the hand-over from
the I/O thread costs more than its reading ahead gains.  Whichever thread reads, every message
arrives whole and in order -- across the HWM, sizes that come and go, CURVE boxes -- and the
peer leaving is still seen.  The peers are libzmq's (pyzmq), so the same tests hold for pyzmq.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import zmq as libzmq

import brokerless as zmq
from brokerless.socket.waiting import WaitingMixin
from brokerless.transport import engine_lent
from brokerless.zmtp.frames import DIRECT_MIN, DIRECT_READ_MAX, LARGE
from tests.helpers import bind
from tests.test_faults import handshake

pytestmark = pytest.mark.timeout(60)

DEADLINE = 5.0  # seconds


@pytest.fixture(params=["tcp", "ipc"])
def address(request, tmp_path):
    """Where the PULL binds."""
    return "tcp://127.0.0.1:*" if request.param == "tcp" else f"ipc://{tmp_path}/pull"


def message(i: int, size: int) -> bytes:
    """Message ``i`` of ``size`` octets: its number throughout, so a mix-up shows."""
    return (i.to_bytes(4, "big") * (size // 4 + 1))[:size]


def loans(pull) -> int:
    """How often the PULL's connection was lent to its thread."""
    (pipe,) = pull._pipes
    return pipe.source.engine._loans


def keep_loan(pull, push, size: int) -> None:
    """Messages of ``size`` sent one at a time until the PULL's thread, waiting in ``recv``,
    read one itself and kept the connection's input for its next wait (the I/O thread reads
    the first ones: a PULL borrows only once a read met a large frame)."""
    for i in range(1000):
        push.send(message(i, size))
        assert pull.recv() == message(i, size)
        if pull._loan_kept:
            return
    raise AssertionError("the PULL never kept its connection's input")


def pair(make, lmake, address: str, **options):
    """A brokerless PULL bound at ``address`` and a libzmq PUSH connected to it."""
    pull = make(zmq.PULL, RCVTIMEO=int(DEADLINE * 1000), **options)
    endpoint = bind(pull, address)
    push = lmake(libzmq.PUSH)
    push.connect(endpoint)
    return pull, push


def test_a_pull_reads_large_messages_itself(make, lmake, address, monkeypatch):
    """With the input kept (and the I/O thread's timer never taking it back), the PULL's own
    thread reads a burst of large messages: every one whole, in order."""
    monkeypatch.setattr(engine_lent, "LOAN_IDLE", 3600.0)
    pull, push = pair(make, lmake, address)
    keep_loan(pull, push, LARGE)
    before = loans(pull)
    sent = [message(i, LARGE + i) for i in range(100)]
    for msg in sent:
        push.send(msg)
    assert [pull.recv() for _ in sent] == sent
    assert loans(pull) > before


def test_a_pull_reads_a_large_message_to_its_end_itself(make, lmake, address, monkeypatch):
    """However much of a message has come, the PULL's thread that began reading it keeps the
    input to the end: the I/O thread reads none of a burst of 2 MiB messages (each read in
    several pieces).  Handed back whenever more than twice LARGE was held, the I/O thread read
    on, and 200 kB messages came at about two thirds of the rate (BENCHMARKS.md)."""
    monkeypatch.setattr(engine_lent, "LOAN_IDLE", 3600.0)
    pull, push = pair(make, lmake, address)
    keep_loan(pull, push, LARGE)
    (pipe,) = pull._pipes
    engine = pipe.source.engine
    io_reads = []
    in_event = type(engine)._in_event
    monkeypatch.setattr(
        type(engine), "_in_event", lambda self: (io_reads.append(self), in_event(self))[1]
    )
    sent = [message(i, 2 * DIRECT_READ_MAX + i) for i in range(10)]
    for msg in sent:
        push.send(msg)
    assert [pull.recv() for _ in sent] == sent
    assert engine not in io_reads, "the I/O thread read some of the messages"


def test_a_large_message_all_in_is_read_in_one_turn_of_the_wait(make, tmp_path, monkeypatch):
    """After a large body the PULL's thread reads the next header alone; when the kernel holds
    the rest of that message, it reads the body at once too: one poll a message, not two."""
    polls = []
    poll_lent = WaitingMixin._poll_lent
    monkeypatch.setattr(
        WaitingMixin, "_poll_lent", lambda *args: (polls.append(1), poll_lent(*args))[1]
    )
    with raw_pair(make, tmp_path, monkeypatch) as (pull, peer):
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * DIRECT_MIN)
        del polls[:]
        for i in range(10):  # each fits in the peer's SO_SNDBUF: all of it is in before recv
            msg = message(i, DIRECT_MIN + i)
            peer.sendall(long_frame(msg))
            assert pull.recv() == msg
    assert len(polls) == 10


def long_frame(body: bytes) -> bytes:
    """``body`` as one long frame, the message's last."""
    return b"\x02" + len(body).to_bytes(8, "big") + body


@contextmanager
def raw_pair(make, tmp_path, monkeypatch, **options) -> Iterator[tuple[Any, socket.socket]]:
    """A PULL bound at an ipc path, its thread keeping its input (and the I/O thread's timer
    never taking it back), and its raw PUSH peer (``raw_push``)."""
    monkeypatch.setattr(engine_lent, "LOAN_IDLE", 3600.0)
    pull = make(zmq.PULL, RCVTIMEO=int(DEADLINE * 1000), **options)
    path = f"{tmp_path}/pull"
    pull.bind(f"ipc://{path}")
    with raw_push(pull, path) as peer:
        yield pull, peer


@contextmanager
def raw_push(pull, path: str) -> Iterator[socket.socket]:
    """A PUSH peer of plain socket calls, connected to ``pull`` bound at ``ipc://{path}``,
    once the PULL's thread keeps its input: the messages sent until then are larger than a
    read into the buffer, each ended by a read of its body alone (and, too large for the
    socket's buffer, sent from a thread of their own)."""
    with socket.socket(socket.AF_UNIX) as peer:
        peer.settimeout(DEADLINE)
        peer.connect(path)
        handshake(peer, b"PUSH")
        for i in range(100):
            msg = message(i, 3 * DIRECT_MIN)
            threading.Thread(target=peer.sendall, args=(long_frame(msg),), daemon=True).start()
            assert pull.recv() == msg
            if pull._loan_kept:
                break
        assert pull._loan_kept
        yield peer


class Reads:
    """A connection's socket that notes what each ``recv`` (a read as ``bytes`` of its own)
    was asked for and returned, for a thread to wait on."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.asked: list[int] = []
        self.returned: list[bytes] = []
        self.changed = threading.Condition()

    def recv(self, size: int, flags: int = 0) -> bytes:
        data = self._sock.recv(size, flags)
        with self.changed:
            self.asked.append(size)
            self.returned.append(data)
            self.changed.notify_all()
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


@contextmanager
def noting_reads(pull) -> Iterator[Reads]:
    """The reads of ``pull``'s one connection, noted while the block lasts."""
    (pipe,) = pull._pipes
    engine = pipe.source.engine
    reads = engine.sock = Reads(engine.sock)
    try:
        yield reads
    finally:
        engine.sock = reads._sock


def test_a_body_larger_than_a_direct_read_is_the_bytes_of_one_read(
    make, lmake, address, monkeypatch
):
    """The rest of a body larger than DIRECT_READ_MAX is waited for in one read: the message
    the PULL hands out is the very ``bytes`` that read made.  Read in pieces of at most
    DIRECT_READ_MAX, the pieces were joined in one more copy of the whole body, and 4 MiB
    messages came at 1.16x pyzmq's rate, 16 MiB ones at 0.9x (BENCHMARKS.md)."""
    monkeypatch.setattr(engine_lent, "LOAN_IDLE", 3600.0)
    monkeypatch.setattr(engine_lent, "WAIT_READ_MS", 60_000)  # (RCVTIMEO's wait, at most)
    pull, push = pair(make, lmake, address)
    keep_loan(pull, push, 2 * DIRECT_READ_MAX)
    with noting_reads(pull) as reads:
        for i in range(5):
            msg = message(i, 3 * DIRECT_READ_MAX + i)
            push.send(msg)
            got = pull.recv()
            assert got == msg
            assert any(got is data for data in reads.returned), f"message {i} was joined"


def test_a_large_body_that_comes_late_is_read_whole(make, tmp_path, monkeypatch):
    """The read that waits for a large body's rest ends before all of it came: the rest is
    read as it comes, and the message arrives whole."""
    monkeypatch.setattr(engine_lent, "WAIT_READ_MS", 5)
    msg = message(7, 3 * DIRECT_READ_MAX)
    wire = long_frame(msg)
    part = 9 + DIRECT_READ_MAX
    with raw_pair(make, tmp_path, monkeypatch) as (pull, peer), noting_reads(pull) as reads:

        def send_in_two() -> None:
            peer.sendall(wire[:part])
            with reads.changed:  # the rest only once the PULL read all of the first part
                reads.changed.wait_for(lambda: sum(map(len, reads.returned)) >= part - 9, DEADLINE)
            peer.sendall(wire[part:])

        sender = threading.Thread(target=send_in_two, daemon=True)
        sender.start()
        assert pull.recv() == msg
        sender.join(DEADLINE)
    assert reads.asked[0] == len(msg), "the rest was not waited for in one read"
    assert len(reads.returned[0]) < len(msg)


@contextmanager
def stalled_pull(make, tmp_path, monkeypatch, **options) -> Iterator[tuple[Any, socket.socket]]:
    """A PULL whose thread keeps its input, and its raw peer, after a 3 MiB frame's header:
    the PULL's next ``recv`` reads that header alone (the message before ended with a body
    read on its own), and then waits for the body's rest -- a rest of more than one direct
    read."""
    with raw_pair(make, tmp_path, monkeypatch, **options) as (pull, peer):
        peer.sendall(long_frame(message(7, 3 * DIRECT_READ_MAX))[:9])
        yield pull, peer


def test_a_peer_trickling_a_large_body_costs_recv_only_its_rcvtimeo(make, tmp_path, monkeypatch):
    """A peer sends a large body an octet every 2 ms: the PULL waits in a read for the rest
    once a frame, not once for every read that came short -- short pieces were merged into the
    frame's first, which kept offering the wait, and ``recv`` with RCVTIMEO 50 ms gave up only
    after seconds (41 s at an octet every 10 ms), ``term()`` as late."""
    with stalled_pull(make, tmp_path, monkeypatch) as (pull, peer):
        stop = threading.Event()

        def trickle() -> None:
            while not stop.wait(0.002):
                peer.sendall(b"x")

        trickler = threading.Thread(target=trickle, daemon=True)
        trickler.start()
        try:
            pull.rcvtimeo = 50
            began = time.monotonic()
            with pytest.raises(zmq.Again):
                pull.recv()
            waited = time.monotonic() - began
        finally:
            stop.set()
            trickler.join(DEADLINE)
    assert waited < 1.0, f"recv gave up after {waited:.2f} s, its RCVTIMEO 0.05 s"


@pytest.mark.parametrize("come", [0, 3000], ids=["nothing", "some"])
def test_a_signal_that_returns_does_not_keep_recv_waiting_for_a_large_body(
    make, tmp_path, monkeypatch, come
):
    """Python restarts a read that a signal cut short before anything came, with SO_RCVTIMEO's
    whole wait again: under a signal every 5 ms whose handler returns, a read waiting for a
    large body's rest kept ``recv`` (and ``term()``) waiting for ever once the peer stalled.
    The read waits only when the kernel holds some of the rest (a signal then ends it with
    what came), and ``recv`` gives up at its RCVTIMEO."""
    signals: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda number, _: signals.append(number))
    stop = threading.Event()
    main = threading.get_ident()

    def signal_often() -> None:  # (SIGALRM is pytest-timeout's)
        while not stop.wait(0.005):
            signal.pthread_kill(main, signal.SIGUSR1)

    try:
        with stalled_pull(make, tmp_path, monkeypatch) as (pull, peer):
            peer.sendall(b"y" * come)
            signaller = threading.Thread(target=signal_often, daemon=True)
            signaller.start()
            pull.rcvtimeo = 100
            began = time.monotonic()
            with pytest.raises(zmq.Again):
                pull.recv()
            waited = time.monotonic() - began
            stop.set()
            signaller.join(DEADLINE)
    finally:
        stop.set()
        signal.signal(signal.SIGUSR1, previous)
    assert signals, "no signal came while recv waited"
    assert waited < 2.0, f"recv gave up after {waited:.2f} s, its RCVTIMEO 0.1 s"


def test_a_peer_streaming_a_large_body_is_not_dropped_by_heartbeats(make, tmp_path, monkeypatch):
    """While the PULL's thread waits in a read for a large body's rest, what comes goes into
    that read, unseen by the heartbeat's peek: a live peer sending steadily was dropped as
    silent (HEARTBEAT_IVL 20 ms, HEARTBEAT_TIMEOUT 40 ms, a wait longer than both), and the
    message it was sending lost."""
    monkeypatch.setattr(engine_lent, "WAIT_READ_MS", 300)
    with stalled_pull(make, tmp_path, monkeypatch, HEARTBEAT_IVL=20, HEARTBEAT_TIMEOUT=40) as (
        pull,
        peer,
    ):
        wire = long_frame(message(7, 3 * DIRECT_READ_MAX))[9:]
        sent = [message(8 + i, 3 * DIRECT_READ_MAX) for i in range(2)]
        wire += b"".join(map(long_frame, sent))
        stop = threading.Event()

        def stream() -> None:  # 64 KiB every 2 ms: never silent for long
            for at in range(0, len(wire), 64 * 1024):
                try:
                    peer.sendall(wire[at : at + 64 * 1024])
                except OSError:  # (dropped)
                    return
                if stop.wait(0.002):
                    return

        sender = threading.Thread(target=stream, daemon=True)
        sender.start()
        try:
            assert [pull.recv() for _ in range(3)] == [message(7, 3 * DIRECT_READ_MAX), *sent]
        finally:
            stop.set()
            sender.join(DEADLINE)


def test_a_wait_for_a_large_body_ends_with_rcvtimeo(make, tmp_path, monkeypatch):
    """The read that waits for a large body's rest waits no longer than ``recv`` may: a peer
    that stops halfway costs the PULL its RCVTIMEO, then Again."""
    monkeypatch.setattr(engine_lent, "WAIT_READ_MS", 60_000)
    msg = message(7, 3 * DIRECT_READ_MAX)
    with raw_pair(make, tmp_path, monkeypatch) as (pull, peer):
        peer.sendall(long_frame(msg)[: 9 + 100_000])
        pull.rcvtimeo = 300
        began = time.monotonic()
        with pytest.raises(zmq.Again):
            pull.recv()
        waited = time.monotonic() - began
    assert 0.29 < waited < 1.5, f"recv gave up after {waited:.2f} s, its RCVTIMEO 0.3 s"


def test_a_pull_leaves_smaller_messages_to_its_io_thread(make, lmake, address):
    """Below LARGE the I/O thread reads ahead while the PULL's thread consumes: the PULL never
    borrows the connection, however often it waits."""
    pull, push = pair(make, lmake, address)
    for i in range(300):
        push.send(message(i, LARGE - 100))
        assert pull.recv() == message(i, LARGE - 100)
    assert loans(pull) == 0
    assert not pull._loan_kept


def test_large_messages_beyond_the_hwm_arrive_in_order_while_a_pull_reads_them(
    make, lmake, address, monkeypatch
):
    """One lent read holds more large messages than the pipe takes (RCVHWM 2): the rest waits,
    reading stops, and the I/O thread delivers it as the pipe drains -- nothing lost or
    reordered."""
    monkeypatch.setattr(engine_lent, "LOAN_IDLE", 3600.0)
    pull, push = pair(make, lmake, address, RCVHWM=2)
    keep_loan(pull, push, LARGE)
    sent = [message(i, 100_000) for i in range(60)]
    for msg in sent:
        push.send(msg)
    assert [pull.recv() for _ in sent] == sent


@pytest.mark.parametrize(
    ("sizes", "count"),
    [
        ([1, 100, 200_000, 1024, LARGE, 10, 3 * LARGE, 5000], 400),
        # Bodies of DIRECT_MIN or more are read as bytes of their own, at most DIRECT_READ_MAX
        # at a time, and then only the next header (zmtp.frames): sizes either side of both.
        ([DIRECT_MIN - 1, DIRECT_MIN, 7, DIRECT_MIN + 1, 300_000, DIRECT_READ_MAX + 12345, 1], 21),
    ],
    ids=["around-LARGE", "around-DIRECT_MIN"],
)
def test_messages_of_every_size_arrive_in_order_as_the_loan_comes_and_goes(
    make, lmake, address, sizes, count
):
    """Small and large messages mixed: the PULL borrows after reads that met a large frame and
    not after the others, the I/O thread reads the rest -- every message whole, in order."""
    pull, push = pair(make, lmake, address)
    sent = [message(i, sizes[i % len(sizes)]) for i in range(count)]
    for msg in sent:
        push.send(msg)
    assert [pull.recv() for _ in sent] == sent
    for i, msg in enumerate(sent):  # and one by one, so the PULL waits before each
        push.send(msg)
        assert pull.recv() == msg, f"message {i}"
    assert loans(pull) > 0


def test_a_pull_reading_large_messages_sees_its_peer_leave(make, lmake, monkeypatch):
    """The peer closes while the PULL's thread, holding the input, waits in ``recv``: the end of
    the stream goes to the I/O thread (DISCONNECTED) and the waiting thread waits on quietly."""
    monkeypatch.setattr(engine_lent, "LOAN_IDLE", 3600.0)
    pull, push = pair(make, lmake, "tcp://127.0.0.1:*")
    monitor = pull.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    keep_loan(pull, push, LARGE)
    cpu: list[float] = []
    waiting = threading.Event()

    def wait_for_a_message() -> None:
        pull.setsockopt(zmq.RCVTIMEO, 2000)
        start = time.thread_time()
        waiting.set()
        try:
            pull.recv()
        except zmq.Again:
            pass
        cpu.append(time.thread_time() - start)

    waiter = threading.Thread(target=wait_for_a_message, daemon=True)
    waiter.start()
    assert waiting.wait(DEADLINE)
    push.close(linger=0)
    assert monitor.poll(int(DEADLINE * 1000)), "no DISCONNECTED while the PULL waited"
    event = int.from_bytes(monitor.recv_multipart()[0][:2], "little")
    assert event == zmq.EVENT_DISCONNECTED
    waiter.join(DEADLINE)
    assert not waiter.is_alive()
    assert cpu[0] < 0.5, f"the waiting thread used {cpu[0]:.1f} s of CPU in 2 s"


def test_a_curve_pull_reads_large_boxes_itself(make, lmake, monkeypatch):
    """Over CURVE each message is a box: the PULL's thread reads and opens them itself."""
    monkeypatch.setattr(engine_lent, "LOAN_IDLE", 3600.0)
    (server_public, server_secret) = zmq.curve_keypair()
    (client_public, client_secret) = zmq.curve_keypair()
    pull = make(zmq.PULL, RCVTIMEO=int(DEADLINE * 1000))
    pull.curve_server = True
    pull.curve_secretkey = server_secret
    endpoint = bind(pull, "tcp://127.0.0.1:*")
    push = lmake(libzmq.PUSH)
    push.curve_serverkey = server_public
    push.curve_publickey = client_public
    push.curve_secretkey = client_secret
    push.connect(endpoint)
    keep_loan(pull, push, LARGE)
    before = loans(pull)
    sent = [message(i, LARGE + 7 * i) for i in range(50)]
    for msg in sent:
        push.send(msg)
    assert [pull.recv() for _ in sent] == sent
    assert loans(pull) > before


def test_a_conflating_pull_leaves_its_input_to_the_io_thread(make, lmake, address):
    """CONFLATE keeps only the newest message, which only the I/O thread's writes into the pipe
    do: a conflating PULL never borrows its connection, however large the messages, and after a
    burst it hands out messages in order up to the newest."""
    pull, push = pair(make, lmake, address, CONFLATE=1, RCVHWM=1)
    for i in range(20):
        push.send(message(i, LARGE))
        assert pull.recv() == message(i, LARGE)
    for i in range(100, 103):
        push.send(message(i, 70_000))
    burst = [message(i, 70_000) for i in range(100, 103)]
    got: list[bytes] = []
    while not got or got[-1] != burst[-1]:
        got.append(pull.recv())
    assert [burst.index(msg) for msg in got] == sorted(set(map(burst.index, got)))  # in order
    assert loans(pull) == 0


#: The receiver, run in a process of its own: the C allocator's state there is a fresh
#: process's, as in a server that has not yet freed a large block (after one, glibc serves such
#: reads from its heap, and the harm below does not show).  Its thread keeps its input first
#: (as in a stream of large messages); told how much the peer will send, it polls or waits in
#: ``recv`` (argv[1]) while the octets come, and reports once it has them all.
_RECEIVER = """
import sys, time
import brokerless as zmq

def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096

def mappings():
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)

ctx = zmq.Context()
pull = ctx.socket(zmq.PULL)
pull.rcvtimeo = 10_000
print(pull.bind_to_random_port("tcp://127.0.0.1"), flush=True)
while True:  # messages of LARGE octets (from the C heap), until the PULL's thread keeps its input
    pull.recv()
    print("kept" if pull._loan_kept else "more", flush=True)
    if pull._loan_kept:
        break
rss0, maps0 = rss(), mappings()
total = int(sys.stdin.readline())
deadline = time.monotonic() + 20
engine = next(iter(pull._pipes)).source.engine
pull.rcvtimeo = 10
while engine.conn.decoder.buffered < 9 + total and time.monotonic() < deadline:
    if sys.argv[1] == "poll":
        pull.poll(10)
    else:  # (the PULL's thread reads the connection itself, and may wait in the read)
        try:
            pull.recv()
        except zmq.Again:
            pass
print(engine.conn.decoder.buffered - 9, rss() - rss0, mappings() - maps0, flush=True)
pull.close(0)
ctx.term()
"""


@pytest.mark.parametrize("wait", ["poll", "recv"])
def test_a_large_frame_trickled_in_small_writes_costs_its_receiver_about_its_octets(wait):
    """A peer sends a frame whose header claims a terabyte, in 4 KiB writes: the receiver
    holds about the octets that came, in few memory mappings -- whether it polls or waits in
    ``recv``, where its thread reads the connection and may wait in the read for the rest (at
    most WAIT_READ_MAX of it asked).  Read into a ``bytes`` of up to 1 MiB each and shrunk to
    what came, they had cost 2x the octets and a memory mapping a read -- enough of them and
    the process can make no thread or mapping at all."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.path.join(root, "src"))
    receiver = subprocess.Popen(
        [sys.executable, "-c", _RECEIVER, wait],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        port = int(receiver.stdout.readline())
        total, segment = 24 << 20, b"x" * 4096
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as peer:
            peer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            handshake(peer, b"PUSH")
            for i in range(1000):
                peer.sendall(long_frame(message(i, LARGE)))
                if receiver.stdout.readline() == "kept\n":
                    break
            receiver.stdin.write(f"{total}\n")
            receiver.stdin.flush()
            peer.sendall(b"\x02" + (1 << 40).to_bytes(8, "big"))  # never finished
            for _ in range(total // len(segment)):
                peer.sendall(segment)
                pause = time.perf_counter() + 30e-6  # (most writes then arrive on their own)
                while time.perf_counter() < pause:
                    pass
            held, grown, mapped = map(int, receiver.stdout.readline().split())
        assert receiver.wait(DEADLINE) == 0
    finally:
        receiver.kill()
    assert held == total, "the receiver did not read all that was sent"
    assert grown < 1.3 * held, f"{grown} octets of memory for {held} held"
    assert mapped < 50, f"{mapped} more memory mappings for {held} octets held"
