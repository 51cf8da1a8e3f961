"""The control channel between a driver and its workers (``stream/control.py``): only signed
messages are read, and a worker whose driver is gone stops by itself."""

from __future__ import annotations

import threading
import time

import pytest

import brokerless as zmq
from brokerless.stream import Topology, all_
from brokerless.stream.assignment import assign
from brokerless.stream.control import DriverGone, Signer, WorkerChannel, new_key, serve
from brokerless.stream.worker import Worker

from .stream_topologies import Counter, Sink

pytestmark = pytest.mark.timeout(60)


def test_only_messages_signed_with_the_key_for_that_worker_are_read():
    key = new_key()
    signer = Signer(key)
    frames = signer.pack(("stats", 3), b"1:0")
    assert signer.unpack(frames, b"1:0") == ("stats", 3)
    assert Signer(new_key()).unpack(frames, b"1:0") is None
    assert signer.unpack(frames, b"1:1") is None  # not another worker's ...
    assert signer.unpack(frames, b"2:0") is None  # ... nor another attempt's
    assert signer.unpack([frames[0], frames[1] + b"."], b"1:0") is None
    assert signer.unpack([frames[1]], b"1:0") is None


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


def signed(key: bytes, router: zmq.Socket, skip_events: bool = True) -> tuple:
    """The next message the worker sent (past its "events" reports)."""
    identity, *frames = router.recv_multipart()
    message = Signer(key).unpack(frames, identity)
    while skip_events and message[0] == "events":
        identity, *frames = router.recv_multipart()
        message = Signer(key).unpack(frames, identity)
    return message


def test_a_worker_ignores_unsigned_commands_and_answers_signed_ones(driver, serving):
    router, _, key = driver
    thread, outcome = serving(attempt=2, driver_timeout=5.0)
    identity, *frames = router.recv_multipart()
    assert identity == b"2:0" and Signer(key).unpack(frames, identity) == ("started", {"pid": 0})
    router.send_multipart([identity, *Signer(new_key()).pack(("stop",), identity)])  # forged
    router.send_multipart([identity, *Signer(key).pack(("stop",), b"1:0")])  # an old attempt's
    router.send_multipart([identity, *Signer(key).pack(("activity", 7), identity)])
    assert signed(key, router)[:2] == ("activity", 7)  # still running: both were dropped
    router.send_multipart([identity, *Signer(key).pack(("stop",), identity)])
    thread.join(20)
    assert not thread.is_alive() and outcome == {}
    final = signed(key, router)
    assert final[0] == "final" and final[1]["hung"] == []


def test_a_worker_whose_driver_is_gone_stops_by_itself(driver, serving):
    router, endpoint, key = driver
    thread, outcome = serving(attempt=1, driver_timeout=1.0)
    assert signed(key, router)[0] == "started"
    router.close(linger=0)  # the driver vanishes without a word
    thread.join(30)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), DriverGone)
    assert f"no connection to the driver at {endpoint}" in str(outcome["error"])


def test_the_driver_reads_only_signed_messages_of_its_current_attempt():
    """A stranger on the control channel: unsigned messages and messages of an older attempt
    are dropped (either "failed" would end the run), and the stranger's stream reaches the
    driver -- a message signed for the current attempt, after them, is read."""
    from brokerless.stream.multiprocess import run_multiprocess

    topology = (
        Topology("endless-control")
        .spout("counter", Counter)
        .bolt("sink", Sink, inputs={"counter": all_()})
    )
    with run_multiprocess(topology, workers=2) as run:
        context = zmq.Context()
        endpoint = run._control.getsockopt(zmq.LAST_ENDPOINT).decode()
        signer = run._signer  # the run's own key, as a worker has it
        strangers = []
        for attempt in (run.attempt, run.attempt - 1):
            stranger = context.socket(zmq.DEALER)
            stranger.linger = 0
            stranger.routing_id = b"%d:9" % attempt
            stranger.connect(endpoint)
            strangers.append(stranger)
        current, old = strangers
        try:
            current.send_multipart(Signer(new_key()).pack(("failed", "forged"), b"1:9"))
            old.send_multipart(signer.pack(("failed", "an old attempt's"), old.routing_id))
            marker = ("stranger", "default", ("read",))
            old.send_multipart(signer.pack(("events", [marker], []), old.routing_id))
            current.send_multipart(signer.pack(("events", [marker], []), current.routing_id))
            deadline = time.monotonic() + 10
            while marker not in run.captured():
                assert time.monotonic() < deadline, "the signed message never arrived"
                run._look(0.1)
            assert run.captured().count(marker) == 1  # the old attempt's copy was dropped
            assert run.errors() == []
            run.activity()  # answers: no "failed" was taken (it would raise WorkerProcessError)
        finally:
            for stranger in strangers:
                stranger.close(linger=0)
            context.term()
