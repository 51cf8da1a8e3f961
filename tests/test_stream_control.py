"""The control channel between a driver and its workers (``stream/control.py``): only signed
messages are read, a worker's commands go only over a connection it proved is its own,
strangers cost the driver bounded memory, and a worker whose driver is gone stops by itself."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq as pyzmq  # strangers speak real libzmq

import brokerless as zmq
from brokerless.stream import Config, Topology, all_
from brokerless.stream.assignment import assign
from brokerless.stream.control import (
    MAX_FRAME,
    AttemptState,
    DriverGone,
    Signer,
    WorkerChannel,
    new_key,
    serve,
    worker_identity,
)
from brokerless.stream.errorlog import KEEP, ErrorReport
from brokerless.stream.multiprocess import run_multiprocess
from brokerless.stream.worker import Worker

from .relay import Relay
from .stream_topologies import Counter, Sink

pytestmark = pytest.mark.timeout(60)


ROOT = Path(__file__).resolve().parent.parent


def test_only_messages_signed_with_the_key_for_that_worker_are_read():
    key = new_key()
    signer = Signer(key)
    frames = signer.pack(("stats", 3), b"1:0:00")
    assert signer.unpack(frames, b"1:0:00") == ("stats", 3)
    assert Signer(new_key()).unpack(frames, b"1:0:00") is None
    assert signer.unpack(frames, b"1:1:00") is None  # not another worker's ...
    assert signer.unpack(frames, b"2:0:00") is None  # ... nor another attempt's ...
    assert signer.unpack(frames, b"1:0:01") is None  # ... nor another process's
    assert signer.unpack([frames[0], frames[1] + b"."], b"1:0:00") is None
    assert signer.unpack([frames[1]], b"1:0:00") is None


def test_worker_ids_carry_a_random_part():
    ids = {worker_identity(3, 1) for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(rb"3:1:[0-9a-f]{16}", i) for i in ids)


def endless_worker() -> Worker:
    plan = (
        Topology("endless-control")
        .spout("counter", Counter)
        .bolt("sink", Sink, inputs={"counter": all_()})
    ).build()
    return Worker(plan, assign(plan, 1), 0)


def threads_of(name: str) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(name + ":")]


@pytest.fixture
def driver():
    """A stand-in driver: a ROUTER on tcp, and the endpoint and key its worker gets."""
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.linger = 0
    router.rcvtimeo = 10_000
    port = router.bind_to_random_port("tcp://127.0.0.1")
    yield router, f"tcp://127.0.0.1:{port}", new_key()
    router.close(linger=0)
    context.term()


@pytest.fixture
def serving(driver):
    """``start(attempt, driver_timeout)``: a running worker serving ``driver``'s commands in
    a thread; returns the thread and what ``serve`` raised (``outcome["error"]``)."""
    _, endpoint, key = driver
    context = zmq.Context()
    worker = endless_worker()
    made: list = []

    def start(attempt: int, driver_timeout: float) -> tuple[threading.Thread, dict]:
        channel = WorkerChannel(context, endpoint, key, attempt, 0, driver_timeout)
        outcome: dict = {}

        def run() -> None:
            try:
                serve(worker, channel, {"pid": 0})
            except BaseException as exc:
                outcome["error"] = exc

        worker.start([""])
        thread = threading.Thread(target=run)
        thread.start()
        made.append((thread, channel))
        return thread, outcome

    yield start
    worker.stop()
    for thread, channel in made:
        thread.join(20)
        channel.close(linger=0)
    context.term()
    assert threads_of("endless-control") == []


def next_message(key: bytes, router: zmq.Socket) -> tuple[bytes, bytes, tuple]:
    """The next message a worker sent to the stand-in driver, past its "hello" and "events":
    (the driver's routing id of its connection, the worker's id, the message)."""
    while True:
        connection, identity, *frames = router.recv_multipart()
        message = Signer(key).unpack(frames, identity)
        if message[0] not in ("hello", "events"):
            return connection, identity, message


def test_a_worker_ignores_unsigned_commands_and_answers_signed_ones(driver, serving):
    router, _, key = driver
    thread, outcome = serving(attempt=2, driver_timeout=5.0)
    connection, identity, message = next_message(key, router)
    assert re.fullmatch(rb"2:0:[0-9a-f]{16}", identity)
    assert message == ("started", {"pid": 0})

    def command(signer: Signer, message: tuple, signed_for: bytes) -> None:
        router.send_multipart([connection, *signer.pack(message, signed_for)])

    command(Signer(new_key()), ("stop",), identity)  # forged
    command(Signer(key), ("stop",), b"1" + identity[1:])  # an old attempt's
    command(Signer(key), ("stop",), worker_identity(2, 0))  # another process's (same index)
    command(Signer(key), ("activity", 7), identity)
    assert next_message(key, router)[2][:2] == ("activity", 7)  # still running: all dropped
    command(Signer(key), ("stop",), identity)
    thread.join(20)
    assert not thread.is_alive() and outcome == {}
    final = next_message(key, router)[2]
    assert final[0] == "final" and final[1]["hung"] == []


def test_a_worker_answers_for_its_figures_before_its_spouts_opened():
    # The driver may ask (the UI polls) as soon as it said start, before each executor's
    # thread has opened its tasks, and a worker stopped before it started sends its figures
    # too: the spout's pending trees are there from the start (the worker died of it).
    worker = endless_worker()
    counter = next(e for e in worker.snapshot()["executors"] if e["component"] == "counter")
    assert (counter["pending"], counter["pending_max"], counter["emitted"]) == (0, 0, 0)


def test_a_worker_whose_driver_is_gone_stops_by_itself(driver, serving):
    router, endpoint, key = driver
    thread, outcome = serving(attempt=1, driver_timeout=1.0)
    assert next_message(key, router)[2][0] == "started"
    router.close(linger=0)  # the driver vanishes without a word
    thread.join(30)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), DriverGone)
    assert f"no connection to the driver at {endpoint}" in str(outcome["error"])


def test_a_worker_splits_its_reports_into_messages_the_driver_takes(driver):
    """Captured tuples and errors worth several MiB leave in messages of about 1 MiB, all of
    them, in order, numbered; one report larger than the channel carries is refused with a
    clear error (it would cost the worker its connection)."""
    router, endpoint, key = driver
    context = zmq.Context()
    channel = WorkerChannel(context, endpoint, key, 1, 0)
    try:
        captured = [("spout", "default", (i, os.urandom(1000))) for i in range(5000)]
        errors = [(n, ErrorReport("bolt", 1, 0, "boom", "x" * 5000)) for n in range(200)]
        channel.send_events(captured, errors)
        got_captured: list = []
        got_errors: list = []
        numbers = []
        while len(got_captured) < len(captured) or len(got_errors) < len(errors):
            _, identity, *frames = router.recv_multipart()
            assert len(frames[1]) <= 1.1 * (1 << 20)
            kind, number, part_captured, part_errors = Signer(key).unpack(frames, identity)
            assert kind == "events"
            numbers.append(number)
            got_captured += part_captured
            got_errors += part_errors
        assert (got_captured, got_errors) == (captured, errors)
        assert numbers == list(range(len(numbers))) and len(numbers) > 1
        with pytest.raises(ValueError, match="larger than the control channel carries"):
            channel.send_events([("spout", "default", (bytes(MAX_FRAME),))], [])
    finally:
        channel.close(linger=0)
        context.term()


def test_a_worker_ships_its_latest_errors_and_the_driver_counts_every_one(driver):
    """A worker keeps each task's latest reports and ships those since the last it shipped,
    numbered: a driver taking its events keeps the latest and counts the ones dropped in
    between (before, a worker shipped by list index and kept only its first 1,000)."""
    router, endpoint, key = driver
    context = zmq.Context()
    worker = endless_worker()
    channel = WorkerChannel(context, endpoint, key, 1, 0)
    thread = threading.Thread(target=serve, args=(worker, channel, {"pid": 0}))
    thread.start()
    state = AttemptState()
    signer = Signer(key)
    route: list[bytes] = []

    def take_until(total: int) -> None:
        while state.errors.total < total:
            connection, identity, *frames = router.recv_multipart()  # (RCVTIMEO: 10 s)
            route[:] = [connection, identity]
            message = signer.unpack(frames, identity)
            if message[0] == "events":
                state.take_events(0, message[1], message[2], message[3])

    try:
        for batch in (range(25), range(25, 40)):
            for i in batch:
                worker.record_error("sink", 2, ValueError(i))
            take_until(batch.stop)
        assert state.errors.total == 40
        kept = state.errors.reports()
        assert [e.error for e in kept] == [repr(ValueError(i)) for i in range(40 - KEEP, 40)]
    finally:
        if route:  # (the worker's hello gives one)
            connection, identity = route
            router.send_multipart([connection, *signer.pack(("stop",), identity)])
        thread.join(20)
        channel.close(linger=0)
        context.term()
    assert not thread.is_alive()


def endless_topology(security: str = "curve") -> Topology:
    """An endless topology; the stranger tests below run it with ``security="none"``: they
    test what holds when the control channel is open to them (signatures, proofs, limits);
    with CURVE they cannot connect at all (tests/test_stream_security.py)."""
    return (
        Topology("endless-control", Config(security=security))
        .spout("counter", Counter)
        .bolt("sink", Sink, inputs={"counter": all_()})
    )


def stranger_frames(signer: Signer, message: tuple, identity: bytes) -> list[bytes]:
    return [identity, *signer.pack(message, identity)]


def test_the_driver_reads_only_signed_messages_of_its_current_attempt():
    """A stranger on the control channel: unsigned messages and messages of an older attempt
    are dropped (either "failed" would end the run), and the stranger's stream reaches the
    driver -- a message signed for the current attempt, after them, is read."""
    with run_multiprocess(endless_topology("none"), workers=2) as run:
        context = zmq.Context()
        endpoint = run._control.getsockopt(zmq.LAST_ENDPOINT).decode()
        signer = run._signer  # the run's own key, as a worker has it
        stranger = context.socket(zmq.DEALER)
        stranger.linger = 0
        stranger.connect(endpoint)
        current, old = worker_identity(run.attempt, 9), worker_identity(run.attempt - 1, 9)
        try:
            stranger.send_multipart(stranger_frames(Signer(new_key()), ("failed", "x"), current))
            stranger.send_multipart(stranger_frames(signer, ("failed", "an old one's"), old))
            marker = ("stranger", "default", ("read",))
            stranger.send_multipart(stranger_frames(signer, ("events", 0, [marker], []), old))
            stranger.send_multipart(stranger_frames(signer, ("events", 0, [marker], []), current))
            deadline = time.monotonic() + 10
            while marker not in run.captured():
                assert time.monotonic() < deadline, "the signed message never arrived"
                run._look(0.1)
            assert run.captured().count(marker) == 1  # the old attempt's copy was dropped
            assert run.errors() == []
            run.activity()  # answers: no "failed" was taken (it would raise WorkerProcessError)
        finally:
            stranger.close(linger=0)
            context.term()


class Stranger(threading.Thread):
    """Connects to the control channel claiming worker 0.  As its routing id it sets the
    worker's id, the id the worker's connection has at the driver, or the old predictable
    ``b"<attempt>:0"``; on each connection it says hello as worker 0 (a replay of a signed
    hello), replays the worker's proof and sends an unsigned one.  ``every`` seconds it
    reconnects with the next claim; with ``every=None`` it connects once with each claim and
    stays.  ``got`` holds what reached it."""

    def __init__(self, run, every: float | None) -> None:
        super().__init__(name="stranger")
        self.connection, self.identity = run.state.routes[0]
        self.claims = [self.identity, self.connection, b"%d:0" % run.attempt]
        self.endpoint = run._control.getsockopt(zmq.LAST_ENDPOINT).decode()
        signer = run._signer
        proof = ("proof", signer.challenge(self.connection))
        self.messages = [
            stranger_frames(signer, ("hello",), self.identity),
            stranger_frames(signer, proof, self.identity),
            stranger_frames(Signer(new_key()), proof, self.identity),
        ]
        self.every = every
        self.connections = 0
        self.got: list[list[bytes]] = []
        self.done = threading.Event()
        self.context = pyzmq.Context()

    def run(self) -> None:
        if self.every is None:
            self._claim(self.claims, None)
        else:
            for claim in itertools.cycle(self.claims):
                if self._claim([claim], self.every):
                    return

    def _claim(self, claims: list[bytes], seconds: float | None) -> bool:
        """Connect once per claim, speak, stay ``seconds`` (None: until done); True when done."""
        socks = []
        for claim in claims:
            sock = self.context.socket(pyzmq.DEALER)
            sock.linger = 0
            sock.routing_id = claim
            sock.connect(self.endpoint)
            for frames in self.messages:
                sock.send_multipart(frames)
            socks.append(sock)
        self.connections += len(claims)
        done = self.done.wait(seconds)
        for sock in socks:
            while sock.poll(0):
                self.got.append(sock.recv_multipart())
            sock.close(linger=0)
        return done


@pytest.mark.parametrize("every", [None, 0.2], ids=["once", "every 200 ms"])
def test_a_stranger_claiming_a_workers_id_takes_no_question(every):
    """Whatever a stranger claims, worker 0's route stays on the connection it proved: every
    question of a run that keeps working is answered (none lost, none timed out), and the
    stranger gets nothing but challenges it cannot answer."""
    with run_multiprocess(endless_topology("none"), workers=2) as run:
        route = run.state.routes[0]
        stranger = Stranger(run, every)
        stranger.start()
        try:
            questions = 0
            while questions < 10 or stranger.connections < (3 if every is None else 12):
                run._ask("activity", timeout=10.0)  # the default is 30 s
                questions += 1
            assert run.state.routes[0] == route
            assert run.statistics()["counter"].emitted > 0
        finally:
            stranger.done.set()
            stranger.join(10)
            stranger.context.destroy(linger=0)
    for frames in stranger.got:
        message = Signer(run._signer.key).unpack(frames, stranger.identity)
        assert message is not None and message[0] == "challenge", message


def test_a_worker_that_reconnects_proves_its_new_connection_and_its_questions_follow():
    """The driver drops every connection (its control endpoint is unbound and bound again);
    the workers reconnect, prove their new connections, and the questions asked meanwhile
    are answered."""
    with run_multiprocess(endless_topology(), workers=2) as run:
        before = dict(run.state.routes)
        endpoint = run._control.getsockopt(zmq.LAST_ENDPOINT).decode()
        run._control.unbind(endpoint)
        run._control.bind(endpoint)
        run._ask("activity", timeout=20.0)
        assert all(run.state.routes[i][0] != before[i][0] for i in (0, 1))
        assert all(run.state.routes[i][1] == before[i][1] for i in (0, 1))
        assert all(run.state.proved[i] >= 2 for i in (0, 1))  # what a start that timed out says
        assert re.fullmatch(
            r"worker 1: \d+ message\(s\), \d+ connection\(s\) proved", run.state.silent(1)
        )


def test_a_frame_over_max_frame_disconnects_its_sender():
    with run_multiprocess(endless_topology("none"), workers=1) as run:
        endpoint = run._control.getsockopt(zmq.LAST_ENDPOINT).decode()
        context = pyzmq.Context()
        try:
            stranger = context.socket(pyzmq.DEALER)
            monitor = stranger.get_monitor_socket(pyzmq.EVENT_DISCONNECTED)
            stranger.connect(endpoint)
            stranger.send(bytes(MAX_FRAME + 1))
            assert monitor.poll(20_000), "the driver kept the connection"
            run.activity()
        finally:
            context.destroy(linger=0)


_DRIVER = textwrap.dedent("""
    import sys
    import brokerless as zmq
    from brokerless.stream import Config, Topology, all_
    from brokerless.stream.multiprocess import run_multiprocess
    from tests.stream_topologies import Counter, Sink
    # security="none": over CURVE a stranger's handshake fails and it sends nothing at all;
    # here the limits are what stands between its flood and the driver's memory
    topology = (Topology("endless", Config(security="none")).spout("counter", Counter)
                .bolt("sink", Sink, inputs={"counter": all_()}))
    with run_multiprocess(topology, workers=1) as run:
        print(run._control.getsockopt(zmq.LAST_ENDPOINT).decode(), flush=True)
        sys.stdin.readline()  # the test floods the control channel meanwhile
        print(len(run.activity()), flush=True)
