"""Hostile input to the stream data plane.  Whoever reaches a worker's virtual port can send it
anything; that must cost only the bad messages themselves (counted, reported once per sender,
dropped), never an executor thread, a flow-control window or the topology's pace."""

from __future__ import annotations

import random
import socket
import struct
import time
from typing import Any

import msgpack
import pytest

import brokerless as zmq
from brokerless.stream import Config, SerializationError, Topology, shuffle
from brokerless.stream.assignment import assign
from brokerless.stream.local import run_local
from brokerless.stream.messaging import (
    PACKING_ROOM,
    VIRTUAL_PORT_RCVHWM,
    LocalMessaging,
    LocalNetwork,
    SocketMessaging,
)
from brokerless.stream.multiprocess import run_multiprocess
from brokerless.stream.protocol import (
    ACK,
    ACK_INIT,
    ACKED,
    BATCH,
    CREDIT,
    FAIL,
    FAILED,
    HEADER_ROOM,
    TUPLE,
    WORKER_TASK,
    task_frame,
)
from brokerless.stream.transfer import Credits
from brokerless.stream.tuple import Fields, Tuple
from brokerless.stream.worker import Worker
from brokerless.zmtp.commands import fold, parse_command, parse_metadata
from brokerless.zmtp.greeting import GREETING_SIZE, rest_of_greeting, signature

from .helpers import recv_within
from .processes import child_pids
from .stream_topologies import Relay, ReliableCounter, Sink, ValueSpout, wait_for


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def pipeline(workers: int, **config: Any) -> Topology:
    """A reliable spout -> relay -> sink, forever; two sink executors, so that on two workers
    worker 0 holds the spout and a sink, fed by the relay in worker 1."""
    return (
        Topology("hostile", Config(num_workers=workers, **config))
        .spout("spout", ReliableCounter)
        .bolt("relay", Relay, inputs={"spout": shuffle()})
        .bolt("sink", Sink, parallelism=2, inputs={"relay": shuffle()})
    )


