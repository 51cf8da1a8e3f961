"""The stream layer's parts on their own: acker ledger, pending trees, queues, histogram,
tuples, serializers."""

from __future__ import annotations

import enum
import random
import threading
import time
from collections import OrderedDict

import pytest

from brokerless.stream import (
    Bolt,
    MsgpackSerializer,
    PickleSerializer,
    SerializationError,
    Spout,
    Topology,
    all_,
)
from brokerless.stream.acker import AckerLedger, CountedTree, PendingTrees
from brokerless.stream.assignment import assign
from brokerless.stream.metrics import ExecutorMetrics, Histogram
from brokerless.stream.protocol import ACK, ACK_INIT, ACKED, FAIL, FAILED
from brokerless.stream.queues import BoundedQueue, Shutdown
from brokerless.stream.serializer import dumps_through, dumps_values, new_value_packer
from brokerless.stream.statistics import Statistics
from brokerless.stream.tuple import Fields, Tuple
from brokerless.stream.worker import Worker


def tree_messages(rng):
    """The acker messages of a random tree (spout -> 3 -> 3x2), in emission order."""
    root = rng.getrandbits(64)
    children = [rng.getrandbits(64) for _ in range(3)]
    messages = [[ACK_INIT, root, children[0] ^ children[1] ^ children[2], 7]]
    for child in children:
        grandchildren = [rng.getrandbits(64) for _ in range(2)]
        messages.append([ACK, root, child ^ grandchildren[0] ^ grandchildren[1]])
        messages += [[ACK, root, g] for g in grandchildren]
    return root, messages


def test_acker_completes_a_tree_whatever_the_order_of_its_messages():
    rng = random.Random(1)
    for _ in range(50):
        root, messages = tree_messages(rng)
        rng.shuffle(messages)
        ledger = AckerLedger(timeout=30, now=0)
        decisions = [ledger.update(m) for m in messages]
        assert decisions[:-1] == [None] * (len(messages) - 1)  # not before the last message
        assert decisions[-1] == (ACKED, root, 7)
        assert len(ledger) == 0


def test_acker_does_not_complete_a_tree_with_a_missing_ack():
    _, messages = tree_messages(random.Random(2))
    ledger = AckerLedger(timeout=30, now=0)
    assert [ledger.update(m) for m in messages[:-1]] == [None] * (len(messages) - 1)
    assert len(ledger) == 1


def test_acker_fails_a_tree_at_once_or_when_its_init_arrives():
    root, messages = tree_messages(random.Random(3))
    ledger = AckerLedger(timeout=30, now=0)
    assert ledger.update(messages[0]) is None
    assert ledger.update([FAIL, root]) == (FAILED, root, 7)
    early = AckerLedger(timeout=30, now=0)
    assert early.update([FAIL, root]) is None  # the spout is not known yet
    assert early.update(messages[0]) == (FAILED, root, 7)


def test_acker_forgets_trees_idle_between_one_and_one_and_a_half_timeouts():
    ledger = AckerLedger(timeout=10, now=0)
    ledger.update([ACK_INIT, 1, 5, 7])
    assert ledger.rotate(9.9) == 0 and len(ledger) == 1
    ledger.update([ACK_INIT, 2, 5, 7])  # touched later: lives longer
    assert ledger.rotate(14.9) == 0 and len(ledger) == 2
    assert ledger.rotate(15.0) == 1 and len(ledger) == 1
    assert ledger.rotate(20.0) == 1 and len(ledger) == 0


def test_pending_trees_count_per_task_and_expire_oldest_first():
    pending = PendingTrees(timeout=1.0)
    pending.add(10, task=1, msg_id="a", now=0.0)
    pending.add(11, task=1, msg_id="b", now=0.5)
    pending.add(12, task=2, msg_id="c", now=0.7)
    assert pending.per_task == {1: 2, 2: 1} and pending.max_per_task == 2
    assert pending.next_expiry() == 1.0
    assert pending.pop(11) == (1, "b", 0.5)
    assert pending.pop(11) is None
    assert pending.expired(1.69) == [(1, "a", 0.0)]
    assert pending.expired(1.7) == [(2, "c", 0.7)]
    assert len(pending) == 0 and pending.next_expiry() is None