""")


def _rss(pid: int) -> int:
    """Resident set size of process ``pid`` in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.mark.timeout(120)
def test_a_flood_of_unsigned_messages_costs_the_driver_bounded_memory():
    """256 MiB of unsigned 1 MiB messages at a driver process whose own thread is busy
    elsewhere: its socket takes a few at a time and the run's supervisor drops them, or the
    socket pushes the stranger back; either way its memory stays where it was, and the run
    answers as before."""
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    context = pyzmq.Context()
    try:
        endpoint = driver.stdout.readline().strip()
        assert endpoint, "the driver did not start"
        before = _rss(driver.pid)
        stranger = context.socket(pyzmq.DEALER)
        stranger.sndhwm = 4
        stranger.connect(endpoint)
        junk = bytes(1 << 20)
        sent = 0
        while sent < 256:
            try:
                stranger.send(junk, pyzmq.NOBLOCK)
                sent += 1
            except pyzmq.Again:
                if not stranger.poll(2000, pyzmq.POLLOUT):  # two seconds without room
                    break
        grown = _rss(driver.pid) - before
        assert grown < 64 << 20, f"the driver grew by {grown >> 20} MiB ({sent} MiB sent)"
        driver.stdin.write("go\n")
        driver.stdin.flush()
        assert driver.stdout.readline().strip() == "1"  # its one worker answered
        assert driver.wait(30) == 0
    finally:
        context.destroy(linger=0)
        if driver.poll() is None:
            driver.kill()
        driver.wait()
        driver.stdin.close()
        driver.stdout.close()


