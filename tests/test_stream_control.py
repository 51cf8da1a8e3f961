"""The control channel between a driver and its workers (``stream/control.py``): only signed
messages are read, and a worker whose driver is gone stops by itself."""

from __future__ import annotations

import threading

import pytest

import brokerless as zmq
from brokerless.stream import Topology, all_
from brokerless.stream.assignment import assign
from brokerless.stream.control import DriverGone, Signer, WorkerChannel, new_key, serve
from brokerless.stream.worker import Worker

from .stream_topologies import Counter, Sink

pytestmark = pytest.mark.timeout(60)


def test_only_messages_signed_with_the_key_are_read():
    key = new_key()
    signer = Signer(key)
    frames = signer.pack(("stats", 3))
    assert signer.unpack(frames) == ("stats", 3)
    assert Signer(new_key()).unpack(frames) is None
    assert signer.unpack([frames[0], frames[1] + b"."]) is None
    assert signer.unpack([frames[1]]) is None


def endless_worker() -> Worker:
    plan = (Topology("endless-control").spout("counter", Counter)
            .bolt("sink", Sink, inputs={"counter": all_()})).build()
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
    message = Signer(key).unpack(router.recv_multipart()[1:])
    while skip_events and message[0] == "events":
        message = Signer(key).unpack(router.recv_multipart()[1:])
    return message


def test_a_worker_ignores_unsigned_commands_and_answers_signed_ones(driver, serving):
    router, _, key = driver
    thread, outcome = serving(attempt=2, driver_timeout=5.0)
    identity, *frames = router.recv_multipart()
    assert identity == b"2:0" and Signer(key).unpack(frames) == ("started", {"pid": 0})
    router.send_multipart([identity, *Signer(new_key()).pack(("stop",))])  # forged
    router.send_multipart([identity, *Signer(key).pack(("activity", 7))])
    assert signed(key, router)[:2] == ("activity", 7)  # still running: the forgery was dropped
    router.send_multipart([identity, *Signer(key).pack(("stop",))])
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