def test_queue_put_waits_for_room_and_push_never_waits():
    queue = BoundedQueue(2)
    queue.put(1)
    queue.put(2)
    queue.push("control")  # over the bound, never waits
    assert queue.depth == 3 and queue.max_depth == 3
    done = threading.Event()

    def producer():
        queue.put(3)
        done.set()

    thread = threading.Thread(target=producer)
    thread.start()
    assert not done.wait(0.05)  # blocked: the bounded part is full
    assert queue.take(1) == [1, "control"]
    assert done.wait(5)
    thread.join()
    assert queue.take(10) == [2, 3]
    assert queue.take(10, timeout=0) == []
    assert queue.puts == 4


def test_closing_a_queue_wakes_blocked_threads_with_shutdown():
    queue = BoundedQueue(1)
    queue.put(1)
    outcomes = []

    def blocked(call):
        try:
            call()
        except Shutdown:
            outcomes.append("shutdown")

    empty = BoundedQueue(1)
    threads = [
        threading.Thread(target=blocked, args=(lambda: queue.put(2),)),
        threading.Thread(target=blocked, args=(lambda: empty.take(1),)),
    ]
    for t in threads:
        t.start()
    for q in (queue, empty):
        q.close()
    for t in threads:
        t.join(5)
    assert outcomes == ["shutdown", "shutdown"]
    with pytest.raises(Shutdown):
        queue.push(3)
    assert issubclass(Shutdown, BaseException) and not issubclass(Shutdown, Exception)


def test_histogram_mean_and_p99_merge_across_executors():
    a, b = Histogram(), Histogram()
    for ns in range(1, 1001):
        (a if ns % 2 else b).add(ns * 1000)  # 1 us .. 1 ms
    snaps = []
    for i, h in enumerate((a, b)):
        snaps.append(
            {
                "worker": {
                    "worker": i,
                    "transfer_depth": 0,
                    "transfer_depth_max": 0,
                    "sent": 0,
                    "received": 0,
                    "bad_messages": 0,
                },
                "executors": [
                    {
                        "executor": i,
                        "component": "x",
                        "kind": "bolt",
                        "tasks": 1,
                        "emitted": 0,
                        "transferred": 0,
                        "acked": 0,
                        "failed": 0,
                        "processed": 0,
                        "errors": 0,
                        "latency": h.snapshot(),
                        "process_latency": h.snapshot(),
                        "queue_depth": 0,
                        "queue_depth_max": 0,
                        "queue_capacity": 8,
                        "pending": 0,
                        "pending_max": 0,
                        "metrics": {"seen": i + 1},
                        "windows": ExecutorMetrics().windows(),
                    }
                ],
            }
        )
    stats = Statistics.merge(snaps)["x"]
    assert stats.metrics == {"seen": 3}  # the components' own counters add up
    assert stats.latency_ms_mean == pytest.approx(0.5005)
    assert 0.99 <= stats.latency_ms_p99 <= 0.99 * 1.25  # within one bucket above the truth
    assert (stats.process_latency_ms_mean, stats.process_latency_ms_p99) == (
        stats.latency_ms_mean,
        stats.latency_ms_p99,
    )
    assert stats.executors == 2


def test_tuple_access_by_index_and_field_name():
    tup = Tuple(("cat", 3), "split", "default", 4, Fields(["word", "count"]), {9: 5})
    assert tup[0] == "cat" and tup["count"] == 3 and tup[-1] == 3
    assert tup.fields == ("word", "count") and list(tup) == ["cat", 3] and len(tup) == 2
    assert tup.as_dict() == {"word": "cat", "count": 3}
    assert tup.get("missing", "x") == "x"
    assert (tup.component, tup.stream, tup.task, tup.id) == ("split", "default", 4, 5)
    with pytest.raises(KeyError, match=r"'wrod'.*'word', 'count'"):
        tup["wrod"]
    # trees counted in place: no edge ids, an id of its own for each tuple, the same each time
    tree = (CountedTree(5, []),)
    one, two = (Tuple(("cat",), "split", "default", 4, Fields(["word"]), tree) for _ in "12")
    assert isinstance(one.id, int) and one.id == one.id and one.id != two.id
    assert "split:default task=4" in repr(tup)