@contextlib.contextmanager
def relayed_channel() -> Iterator[
    tuple[WorkerChannel, Relay, Callable[[str], tuple], Callable[[tuple], None]]
]:
    """A worker's channel to a bare ROUTER (the driver's socket) through a TCP relay,
    ``hear(kind)``: the first ``kind`` message the ROUTER takes while the worker's loop runs,
    and ``tell(command)``: a signed command over the connection last heard from."""
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.linger = 0
    relay = Relay(router.bind_to_random_port("tcp://127.0.0.1"))
    key = new_key()
    channel = WorkerChannel(context, f"tcp://127.0.0.1:{relay.port}", key, 1, 0)
    last: list[bytes] = []

    def hear(kind: str, timeout: float = 10.0) -> tuple:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            channel.recv(0.02)  # what serve() does: watch the connection, take commands
            while router.poll(0):
                connection, identity, *frames = router.recv_multipart()
                last[:] = [connection]
                message = Signer(key).unpack(frames, identity)
                if message[0] == kind:
                    return message
        raise AssertionError(f"the driver heard no {kind!r} within {timeout:g} s")

    def tell(command: tuple) -> None:
        router.send_multipart([last[0], *Signer(key).pack(command, channel.identity)])

    try:
        yield channel, relay, hear, tell
    finally:
        channel.close(linger=0)
        relay.close()
        router.close(linger=0)
        context.term()