class Targets:
    """Task and executor ids of worker 0 of ``pipeline(2)``, as an attacker would aim."""

    def __init__(self, plan: Any) -> None:
        assignment = assign(plan, 2)
        here = assignment.tasks(0)
        (self.spout,) = plan.component_tasks["spout"]
        (self.relay,) = plan.component_tasks["relay"]
        (self.sink,) = [t for t in plan.component_tasks["sink"] if t in here]
        (self.acker,) = [t for t in plan.acker_tasks if t in here]
        (relay_executor,) = plan.components["relay"].executors
        self.relay_executor = relay_executor
        assert {self.spout, self.sink} <= here and self.relay not in here  # relay is remote

    def issue_messages(self) -> list[tuple[str, list[bytes]]]:
        """Issue 11's messages, each as one batch, with what its rejection says."""
        frame = task_frame
        return [
            ("ACKED of 0 field(s) for spout task", [frame(self.spout), pack([ACKED])]),
            ("ACK_INIT for acker task", [frame(self.acker), pack([ACK_INIT, 12345, "x", 1])]),
            ("ACK for bolt task", [frame(self.sink), pack([ACK, 1, 2])]),
            (
                "roots and edge ids are integers",
                [
                    frame(self.sink),
                    pack([TUPLE, self.relay, "default", {"x": 1}, pack([1])]),
                ],
            ),
            (
                "CREDIT of -1000000000",
                [
                    frame(WORKER_TASK),
                    pack([CREDIT, self.relay_executor, -(10**9)]),
                ],
            ),
            (
                "CREDIT of 1000000000000",
                [
                    frame(WORKER_TASK),
                    pack([CREDIT, self.relay_executor, 10**12]),
                ],
            ),
            ("a batch of 3 frames", [frame(self.spout), pack([ACKED, 1]), frame(self.spout)]),
            ("task 999, which is not in this worker", [frame(999), pack([ACKED, 1])]),
            ("a task frame of 2 bytes", [b"\x01\x00", pack([ACKED, 1])]),
            ("not msgpack", [frame(self.spout), b"\xc1 garbage"]),
        ]


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 3 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([rng.randrange(-8, 8), rng.randrange(-(2**63), 2**64)])
    if kind == 2:
        return rng.random() * 10 ** rng.randrange(-5, 20)
    if kind == 3:
        return "".join(chr(rng.randrange(32, 0x2FF)) for _ in range(rng.randrange(8)))
    if kind in (4, 5):
        return rng.randbytes(rng.randrange(12))
    if kind == 6:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(6))]
    return {rng.randrange(100): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def random_batches(rng: random.Random, tasks: list[int], count: int) -> list[list[bytes]]:
    """``count`` batches of 1 to 3 pairs: a task of ``tasks`` (or task 0) and random msgpack,
    half of them shaped like a message ([kind, ...])."""
    batches = []
    for _ in range(count):
        frames = []
        for _ in range(rng.randrange(1, 4)):
            value = random_value(rng)
            if rng.random() < 0.5:
                value = [rng.randrange(8), *[random_value(rng) for _ in range(rng.randrange(5))]]
            frames += [task_frame(rng.choice([WORKER_TASK, *tasks])), pack(value)]
        batches.append(frames)
    return batches


def sender_type(endpoint: str) -> int:
    """The socket type that can send to ``endpoint``, learned as a stranger would: from the
    type the port announces in its ZMTP handshake."""
    host, port = endpoint.removeprefix("tcp://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(signature(0) + b"\x03" + rest_of_greeting(b"NULL", as_server=False))
        data = b""
        while (
            len(data) < GREETING_SIZE + 2 or len(data) < GREETING_SIZE + 2 + data[GREETING_SIZE + 1]
        ):
            chunk = raw.recv(4096)
            assert chunk, "the port closed the connection during the handshake"
            data += chunk
    size = data[GREETING_SIZE + 1]  # READY is a short command frame: flags, size, body
    ready = parse_command(data[GREETING_SIZE + 2 : GREETING_SIZE + 2 + size])
    announced = fold(parse_metadata(ready.data))["socket-type"]
    return {b"PULL": zmq.PUSH, b"ROUTER": zmq.DEALER}[announced]


def seconds_to_ack(run: Any, trees: int, timeout: float) -> float:
    """How long the topology takes to ack ``trees`` more spout tuples."""
    start = run.statistics()["spout"].acked
    began = time.monotonic()
    wait_for(
        lambda: run.statistics()["spout"].acked >= start + trees,
        timeout=timeout,
        what=f"{trees} more acked trees",
    )
    return time.monotonic() - began


# -- what a worker accepts -------------------------------------------------------------------


@pytest.fixture
def worker():
    """Worker 0 of ``pipeline(2)``, not started: its checks, without threads."""
    plan = pipeline(2).build()
    return Worker(plan, assign(plan, 2), 0, LocalMessaging(LocalNetwork()))


def test_each_of_the_issues_messages_is_dropped_with_its_reason(worker):
    for reason, frames in Targets(worker.plan).issue_messages():
        accepted = worker.inbound.read(frames)
        assert (accepted.items, accepted.credits, accepted.pairs) == ({}, [], 0), reason
        assert len(accepted.bad) == 1 and reason in accepted.bad[0], (reason, accepted.bad)


def test_a_batch_is_checked_pair_by_pair(worker):
    targets = Targets(worker.plan)
    frames = [
        task_frame(targets.sink),
        pack([TUPLE, targets.relay, "default", {7: 9}, pack([5])]),
        task_frame(targets.sink),
        pack([TUPLE, targets.spout, "default", None, pack([5])]),
        task_frame(targets.acker),
        pack([ACK_INIT, 7, 3, targets.spout]),
        task_frame(targets.acker),
        pack([ACK_INIT, 7, 3, targets.sink]),
        task_frame(targets.acker),
        pack([FAIL, 7]),
        task_frame(targets.spout),
        pack([ACKED, 7]),
        task_frame(targets.spout),
        pack([ACKED, True]),
        task_frame(WORKER_TASK),
        pack([CREDIT, targets.relay_executor, 1]),
        task_frame(WORKER_TASK),
        pack([CREDIT, 0, 1]),  # the spout's executor: not a bolt
        task_frame(targets.sink),
        pack([TUPLE, targets.relay, "default", None, pack([1, 2])]),
    ]
    accepted = worker.inbound.read(frames)
    assert accepted.pairs == 5
    assert [reason.split(":")[0] for reason in accepted.bad] == [
        f"TUPLE for task {targets.sink} from task {targets.spout} on stream 'default', "
        "which it does not subscribe to",
        f"ACK_INIT for acker task {targets.acker} names task {targets.sink}, which is not a "
        "spout task",
        f"ACKED for spout task {targets.spout} with root True",
        "CREDIT for executor 0, which this worker does not send tuples to",
        f"TUPLE for task {targets.sink} with values [1, 2]",
    ]
    queues = worker.local_queues
    (tup,) = [item for item in accepted.items[queues[targets.sink]]]
    assert tup[0] == targets.sink and tup[1].values == (5,) and tup[1]._anchors == {7: 9}
    assert tup[2] == 1  # credits for it go back to the relay's worker
    assert [item[1] for item in accepted.items[queues[targets.acker]]] == [
        [ACK_INIT, 7, 3, targets.spout],
        [FAIL, 7],
    ]
    assert [item[1] for item in accepted.items[queues[targets.spout]]] == [[ACKED, 7]]
    assert accepted.credits == [(targets.relay_executor, 1)]


def test_a_batch_of_acker_traffic_is_checked_message_by_message(worker):
    """[BATCH, [message, ...]] carries one executor's acker traffic for one task in one pair:
    each message in it passes the checks of its own kind, or the whole pair is dropped."""
    targets = Targets(worker.plan)
    frames = [
        task_frame(targets.acker),
        pack([BATCH, [[ACK_INIT, 7, 3, targets.spout], [ACK, 7, 3], [FAIL, 8]]]),
        task_frame(targets.spout),
        pack([BATCH, [[ACKED, 7], [FAILED, 8]]]),
        task_frame(targets.acker),
        pack([BATCH, [[ACK, 9, 1], [ACK_INIT, 9, 1, targets.sink]]]),
        task_frame(targets.spout),
        pack([BATCH, [[ACKED, 7], [ACK, 1, 2]]]),
        task_frame(targets.acker),
        pack([BATCH, []]),
        task_frame(targets.acker),
        pack([BATCH, [[ACK, 1, 2], "x"]]),
        task_frame(targets.sink),
        pack([BATCH, [[ACK, 1, 2]]]),
    ]
    accepted = worker.inbound.read(frames)
    assert accepted.pairs == 2
    assert [reason.split(":")[0] for reason in accepted.bad] == [
        f"ACK_INIT for acker task {targets.acker} names task {targets.sink}, which is not a "
        "spout task",
        f"ACK of 2 field(s) for spout task {targets.spout}",
        f"BATCH for task {targets.acker} that is not [BATCH, [message, ...]] of one or more "
        "messages",
        f"BATCH for task {targets.acker} holding 'x'",
        f"BATCH for bolt task {targets.sink}",
    ]
    queues = worker.local_queues
    assert [item[1] for item in accepted.items[queues[targets.acker]]] == [
        [BATCH, [[ACK_INIT, 7, 3, targets.spout], [ACK, 7, 3], [FAIL, 8]]]
    ]
    assert [item[1] for item in accepted.items[queues[targets.spout]]] == [
        [BATCH, [[ACKED, 7], [FAILED, 8]]]
    ]


def test_bad_messages_are_counted_and_reported_once_per_sender(worker):
    targets = Targets(worker.plan)
    bad = [task_frame(targets.spout), pack([ACKED])]
    for sender in range(70):
        for _ in range(3):
            worker.link.deliver(f"peer {sender}", bad)
    assert worker.link.bad_messages == 70 * 3
    kept = worker.errors.reports()  # (the latest of the worker's own: KEEP)
    reports = [e.error for e in kept]
    assert kept.total == 65 and all(e.startswith("BadMessage(") for e in reports)
    assert all(f"from peer {i}: ACKED of 0 field(s)" in reports[i - 55] for i in range(55, 64))
    assert "more than 64 senders" in reports[-1]  # then they are only counted
    assert all(q.depth == 0 for q in worker.local_queues.values())


def test_credits_never_exceed_the_window():
    credits = Credits(8, [5])
    assert credits.take(5, 100) == 8
    credits.release(5, 8)
    credits.release(5, 8)  # a forged credit on top of the real one
    assert credits.take(5, 100) == 8


# -- a running topology -----------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_no_queue_item_can_end_an_executor():
    topo = pipeline(1)
    with run_local(topo) as run:
        targets = {name: run.plan.component_tasks[name][0] for name in ("spout", "relay", "sink")}
        acker = run.plan.acker_tasks[0]
        seconds_to_ack(run, 100, timeout=20)
        queues = run.workers[0].local_queues
        # what the worker's checks keep out, put straight onto the executors' queues
        queues[targets["spout"]].push((targets["spout"], [ACKED], None))
        queues[acker].push((acker, [ACK_INIT, 12345, "x", 1], None))
        bad_anchors = Tuple((1,), "relay", "default", targets["relay"], Fields(["value"]), {"x": 1})
        queues[targets["sink"]].push((targets["sink"], bad_anchors, None))
        wait_for(lambda: len(run.errors()) == 3, what="three reports")
        assert sorted(e.component for e in run.errors()) == ["__acker", "sink", "spout"]
        seconds_to_ack(run, 1000, timeout=20)  # every executor still works


@pytest.mark.timeout(120)
def test_a_running_topology_shrugs_off_hostile_messages_on_its_virtual_port():
    before_children = child_pids()
    topo = pipeline(2, security="none")  # open ports: what the checks stand behind without CURVE
    with run_multiprocess(topo, transport="tcp") as run:
        targets = Targets(run.plan)
        endpoint = run.worker_info[0]["endpoint"]
        seconds_to_ack(run, 2000, timeout=30)  # warmed up
        before = seconds_to_ack(run, 20000, timeout=60)

        context = zmq.Context()
        kind = sender_type(endpoint)
        deliberate, stranger = context.socket(kind), context.socket(kind)
        rng = random.Random(11)
        noise = random_batches(rng, [targets.spout, targets.sink, targets.acker], 200)
        try:
            for peer in (deliberate, stranger):
                peer.linger = 0
                peer.connect(endpoint)
            for _, frames in targets.issue_messages():
                deliberate.send_multipart(frames)
            for frames in noise:
                stranger.send_multipart(frames)
            wait_for(run.errors, timeout=30, what="the attack to land")
            after = seconds_to_ack(run, 20000, timeout=4 * before + 10)
            assert after < 4 * before + 5, (before, after)
            # every deliberate one was counted, and the noise (at most all of it)
            least = len(targets.issue_messages())
            most = least + sum(len(frames) // 2 for frames in noise)
            assert least < run.statistics().workers[0].bad_messages <= most
            errors = run.errors()
            reports = [e for e in errors if e.component == "__worker"]
            assert [e for e in errors if e not in reports] == []  # no executor broke
            # one report per sender, with the reason of its first bad message
            assert [e.worker for e in reports] == [0, 0]
            senders = {
                e.error.partition("dropped a bad message from ")[2].split(":")[0] for e in reports
            }
            assert len(senders) == 2 and all(s.startswith("peer ") for s in senders)
            assert any("ACKED of 0 field(s) for spout task" in e.error for e in reports)
        finally:
            deliberate.close()
            stranger.close()
            context.term()
    assert child_pids() - before_children == set()


# -- sizes --------------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_a_tuple_bigger_than_max_tuple_bytes_fails_its_emit():
    topo = (
        Topology("sizes", Config(num_workers=2, max_tuple_bytes=100))
        .spout("spout", lambda: ValueSpout(["small", "x" * 500, "small again"], replay=False))
        .bolt("sink", Sink, inputs={"spout": shuffle()})
    )
    with run_local(topo, capture=True) as run:
        wait_for(
            lambda: len([c for c in run.captured() if c[1] == "acked"]) == 2,
            what="the small tuples to be acked",
        )
        (error,) = run.errors()
        assert error.component == "spout"
        assert SerializationError.__name__ in error.error and "max_tuple_bytes" in error.error


@pytest.mark.timeout(30)
def test_the_virtual_port_drops_a_peer_that_sends_an_oversize_frame():
    plan = pipeline(2, max_tuple_bytes=1000).build()
    context = zmq.Context()
    worker = Worker(plan, assign(plan, 2), 0, SocketMessaging(context, "tcp"))
    endpoint = worker.bind()
    kind = sender_type(endpoint)
    big, small = context.socket(kind), context.socket(kind)
    try:
        assert worker.messaging._port.rcvhwm == VIRTUAL_PORT_RCVHWM
        monitor = big.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        big.connect(endpoint)
        # the port takes a packed part of the largest tuple (its header and the packing's room)
        big.send_multipart([task_frame(1), b"x" * (1000 + HEADER_ROOM + PACKING_ROOM + 1)])
        event, _ = struct.unpack("=HI", recv_within(monitor, 5000, multipart=True)[0])
        assert event == zmq.EVENT_DISCONNECTED
        small.connect(endpoint)
        small.send_multipart([task_frame(1), b"x" * (1000 + HEADER_ROOM)])
        received = wait_for(lambda: worker.messaging.recv(0.05), what="the small batch")
        assert len(received[1][1]) == 1000 + HEADER_ROOM
    finally:
        big.disable_monitor()
        for sock in (big, small, monitor):
            sock.close(linger=0)
        worker.messaging.close()
        context.term()
