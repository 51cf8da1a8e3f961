"""streamparse's class-based topology DSL (``brokerless.stream.sparse``): a topology written
for streamparse keeps its shape and runs as the same topology built with the builder."""

from __future__ import annotations

import collections
import json
import os
import subprocess
from typing import Any

import pytest

from brokerless.stream import Bolt, Stream, TopologyError, complete_topology, sparse
from brokerless.stream.examples import SENTENCES, CountBolt, SentenceSpout, SplitBolt
from brokerless.stream.grouping import All, Direct, Fields, Shuffle
from brokerless.stream.sparse import Grouping, Topology
from brokerless.stream.topology import load_topology

from .test_cli import BROKERLESS, ENV

pytestmark = pytest.mark.timeout(60)


class WordCount(Topology):
    config = {"topology.workers": 2, "topology.message.timeout.secs": 45}
    sentence_spout = SentenceSpout.spec(par=2)
    split_bolt = SplitBolt.spec(inputs=[sentence_spout], par=2)
    count_bolt = CountBolt.spec(name="counter", inputs={split_bolt: Grouping.fields("word")}, par=2)


def test_a_streamparse_topology_class_is_the_topology_it_describes():
    topology = WordCount()
    assert topology.name == "WordCount" and WordCount.topology().name == "WordCount"
    plan = topology.build()
    assert list(plan.components) == ["sentence_spout", "split_bolt", "counter", "__acker"]
    assert plan.config.num_workers == 2 and plan.config.message_timeout_secs == 45
    assert [len(plan.components[c].executors) for c in ("split_bolt", "counter")] == [2, 2]
    assert isinstance(plan.components["split_bolt"].inputs[("sentence_spout", "default")], Shuffle)
    assert isinstance(plan.components["counter"].inputs[("split_bolt", "default")], Fields)
    assert load_topology(f"{__name__}:WordCount").name == "WordCount"  # brokerless stream run
    result = complete_topology(topology)
    counts = collections.Counter(w for s in SENTENCES for w in s.split())
    assert {w: n for w, n in result.emitted("counter") if n == counts[w]} == dict(counts)


class Router(Bolt):
    outputs = [Stream(["word"]), Stream(["word"], name="long"), Stream(["word"], "one", True)]


class Streams(Topology):
    words = SentenceSpout.spec()
    route = Router.spec(inputs=[words])
    long = CountBolt.spec(inputs={route["long"]: Grouping.ALL, route: Grouping.SHUFFLE})
    one = CountBolt.spec(inputs=[route["one"]])
    config = {"topology.tick.tuple.freq.secs": 5}
    ticked = CountBolt.spec(inputs=[route], config={"topology.tick.tuple.freq.secs": 1})


def test_stream_references_default_groupings_and_component_settings():
    plan = Streams().build()
    assert isinstance(plan.components["long"].inputs[("route", "long")], All)
    assert isinstance(plan.components["long"].inputs[("route", "default")], Shuffle)
    assert isinstance(plan.components["one"].inputs[("route", "one")], Direct)  # a direct one
    assert (plan.components["long"].tick_secs, plan.components["ticked"].tick_secs) == (5, 1)


def test_what_brokerless_cannot_take_is_refused_saying_what_it_takes():
    def topology(**attributes: Any) -> Any:
        return type("T", (Topology,), {"words": SentenceSpout.spec(), **attributes})

    with pytest.raises(TopologyError, match=r"'topology.debug' is not a Storm setting.*workers"):
        topology(config={"topology.debug": True})()
    with pytest.raises(TopologyError, match="a spout takes no inputs"):
        topology(other=SentenceSpout.spec(inputs=[SentenceSpout.spec()]))()
    with pytest.raises(TopologyError, match="is not a component of it"):
        topology(split=SplitBolt.spec(inputs=[SentenceSpout.spec()]))()
    with pytest.raises(TopologyError, match="the grouping of an input is a Grouping"):
        topology(split=SplitBolt.spec(inputs={SentenceSpout.spec(): "shuffle"}))()
    with pytest.raises(TopologyError, match="not a component setting brokerless has"):
        topology(split=SplitBolt.spec(inputs=[], config={"topology.workers": 2}))()