def test_what_a_worker_reported_is_said_again_when_its_connection_is_lost():
    """Captured tuples and errors (a run's ``captured()`` and ``errors()``) must reach the
    driver too: a worker says all its events again on its next connection, numbered, for the
    driver to keep each once.  Here a relay swallows one report and cuts the connection."""
    with relayed_channel() as (channel, relay, hear, _):
        hear("hello")
        relay.lose(lambda: channel.send_events([("count", "default", ("sequel", 1))], []))
        assert hear("events") == ("events", 0, [("count", "default", ("sequel", 1))], [])


def test_a_worker_says_again_only_the_events_the_driver_has_not_taken():
    """A worker keeps each events message until the driver says it has it ("taken"), and
    then lets go of it: only the rest is said again on a new connection (a run capturing
    tuples would otherwise hold every one of them twice, in the worker and in the driver)."""
    with relayed_channel() as (channel, relay, hear, tell):
        hear("hello")
        channel.send_events([("count", "default", ("first", 1))], [])
        assert hear("events")[1] == 0
        tell(("taken", 1))
        tell(("challenge", b"after"))  # commands are taken in order: the proof says when
        assert hear("proof") == ("proof", b"after")
        relay.lose(lambda: channel.send_events([("count", "default", ("second", 2))], []))
        assert hear("events") == ("events", 1, [("count", "default", ("second", 2))], [])


