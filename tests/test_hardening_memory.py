"""What a TCP connection costs a bound socket, and that a closed one costs nothing.

The flood tests run ``bench/conn_flood.py`` (the tool behind the figures in BENCHMARKS.md): the
receiving socket lives in a subprocess of its own, whose RSS and live ``Engine``/``Session``
objects it reports after settling its I/O thread, with no ``gc.collect()`` anywhere (the
collector runs only by itself).  The tests further down follow one object each with a weak
reference, the collector off: what they see freed was freed by reference counting, at once.
"""

from __future__ import annotations

import gc
import json
import socket
import subprocess
import sys
import threading
import weakref
from functools import partial
from pathlib import Path

import pytest

import brokerless as zmq

FLOOD = Path(__file__).resolve().parent.parent / "bench" / "conn_flood.py"
MIB = 1024  # RSS figures are in KiB


def flood(socket_type: str, *, burst: int, cycles: int, send: str = "greeting") -> dict:
    """Run the flood tool against a ``socket_type`` socket of the implementation under test."""
    command = [sys.executable, str(FLOOD), "--impl", zmq.__name__, "--type", socket_type]
    command += ["--send", send, "--burst", str(burst), "--cycles", str(cycles), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def assert_nothing_alive(result: dict) -> None:
    # brokerless reports its live engines and sessions (libzmq's are not Python objects)
    alive = result["alive_after_cycles"]
    assert alive in ({}, {"engines": 0, "sessions": 0}), alive


@pytest.mark.timeout(120)
@pytest.mark.parametrize("socket_type", ["PULL", "ROUTER"])
def test_idle_connections_cost_little_and_closed_ones_nothing(socket_type):
    """1,000 idle connections (each stalled after its greeting) raise RSS by at most 20 MB;
    after they close and 10,000 more come and go, RSS is within 20 MB of the start and no
    engine or session is left."""
    result = flood(socket_type, burst=1000, cycles=10_000)
    start = result["rss_start_kib"]
    assert result["rss_idle_kib"] - start <= 20 * MIB, result
    assert result["rss_after_cycles_kib"] - start <= 20 * MIB, result
    assert_nothing_alive(result)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("socket_type", ["PULL", "ROUTER"])
def test_connections_that_complete_the_handshake_leave_nothing(socket_type):
    """Peers that send READY get a pipe (and a ROUTER routing id): those go when they close."""
    result = flood(socket_type, burst=0, cycles=10_000, send="ready")
    assert result["rss_after_cycles_kib"] - result["rss_start_kib"] <= 20 * MIB, result
    assert_nothing_alive(result)


@pytest.mark.timeout(120)
@pytest.mark.beyond_libzmq  # libzmq listens with a queue of 100: part of the burst retries
def test_a_burst_of_connections_is_accepted_without_retries():
    """2,000 connections opened at once are all served at once: no SYN had to be sent again
    (a listen queue that overflows makes peers retry a second later)."""
    result = flood("PULL", burst=2000, cycles=0)
    assert result["retransmits"] == 0, result
    assert result["accept_s"] < 5, result  # about 0.2 s on 2 vCPUs; the bound is generous


# -- what lets go of a closed connection at once (weak references, the GC kept out) ------------


@pytest.fixture
def no_gc():
    """The cyclic garbage collector off: what is freed must be freed by reference counting."""
    gc.disable()
    yield
    gc.enable()


@pytest.mark.beyond_libzmq
def test_a_disconnected_session_is_freed_at_once(ctx, no_gc):
    """A connecting session waiting to reconnect is freed as soon as it is disconnected: its
    reconnect timer and its connector let go of it."""
    from brokerless.transport.session import Session

    with socket.socket() as probe:  # a port nobody listens on: the connection is refused
        probe.bind(("127.0.0.1", 0))
        uri = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    push = ctx.socket(zmq.PUSH)
    push.reconnect_ivl = 10_000
    monitor = push.get_monitor_socket(zmq.EVENT_CONNECT_RETRIED)
    monitor.rcvtimeo = 5000
    push.connect(uri)
    monitor.recv_multipart()  # refused: the next attempt is in 10 s
    (session,) = [o for o in gc.get_objects() if isinstance(o, Session) and o.socket is push._port]
    ref, io = weakref.ref(session), session.io
    del session
    push.disconnect(uri)
    io.call_and_wait(lambda _: None)  # the close that disconnect queued has run
    assert ref() is None


class Handler:
    """Something an I/O thread holds a bound method of."""

    def method(self, *_: object) -> None:
        pass


@pytest.fixture
def io():
    from brokerless.io import IOThread

    thread = IOThread("test-io")
    yield thread
    thread.stop()
    assert thread.join(5)


def in_io_thread(io, fn):
    """``fn()``'s result, run in the I/O thread (where timers and handlers live)."""
    result = []
    io.call_and_wait(lambda _: result.append(fn()))
    return result[0]


@pytest.mark.beyond_libzmq
def test_a_cancelled_timer_lets_go_of_its_callback(io, no_gc):
    handler = Handler()
    ref = weakref.ref(handler)
    timer = in_io_thread(io, partial(io.call_later, 30, handler.method))
    del handler
    assert ref() is not None  # the pending timer keeps it, as it should
    in_io_thread(io, timer.cancel)
    assert ref() is None


@pytest.mark.beyond_libzmq
def test_cancelled_timers_do_not_pile_up(io):
    """10,000 connections that each cancel a 30 s timer must not leave 10,000 heap entries."""

    def churn() -> int:
        for _ in range(10_000):
            io.call_later(30, Handler().method).cancel()
        return len(io._timers)

    assert in_io_thread(io, churn) <= 128


class Reader:
    """A connection's stand-in: watched by the I/O thread through its bound method."""

    def __init__(self, io, sock, then) -> None:
        self.io, self.sock, self.then = io, sock, then

    def on_ready(self, _: int) -> None:
        self.io.unregister(self.sock)
        self.io.call_later(0, self.then)


@pytest.mark.beyond_libzmq
def test_a_handler_is_not_kept_once_its_turn_is_over(io, no_gc):
    """The loop must not keep the last ready handler (and the connection it belongs to) in a
    local variable until another descriptor fires: a timer due at once looks, with no
    descriptor ready in between."""
    a, b = socket.socketpair()
    seen = threading.Event()
    alive: list[bool] = []

    def look() -> None:
        alive.append(ref() is not None)
        seen.set()

    reader = Reader(io, a, look)
    ref = weakref.ref(reader)
    in_io_thread(io, partial(io.register, a, 1, reader.on_ready))
    del reader
    b.send(b"x")
    assert seen.wait(5)
    assert alive == [False]
    a.close()
    b.close()
