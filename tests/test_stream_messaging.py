"""The messaging behind workers: in-memory and brokerless sockets (ipc, tcp) behave alike."""

from __future__ import annotations

import threading
from functools import partial

import pytest

import brokerless as zmq
from brokerless.stream import Config, Topology, all_
from brokerless.stream.assignment import assign
from brokerless.stream.messaging import (
    LocalMessaging,
    LocalNetwork,
    Messaging,
    SocketMessaging,
    unpack,
)
from brokerless.stream.queues import Shutdown
from brokerless.stream.worker import Worker

from .stream_topologies import Counter, Gate, wait_for


@pytest.fixture(params=["memory", "ipc", "tcp"])
def make_messaging(request, tmp_path):
    network = LocalNetwork()
    context = zmq.Context()
    made: list[Messaging] = []

    def make() -> Messaging:
        if request.param == "memory":
            messaging: Messaging = LocalMessaging(network)
        else:
            messaging = SocketMessaging(context, request.param, str(tmp_path))
        made.append(messaging)
        return messaging

    yield make
    for messaging in made:
        messaging.interrupt()
        messaging.close()
    context.destroy(linger=0)


def test_batches_arrive_whole_and_in_order(make_messaging):
    workers = [make_messaging() for _ in range(3)]
    endpoints = [m.bind(1000) for m in workers]
    assert len(set(endpoints)) == 3
    for m in workers:
        m.connect(endpoints)
    batches = [[b"\x01\0\0\0", b"payload-%d" % i, b"\x02\0\0\0", b"x" * i] for i in range(50)]
    for batch in batches:
        workers[0].send(2, batch)
    received = [wait_for(lambda: workers[2].recv(0.05), what="a batch") for _ in batches]
    assert [frames for _, frames in received] == batches
    assert len({sender for sender, _ in received}) == 1  # one sender, named the same each time
    assert workers[1].recv(0) is None


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_a_batch_travels_in_one_frame_without_curve_too(transport, tmp_path):
    """Every frame costs the ZMTP codec's Python on both sides, encrypted or not: a batch of
    pairs goes as one packed frame (not two a pair), and arrives as the pairs it was."""
    context = zmq.Context()
    sender = SocketMessaging(context, transport, str(tmp_path))  # no keys: no CURVE
    port = context.socket(zmq.ROUTER)  # a plain socket where a worker's port would be
    try:
        address = f"ipc://{tmp_path}/port" if transport == "ipc" else "tcp://127.0.0.1:0"
        port.bind(address)
        endpoint = port.last_endpoint.decode()
        sender.connect([sender.bind(1 << 16), endpoint])
        batch = [f(i) for i in range(100) for f in (lambda i: b"\x01\0\0\0", b"pair %d".__mod__)]
        sender.send(1, batch)
        assert port.poll(10_000)
        _, *parts = port.recv_multipart()
        assert len(parts) == 1 and unpack(parts) == batch
    finally:
        sender.interrupt()
        sender.close()
        port.close(linger=0)
        context.destroy(linger=0)


def test_connecting_again_refreshes_only_changed_endpoints(make_messaging):
    sender, first, second = (make_messaging() for _ in range(3))
    endpoints = [sender.bind(1000), first.bind(1000), second.bind(1000)]
    sender.connect(endpoints[:2])
    sender.send(1, [b"to-first"])
    assert wait_for(lambda: first.recv(0.05))[1] == [b"to-first"]
    sender.connect([endpoints[0], endpoints[2]])  # worker 1 now lives at another endpoint
    sender.send(1, [b"to-second"])
    assert wait_for(lambda: second.recv(0.05))[1] == [b"to-second"]
    assert first.recv(0.05) is None


def test_interrupt_ends_a_waiting_receive(make_messaging):
    messaging = make_messaging()
    messaging.bind(1000)
    messaging.connect([])
    outcome = []

    def receive():
        try:
            while True:
                messaging.recv(0.05)
        except Shutdown:
            outcome.append("shutdown")

    thread = threading.Thread(target=receive)
    thread.start()
    messaging.interrupt()
    thread.join(5)
    assert outcome == ["shutdown"]


class Recording(Messaging):
    """Records what a worker's sender thread does."""

    def __init__(self):
        self.calls: list[tuple[str, object]] = []

    def bind(self, max_frame):
        return "recording://"

    def connect(self, endpoints):
        self.calls.append(("connect", list(endpoints)))

    def send(self, worker, frames):
        self.calls.append(("send", worker))

    def recv(self, timeout):
        threading.Event().wait(timeout)
        return None

    def interrupt(self):
        pass

    def close(self):
        pass


def test_a_worker_refresh_reconnects_after_sending_what_was_queued():
    gate = threading.Semaphore(0)
    topo = (
        Topology("refresh", Config(num_ackers=0, executor_queue_size=8))
        .spout("counter", Counter)
        .bolt("slow", partial(Gate, gate), inputs={"counter": all_()})
    )
    plan = topo.build(topo.config.replace(num_workers=2))
    messaging = Recording()
    worker = Worker(plan, assign(plan, 2), 0, messaging)  # the spout's worker
    worker.start(["a", "b"])
    try:
        wait_for(lambda: ("send", 1) in messaging.calls, what="a batch for worker 1")
        worker.refresh(["a", "b2"])
        wait_for(lambda: ("connect", ["a", "b2"]) in messaging.calls, what="the refresh")
        calls = messaging.calls
        assert calls[0] == ("connect", ["a", "b"])
        assert calls.index(("send", 1)) < calls.index(("connect", ["a", "b2"]))
    finally:
        gate.release(10**6)
        assert worker.stop() == []