def test_the_driver_tells_a_worker_which_events_it_has():
    """Each events message the driver takes is answered with ("taken", n): it has every one
    below n, in order.  A stand-in for worker 5 proves its connection, then reports twice."""
    with run_multiprocess(endless_topology("none"), workers=1) as run:
        context = zmq.Context()
        endpoint = run._control.getsockopt(zmq.LAST_ENDPOINT).decode()
        signer = run._signer
        identity = worker_identity(run.attempt, 5)
        worker = context.socket(zmq.DEALER)
        worker.linger = 0
        worker.connect(endpoint)

        def say(message: tuple) -> None:
            worker.send_multipart([identity, *signer.pack(message, identity)])

        def heard(kind: str) -> tuple:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                run._look(0.05)
                while worker.poll(0):
                    message = signer.unpack(worker.recv_multipart(), identity)
                    if message[0] == kind:
                        return message
            raise AssertionError(f"the driver sent no {kind!r}")

        try:
            say(("hello",))
            say(("proof", heard("challenge")[1]))
            say(("events", 1, [("stand-in", "default", ("b",))], []))  # early: 0 is missing
            say(("events", 0, [("stand-in", "default", ("a",))], []))
            assert heard("taken") == ("taken", 0)
            assert heard("taken") == ("taken", 2)
        finally:
            worker.close(linger=0)
            context.term()


def test_the_driver_keeps_each_events_message_once_in_the_order_sent():
    state = AttemptState()
    error = ErrorReport("bolt", 1, 0, "boom", "trace")
    for number, captured in [(1, ["b"]), (0, ["a"]), (0, ["a"]), (2, ["c"]), (1, ["b"])]:
        state.take_events(0, number, captured, [(0, error)] if number == 2 else [])
    state.take_events(1, 0, ["x"], [])  # another worker counts its own
    state.take_events(0, 4, ["e"], [])  # 3 not (yet) here: 4 waits for it
    assert state.captured == ["a", "b", "c", "x"]
    assert state.errors.reports() == [error]
    state.take_events(0, 3, ["d"], [])
    assert state.captured == ["a", "b", "c", "x", "d", "e"]


def test_what_a_worker_announced_is_said_again_when_its_connection_is_lost():
    """'ready' and 'started' are what the driver must hear: a message in flight on a connection
    that breaks is lost, so a worker says them again on its next connection.  Here a relay
    swallows the worker's 'started' and then cuts the connection."""
    with relayed_channel() as (channel, relay, hear, _):
        hear("hello")
        relay.lose(lambda: channel.announce(("started", {"pid": 1})))
        assert hear("started") == ("started", {"pid": 1})