def test_msgpack_keeps_str_and_bytes_apart_and_names_the_bad_field():
    ser = MsgpackSerializer()
    values = ["text", b"bytes", 1, 2.5, None, [1, "a"], {"k": 1, 2: "int key"}]
    assert ser.loads(ser.dumps(values)) == values
    with pytest.raises(SerializationError) as info:
        dumps_values(ser, ["ok", {1, 2}], ("name", "tags"), "bolt-x", "default")
    assert "'tags'" in str(info.value) and "'bolt-x'" in str(info.value)
    assert "set" in str(info.value)


def test_msgpack_keeps_tuples_tuples():
    """A tuple among the values comes back a tuple (a dict key, a pair), nested too; lists stay
    lists, and subclasses of the types msgpack knows pack as their base.  It came back a list,
    so a bolt's ``d[t["key"]]`` raised TypeError -- only when the tuple crossed workers."""
    ser = MsgpackSerializer()
    values = [("user", 42), {"a": (1, (2, [3])), (1, 2): "tuple key"}, [1, (2,)], ()]
    back = ser.loads(ser.dumps(values))
    assert back == values
    assert type(back[0]) is tuple and type(back[1]["a"][1]) is tuple
    assert type(back[1]["a"][1][1]) is list and type(back[2]) is list and back[3] == ()

    class Level(enum.IntEnum):
        HIGH = 2

    assert ser.loads(ser.dumps([Level.HIGH, OrderedDict(a=1)])) == [2, {"a": 1}]


def test_pickle_serializer_carries_python_objects():
    ser = PickleSerializer()
    values = [{1, 2}, (1, 2), complex(1, 2)]
    assert ser.loads(ser.dumps(values)) == values


def test_a_hot_path_serializes_through_its_own_packer_only_for_the_default_serializer():
    class Tagged(MsgpackSerializer):  # a subclass may change the bytes: its dumps is kept
        def dumps(self, values):
            return b"tag" + super().dumps(values)

    pack = new_value_packer()
    values = [7, "x", b"y", {"k": [1.5, None], "t": (1, 2)}]
    dumps = dumps_through(MsgpackSerializer(), pack)
    assert dumps is pack and dumps(values) == MsgpackSerializer().dumps(values)
    with pytest.raises(TypeError):  # a failed pack leaves nothing behind for the next
        dumps([{1, 2}])
    assert dumps(values) == MsgpackSerializer().dumps(values)
    for ser in (PickleSerializer(), Tagged()):
        assert dumps_through(ser, pack)(values) == ser.dumps(values)


def test_queue_wake_ups_are_neither_lost_nor_left_over():
    """The consumer sleeps on a lock of its own (queues.py): puts racing its timeouts lose no
    wake-up (every item arrives, in order) and leave none behind (a later take on an empty
    queue still waits its timeout instead of returning at once)."""
    queue = BoundedQueue()
    count = 20_000
    failures = []

    def producer():
        try:
            for i in range(count):
                queue.push(i)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    thread = threading.Thread(target=producer)
    thread.start()
    got = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        got += queue.take(1000, timeout=0.0001)
    thread.join(5)
    assert not failures and got == list(range(count))
    started = time.monotonic()
    assert queue.take(10, timeout=0.05) == []
    assert time.monotonic() - started >= 0.04


class _Idle(Spout):
    """Never has anything to emit."""

    outputs = ["value"]


def test_an_idle_spout_polls_less_often_as_time_passes_not_as_it_is_stepped():
    # A shared thread steps a spout at every round, however short; when next_tuple keeps
    # emitting nothing, the pause the spout asks for grows with the time it has been idle
    # (from 1 ms to 100 ms), never with the number of steps: else a busy round or two would
    # leave it polling only every 100 ms once the worker goes quiet.
    plan = Topology("idle").spout("idle", _Idle).bolt("sink", Bolt, inputs={"idle": all_()})
    worker = Worker(plan.build(), assign(plan.build(), 1), 0)
    (spout,) = [e for e in worker.executors if e.component == "idle"]
    spout.open()
    started = time.monotonic()
    for _ in range(20):
        pause = spout.step()
        assert pause is not None
        assert pause <= max(0.001, time.monotonic() - started)
    spout.close()