# -- streamparse's components: a project written for streamparse, its imports changed ---------


class Words(sparse.ReliableSpout):
    """A spout as streamparse has them: set up in ``initialize`` from the topology's own
    config key, tracked emits by ``tup_id`` (``exhausted`` lets the run complete)."""

    outputs = ["word"]

    def initialize(self, storm_conf, context):
        self.todo = list(enumerate(storm_conf["words.text"].split() * storm_conf["words.times"]))

    def next_tuple(self):
        if self.todo:
            tup_id, word = self.todo.pop()
            self.emit([word], tup_id=tup_id)

    def exhausted(self):
        return not self.todo and not self.unacked_tuples


class Counts(sparse.Bolt):
    outputs = [Stream(["word", "count"]), Stream(["word"], name="routed")]

    def initialize(self, conf, ctx):
        self.counter = collections.Counter()

    def process(self, tup):
        word = tup.values.word  # (a namedtuple of the stream's fields, as streamparse's)
        self.counter[word] += 1
        if word == "never" or (word == "bad" and self.counter[word] <= 3):
            self.fail(tup)  # (after which Words emits it again, up to max_fails times)
            return
        assert self.emit([word, self.counter[word]]) is None  # (task ids only when asked)
        assert self.emit(tup.values, "routed", need_task_ids=True) == []  # (nobody subscribes)


class WordCountSP(Topology):
    config = {"words.text": "the cat the dog bad never", "words.times": 2}
    words = Words.spec()
    counts = Counts.spec(inputs={words: Grouping.fields("word")}, par=2)


@pytest.mark.parametrize("mode", ["local", "multiprocess"])
def test_a_streamparse_project_runs_with_its_imports_changed(mode):
    result = complete_topology(WordCountSP(), mode=mode, workers=2 if mode != "local" else None)
    assert not result.errors, result.errors
    final = {}
    for word, count in result.emitted("counts"):
        final[word] = max(count, final.get(word, 0))
    # the first three showings of "bad" failed, and ReliableSpout emitted each again: five in
    # all; each "never" was emitted again max_fails (3) times, then taken for acked
    assert final == {"the": 4, "cat": 2, "dog": 2, "bad": 5}
    assert result.emitted("words").count(["never"]) == 2 * (1 + Words.max_fails)
    routed = result.emitted("counts", "routed")  # (the stream second, as streamparse's)
    assert [[word] for word, _ in result.emitted("counts")] == routed


class Source(sparse.Spout):
    outputs = ["word"]  # (mocked in the tests)


class Handshake(sparse.Bolt):
    outputs = ["what"]

    def initialize(self, storm_conf, context):
        self.seen = {
            "topology_name": self.topology_name,
            "component_name": self.component_name,
            "task_id": self.task_id == context.task_id,
            "pid": self.pid == os.getpid(),
            "timeout": storm_conf["topology.message.timeout.secs"],
            "interval_ms": storm_conf["topology.state.checkpoint.interval.ms"],
            "mine": storm_conf["my.key"],
            "name": storm_conf["topology.name"],
        }

    def process(self, tup):
        self.emit([self.seen])
        if tup.values[0] == "raise":
            self.raise_exception(ValueError("reported, not raised"), tup)


class HandshakeSP(Topology):
    config = {"topology.message.timeout.secs": 12, "my.key": [1, 2]}
    source = Source.spec()
    check = Handshake.spec(inputs=[source])


def test_initialize_gets_what_storm_hands_a_component_and_errors_are_reported():
    result = complete_topology(HandshakeSP(), {"source": [["raise"]]})
    [[seen]] = result.emitted("check")
    assert seen == {
        "topology_name": "HandshakeSP",
        "component_name": "check",
        "task_id": True,
        "pid": True,
        "timeout": 12,
        "interval_ms": 1000.0,
        "mine": [1, 2],
        "name": "HandshakeSP",
    }
    [error] = result.errors
    assert error.component == "check" and "reported, not raised" in error.traceback


