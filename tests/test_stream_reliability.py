"""Reliability: XOR acking, replay, timeouts, max spout pending, failing bolts, serialization
errors -- in local mode with one worker and with two (serialized transfer between them)."""

from __future__ import annotations

import collections
import time
from functools import partial

import pytest

from brokerless.stream import (
    Bolt,
    Config,
    PickleSerializer,
    SerializationError,
    Spout,
    Stream,
    Topology,
    TopologyError,
    all_,
    complete_topology,
    fields,
    run_local,
)
from brokerless.stream.component import ComponentKind
from brokerless.stream.serializer import stable_hash

from .stream_topologies import (
    AckInBatches,
    EmitUnserializable,
    FailEveryThirdOnce,
    FailPairWith,
    Fanout,
    HoldValue,
    PairUp,
    RaiseOn,
    Recorder,
    Relay,
    Sink,
    ValueSpout,
)

WORKERS = [1, 2]


def acked_ids(result, spout="spout"):
    return [msg_id for msg_id, _ in result.emitted(spout, "acked")]


def failed_ids(result, spout="spout"):
    return [msg_id for (msg_id,) in result.emitted(spout, "failed")]


@pytest.mark.parametrize("workers", WORKERS)
def test_failing_every_third_tuple_once_acks_every_spout_tuple_exactly_once(workers):
    n = 30
    topo = (
        Topology("replay")
        .spout("spout", partial(ValueSpout, range(n)), parallelism=2)
        .bolt("fanout", Fanout, parallelism=2, inputs={"spout": all_()})
        .bolt("flaky", FailEveryThirdOnce, parallelism=2, tasks=3,
              inputs={"fanout": fields("value", "child")})
    )
    result = complete_topology(topo, workers=workers, timeout=30)
    assert result.errors == []
    acked, failed = acked_ids(result), failed_ids(result)
    assert sorted(acked) == list(range(n))  # each exactly once, none lost
    assert failed  # trees did fail ...
    assert set(failed) <= set(acked)  # ... and were replayed until acked
    # 2 fanout tasks x 3 children per spout tuple = 6 leaves, 180 distinct; a third failed once
    processed = [tuple(values) for (values,) in result.emitted("flaky")]
    assert len(set(processed)) == n * 3
    assert sorted(set(processed)) == sorted((v, c) for v in range(n) for c in range(3))
    stats = result.statistics
    assert stats["spout"].acked == n and stats["spout"].failed == len(failed)
    # each flaky task failed every third distinct (value, child) key it was sent
    targets = topo.build().components["flaky"].tasks
    keys_per_task = collections.Counter(
        targets[stable_hash([v, c]) % len(targets)] for v in range(n) for c in range(3))
    assert stats["flaky"].failed == sum(k // 3 for k in keys_per_task.values())


@pytest.mark.parametrize("threads", ["shared", "per_executor"])
@pytest.mark.parametrize("workers", WORKERS)
def test_a_tuple_whose_tree_is_not_acked_in_time_fails(workers, threads):
    topo = (
        Topology("timeout", Config(message_timeout_secs=0.3, executor_threads=threads))
        .spout("spout", partial(ValueSpout, range(5), replay=False))
        .bolt("hold", partial(HoldValue, 2), inputs={"spout": all_()})
    )
    result = complete_topology(topo, workers=workers, timeout=20)
    assert failed_ids(result) == [2]
    assert sorted(acked_ids(result)) == [0, 1, 3, 4]
    assert result.statistics["spout"].failed == 1


@pytest.mark.parametrize("threads", ["shared", "per_executor"])
@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("relayed", [False, True])
def test_a_tuple_anchored_to_two_spout_tuples_settles_both(relayed, workers, threads):
    # Each pair is in the trees of both its values: they are acked only once the pair is, and
    # both fail when it fails -- also when a relay auto-anchors its copy to the pair (one
    # worker with a shared thread counts its trees in place, the others XOR them).
    topo = (
        Topology("pairs", Config(executor_threads=threads))
        .spout("spout", partial(ValueSpout, range(10), replay=False))
        .bolt("pair", PairUp, inputs={"spout": all_()})
    )
    if relayed:
        topo = topo.bolt("relay", Relay, inputs={"pair": all_()})
    last = "relay" if relayed else "pair"
    topo = topo.bolt("check", partial(FailPairWith, 4), inputs={last: all_()})
    result = complete_topology(topo, workers=workers, timeout=20)
    assert result.errors == []
    assert sorted(failed_ids(result)) == [4, 5]
    assert sorted(acked_ids(result)) == [0, 1, 2, 3, 6, 7, 8, 9]
    assert result.statistics["check"].failed == 1 and result.statistics["check"].acked == 4


@pytest.mark.parametrize("threads", ["shared", "per_executor"])
@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("where", ["spout", "bolt"])
def test_a_copy_held_by_one_subscriber_keeps_the_tree_open(where, workers, threads):
    # Two subscribing components get a copy each; one never acks value 2: its spout tuple times
    # out, though the other copy is acked (every copy counts).
    config = Config(message_timeout_secs=0.3, executor_threads=threads)
    topo = Topology("copies", config).spout("spout", partial(ValueSpout, range(5), replay=False))
    source = "spout"
    if where == "bolt":
        topo = topo.bolt("relay", Relay, inputs={"spout": all_()})
        source = "relay"
    topo = topo.bolt("sink", Sink, inputs={source: all_()}).bolt(
        "hold", partial(HoldValue, 2), inputs={source: all_()}
    )
    result = complete_topology(topo, workers=workers, timeout=20)
    assert failed_ids(result) == [2]
    assert sorted(acked_ids(result)) == [0, 1, 3, 4]


@pytest.mark.parametrize("threads", ["shared", "per_executor"])
def test_a_spout_tuple_nobody_subscribes_to_is_acked_at_once(threads):
    config = Config(message_timeout_secs=5, executor_threads=threads)
    topo = Topology("alone", config).spout("spout", partial(ValueSpout, range(5), replay=False))
    result = complete_topology(topo, workers=1, timeout=3)
    assert sorted(acked_ids(result)) == [0, 1, 2, 3, 4] and failed_ids(result) == []


@pytest.mark.parametrize("threads", ["shared", "per_executor"])
@pytest.mark.parametrize("workers", WORKERS)
def test_max_spout_pending_bounds_the_tuples_in_flight(workers, threads):
    topo = (
        Topology("pending", Config(max_spout_pending=5, executor_threads=threads))
        .spout("spout", partial(ValueSpout, range(200)))
        .bolt("relay", Relay, inputs={"spout": all_()})
        .bolt("batch", partial(AckInBatches, 5), inputs={"relay": all_()})
    )
    result = complete_topology(topo, workers=workers, timeout=30)
    in_flight = [count for _, count in result.emitted("spout", "acked")]
    assert len(in_flight) == 200
    # AckInBatches acks only when 5 are in flight: reaching 5 is required, exceeding it wrong
    assert max(in_flight) == 5
    assert result.statistics["spout"].pending_max == 5


@pytest.mark.parametrize("workers", WORKERS)
def test_a_spouts_own_max_spout_pending_wins_over_the_topologys(workers):
    """Storm's per-component ``topology.max.spout.pending``: ``.spout(...,
    max_spout_pending=3)`` bounds that spout, whatever the topology's Config says."""
    topo = (
        Topology("pending", Config(max_spout_pending=50))
        .spout("spout", partial(ValueSpout, range(60)), max_spout_pending=3)
        .bolt("batch", partial(AckInBatches, 3), inputs={"spout": all_()})
    )
    result = complete_topology(topo, workers=workers, timeout=30)
    in_flight = [count for _, count in result.emitted("spout", "acked")]
    assert len(in_flight) == 60 and max(in_flight) == 3
    with pytest.raises(TopologyError, match="max_spout_pending must be None"):
        Topology("t").spout("s", ValueSpout, max_spout_pending=0).build()


@pytest.mark.parametrize("workers", WORKERS)
def test_a_raising_bolt_fails_its_tuple_reports_component_and_task_and_keeps_running(workers):
    topo = (
        Topology("raise")
        .spout("spout", partial(ValueSpout, range(10), replay=False))
        .bolt("boom", partial(RaiseOn, 5), parallelism=2, inputs={"spout": all_()})
        .bolt("after", Recorder, inputs={"boom": all_()})
    )
    result = complete_topology(topo, workers=workers, timeout=20)
    boom_tasks = topo.build().components["boom"].tasks
    assert sorted((e.component, e.task) for e in result.errors) == [("boom", t) for t in boom_tasks]
    assert all("ValueError('cannot handle 5')" in e.error for e in result.errors)
    assert all("stream_topologies.py" in e.traceback and "in process" in e.traceback
               for e in result.errors)
    assert failed_ids(result) == [5]
    assert sorted(acked_ids(result)) == [v for v in range(10) if v != 5]
    # every other value went on, through both tasks
    assert sorted(v for _, _, (v,) in result.emitted("after")) == sorted(
        [v for v in range(10) if v != 5] * 2)
    assert result.statistics["boom"].errors == 2 and result.statistics["boom"].failed == 2


SERIALIZING = [
    pytest.param(2, Config(), id="remote-target"),
    pytest.param(1, Config(always_try_serialize=True), id="always-try-serialize"),
]


class _PositionalStream(Bolt):
    """Emits as streamparse's ``emit(tup, stream)`` would: the stream where anchors go."""

    outputs = [Stream(["value"]), Stream(["value"], name="side")]

    def process(self, tup):
        self.emit([tup[0]], "side")


def test_a_stream_given_where_the_anchors_go_says_how_to_name_it():
    """streamparse's ``emit`` takes the stream second, brokerless's (Storm's Java order) the
    anchors: the error says so.  It was ``AttributeError: 'str' object has no attribute
    '_settled'``."""
    topo = (
        Topology("positional")
        .spout("spout", partial(ValueSpout, range(2), replay=False))
        .bolt("b", _PositionalStream, inputs={"spout": all_()})
    )
    result = complete_topology(topo, timeout=20)
    assert len(result.errors) == 2
    for error in result.errors:
        assert error.error.startswith("TypeError") and "anchors='side'" in error.error
        assert "emit(values, stream=...)" in error.error


class _EmitsNotAList(Bolt):
    """Emits its input's value itself, not a list of values: a str, None, a number."""

    outputs = ["value"]

    def process(self, tup):
        self.emit(tup[0])


def test_values_that_are_not_a_list_say_to_emit_a_list():
    """``self.emit(word)`` for ``self.emit([word])``: a str of 5 characters was '5 value(s) on
    stream 'default', which has 1 field(s)', and None or a number 'object of type 'NoneType'
    has no len()', neither saying what to write; a str of one character, bytes or a dict of
    one key -- as many values as the stream has fields -- were emitted as the tuple of their
    characters or keys, silently."""
    values = ["hello", None, 7, "h", b"x", {"word": "w"}]
    topo = (
        Topology("not-a-list")
        .spout("spout", partial(ValueSpout, values, replay=False))
        .bolt("b", _EmitsNotAList, inputs=["spout"])
    )
    run = complete_topology(topo, timeout=20)
    errors = [e.error for e in run.errors]
    assert len(errors) == len(values) and not run.emitted("b"), errors
    for value in ["'hello'", "None", "7", "'h'", "b'x'", "{'word': 'w'}"]:
        assert any(f"not {value}: emit([value, ...])" in error for error in errors), errors
    for error in errors:
        assert error.startswith("TypeError(\"'b' emits a list of values, one per field of "
                                "stream 'default' ['value'], not "), errors


@pytest.mark.parametrize("workers,config", SERIALIZING)
def test_an_unserializable_value_fails_that_emit_naming_the_field(workers, config):
    topo = (
        Topology("serialize", config)
        .spout("spout", partial(ValueSpout, range(10)))
        .bolt("bad-values", partial(EmitUnserializable, 3, catch=True), parallelism=2,
              inputs={"spout": all_()})
        .bolt("sink", Recorder, parallelism=2, inputs={"bad-values": all_()})
    )
    result = complete_topology(topo, workers=workers, timeout=20)
    problems = [message for (message,) in result.emitted("bad-values", "problems")]
    assert len(problems) == 2  # value 3, in each of the two tasks
    for message in problems:
        assert "'bad-values'" in message and "field 'extra'" in message
        assert "stream 'default'" in message and "set" in message
    assert result.errors == []
    # the emit did not happen at all, every other one did (to both sink tasks)
    values = [v for _, _, (v, _) in result.emitted("sink")]
    assert sorted(values) == sorted([v for v in range(10) if v != 3] * 4)
    assert sorted(acked_ids(result)) == list(range(10))


@pytest.mark.parametrize("workers,config", SERIALIZING)
def test_an_uncaught_serialization_error_fails_the_input_tuple(workers, config):
    topo = (
        Topology("serialize", config)
        .spout("spout", partial(ValueSpout, range(6), replay=False))
        .bolt("bad-values", partial(EmitUnserializable, 3, catch=False), inputs={"spout": all_()})
        .bolt("sink", Recorder, parallelism=2, inputs={"bad-values": all_()})
    )
    result = complete_topology(topo, workers=workers, timeout=20)
    assert [e.component for e in result.errors] == ["bad-values"]
    assert SerializationError.__name__ in result.errors[0].error
    assert "field 'extra'" in result.errors[0].error
    assert failed_ids(result) == [3]
    assert sorted(acked_ids(result)) == [0, 1, 2, 4, 5]


def test_a_pluggable_serializer_carries_what_msgpack_cannot():
    topo = (
        Topology("pickled", Config(serializer=PickleSerializer()))
        .spout("spout", partial(ValueSpout, range(4)))
        .bolt("bad-values", partial(EmitUnserializable, 3, catch=False), inputs={"spout": all_()})
        .bolt("sink", Recorder, parallelism=2, inputs={"bad-values": all_()})
    )
    result = complete_topology(topo, workers=2, timeout=20)  # the sink has a remote task
    assert result.errors == []
    extras = sorted((v, repr(extra)) for _, _, (v, extra) in result.emitted("sink"))
    assert extras == sorted([(v, "'ok'") for v in (0, 1, 2)] * 2 + [(3, "{1, 2}")] * 2)


class NoteSettledList(Bolt):
    """Notes which list each input's counted tree reports to (``CountedTree.settled``)."""

    lists: set[int] = set()

    def process(self, tup):
        for tree in tup._anchors:
            NoteSettledList.lists.add(id(tree.settled))


def test_a_counted_trees_acks_go_to_its_spouts_settled_list_which_is_left_empty():
    """Where trees are counted in place, the collector that completes a tree puts its ACKED in
    the spout executor's ``settled`` list, which every tree holds: the executor must drain that
    very list (a new one would leave the trees' acks unread) and empty it (not re-read it at
    every step for ever)."""
    NoteSettledList.lists = set()
    topo = (
        Topology("settled")  # one worker, one shared thread: trees counted in place
        .spout("spout", partial(ValueSpout, range(500), replay=False))
        .bolt("relay", Relay, inputs={"spout": all_()})
        .bolt("note", NoteSettledList, inputs={"relay": all_()})
    )
    with run_local(topo) as run:
        run.wait_until_done(timeout=30)
        (spout,) = [e for e in run.workers[0].executors if e.kind is ComponentKind.SPOUT]
        assert spout.counts_trees
        assert NoteSettledList.lists == {id(spout.settled)}
        assert spout.settled == []
        acked = run.statistics()["spout"].acked
    assert acked == 500


class AckChainSpout(Spout):
    """One tuple in flight: ``ack`` emits the next (with no ackers, each is acked at once)."""

    outputs = ["value"]
    count = 2000
    progress: list[int] = []  # the bolt's count at each ack

    def open(self, conf, context):
        self.started = False
        self.acked = 0

    def next_tuple(self):
        if not self.started:
            self.started = True
            self.emit([0], msg_id=0)

    def ack(self, msg_id):
        self.acked += 1
        AckChainSpout.progress.append(CountProcessed.processed)
        if msg_id + 1 < self.count:
            self.emit([msg_id + 1], msg_id=msg_id + 1)

    def exhausted(self):
        return self.acked == self.count


class CountProcessed(Bolt):
    processed = 0

    def process(self, tup):
        CountProcessed.processed += 1


def test_a_chain_of_acks_that_emit_takes_turns_with_the_bolts():
    """A spout whose ``ack`` emits its next tuple, acked at once (no ackers): each ack is for
    the spout's next step, as one from its queue would be.  Settling what settling decides in
    the same step ran the whole chain in one step -- the bolt had processed 1 of 2,000 tuples
    when the last ack came, and an endless chain held the thread (no flush, no stop, the list
    growing) for good."""
    AckChainSpout.progress = []
    CountProcessed.processed = 0
    topo = (
        Topology("ack-chain", Config(num_ackers=0))
        .spout("spout", AckChainSpout)
        .bolt("count", CountProcessed, inputs={"spout": all_()})
    )
    with run_local(topo) as run:
        run.wait_until_done(timeout=30)
    assert len(AckChainSpout.progress) == AckChainSpout.count
    assert AckChainSpout.progress[-1] >= AckChainSpout.count // 2, AckChainSpout.progress[-1]


class ReplayToNoOne(Spout):
    """Emits one tuple (``[1]``) a bolt holds; when it times out, ``fail`` emits another on a stream
    nobody subscribes to (acked at once) and notes how long its ``ack`` took to come."""

    outputs = [Stream(["value"]), Stream(["value"], name="unread")]
    delays: list[float] = []

    def open(self, conf, context):
        self.sent = self.acked = False
        self.failed_at = 0.0

    def next_tuple(self):
        if not self.sent:
            self.sent = True
            self.emit([1], msg_id="held")

    def fail(self, msg_id):
        self.failed_at = time.monotonic()
        self.emit([1], msg_id="again", stream="unread")

    def ack(self, msg_id):
        ReplayToNoOne.delays.append(time.monotonic() - self.failed_at)
        self.acked = True

    def exhausted(self):
        return self.acked


@pytest.mark.parametrize("threads", ["shared", "per_executor"])
def test_an_ack_decided_while_timing_out_comes_at_the_next_step(threads):
    """``fail`` for a timed-out tuple emits one acked at once: its ``ack`` is for the next
    step, which must come at once -- not after the idle spout's back-off (100 ms: every try
    took 100.2-100.7 ms when the step after the timeouts did not look at what they decided;
    0.1-0.2 ms since).  The least of three tries is what counts (a loaded machine can delay
    one)."""
    ReplayToNoOne.delays = []
    for _ in range(3):
        topo = (
            Topology("replay-to-no-one", Config(message_timeout_secs=0.3, executor_threads=threads))
            .spout("spout", ReplayToNoOne)
            .bolt("hold", partial(HoldValue, 1), inputs={"spout": all_()})
        )
        with run_local(topo) as run:
            run.wait_until_done(timeout=20)
    assert len(ReplayToNoOne.delays) == 3
    assert min(ReplayToNoOne.delays) < 0.05, ReplayToNoOne.delays


class _HoldsThenAcks(Bolt):
    """Holds its input, acks it all at its eighth tick tuple; with ``reset``, calls
    ``reset_timeout`` on what it holds at each tick before that."""

    auto_ack = False
    outputs = ["value"]

    def __init__(self, reset):
        self.reset = reset

    def prepare(self, conf, context):
        self.held, self.ticks = [], 0

    def process(self, tup):
        self.held.append(tup)

    def process_tick(self, tup):
        self.ticks += 1
        for held in self.held:
            if self.ticks >= 8:
                self.ack(held)
            elif self.reset:
                self.reset_timeout(held)
        if self.ticks >= 8:
            self.held = []


@pytest.mark.parametrize(
    ("workers", "threads"),
    [(1, "shared"), (1, "per_executor"), (2, "shared")],
    ids=["counted-in-place", "acker-in-worker", "acker-across-workers"],
)
@pytest.mark.parametrize("reset", [True, False])
def test_reset_timeout_keeps_a_slow_tuple_from_timing_out(workers, threads, reset):
    """Storm's ``resetTimeout``: a bolt working on a tuple longer than the message timeout
    starts its spout tuple's timeout again now and then, and the tuple is acked, not failed
    (without it: failed).  brokerless had no way to."""
    config = Config(message_timeout_secs=1.0, tick_tuple_freq_secs=0.2, executor_threads=threads)
    topo = (
        Topology("slow", config)
        .spout("spout", partial(ValueSpout, range(3), replay=False))
        .bolt("slow", partial(_HoldsThenAcks, reset), inputs={"spout": all_()})
    )
    result = complete_topology(topo, workers=workers, config=config, timeout=30)
    outcome = acked_ids(result) if reset else failed_ids(result)
    assert sorted(outcome) == [0, 1, 2]
    assert (failed_ids(result) if reset else acked_ids(result)) == []