def test_a_reliable_spout_emit_without_an_id_is_refused():
    spout = sparse.ReliableSpout()
    with pytest.raises(ValueError, match=r"emits with a tup_id \(emit\(tup, tup_id=...\)\)"):
        spout.emit(["x"])


class Batches:
    outputs = ["word", "n"]

    def initialize(self, conf, ctx):
        self.batches = 0

    def group_key(self, tup):
        return tup.values.word

    def process_batch(self, key, tups):
        self.batches += 1
        self.emit([key, len(tups)])


class Ticked(Batches, sparse.BatchingBolt):
    pass


class Tickless(Batches, sparse.TicklessBatchingBolt):
    secs_between_batches = 0.05


@pytest.mark.parametrize("bolt", [Ticked, Tickless])
def test_streamparse_batching_bolts_are_set_up_by_initialize_and_ack_their_batches(bolt):
    class BatchesSP(Topology):
        config = {"topology.tick.tuple.freq.secs": 0.05}
        source = Source.spec()
        batch = bolt.spec(inputs=[source])

    result = complete_topology(BatchesSP(), {"source": [["a"], ["b"], ["a"]]})
    assert not result.errors, result.errors
    assert sorted(result.emitted("batch")) == [["a", 2], ["b", 1]]
    assert result.statistics["source"].acked == 3


PROJECT = {  # a streamparse project's layout (``sparse quickstart``), its imports changed
    "src/spouts/words.py": """
import itertools

from brokerless.stream.sparse import Spout


class WordSpout(Spout):
    outputs = ["word"]

    def initialize(self, stormconf, context):
        self.words = itertools.cycle(stormconf["words"])

    def next_tuple(self):
        self.emit([next(self.words)])
""",
    "src/bolts/wordcount.py": """
from collections import Counter

from brokerless.stream.sparse import Bolt


class WordCountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, conf, ctx):
        self.counter = Counter()

    def process(self, tup):
        word = tup.values.word
        self.counter[word] += 1
        self.emit([word, self.counter[word]])
""",
    "topologies/wordcount.py": """
from brokerless.stream.sparse import Grouping, Topology

from bolts.wordcount import WordCountBolt
from spouts.words import WordSpout


class WordCount(Topology):
    config = {"words": ["dog", "cat", "zebra"]}
    word_spout = WordSpout.spec()
    count_bolt = WordCountBolt.spec(inputs={word_spout: Grouping.fields("word")}, par=2)
""",
}


@pytest.mark.timeout(120)
def test_a_streamparse_project_runs_from_the_command_line(tmp_path):
    for name, text in PROJECT.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = dict(ENV, PYTHONPATH=os.pathsep.join([str(tmp_path / "src"), ENV["PYTHONPATH"]]))
    listed = subprocess.run(
        [*BROKERLESS, "stream", "list", "topologies.wordcount"],
        capture_output=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert listed.stdout.decode().splitlines() == [
        "topologies.wordcount:WordCount\tWordCount: word_spout (spout x1), count_bolt (bolt x2)"
    ], listed.stderr.decode()
    command = "stream run topologies.wordcount:WordCount --workers 2 --duration 2"
    done = subprocess.run(
        [*BROKERLESS, *command.split(), "--emitted", "count_bolt"],
        capture_output=True,
        timeout=90,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    assert report["errors"] == [] and report["workers"] == 2
    counts: dict[str, list[int]] = {}
    for word, count in report["emitted"]["count_bolt"]:
        counts.setdefault(word, []).append(count)
    assert set(counts) == {"dog", "cat", "zebra"}  # each word counted by one task, in order
    assert all(seen == list(range(1, len(seen) + 1)) for seen in counts.values())
