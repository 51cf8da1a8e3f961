"""Per-component metrics: emitted, acked, failed, latency, queue depth, own counters."""

from __future__ import annotations

from functools import partial

import pytest

from brokerless.stream import Bolt, Config, Topology, all_, complete_topology
from brokerless.stream.examples import SENTENCES, word_count
from brokerless.stream.metrics import ExecutorMetrics

from .stream_topologies import Busy, ValueSpout


@pytest.mark.parametrize("threads", ["shared", "per_executor"])
def test_word_count_metrics_add_up(threads):
    result = complete_topology(word_count.with_config(executor_threads=threads), timeout=20)
    stats = result.statistics
    n_sentences = len(SENTENCES)
    n_words = sum(len(s.split()) for s in SENTENCES)
    spout, split, count, acker = (stats[c] for c in ("sentences", "split", "count", "__acker"))
    assert (spout.kind, split.kind, acker.kind) == ("spout", "bolt", "acker")
    assert (spout.executors, spout.tasks, count.executors, count.tasks) == (2, 2, 2, 4)
    assert (spout.emitted, spout.acked, spout.failed) == (n_sentences, n_sentences, 0)
    assert (split.processed, split.acked, split.emitted) == (n_sentences, n_sentences, n_words)
    assert (count.processed, count.acked, count.emitted) == (n_words, n_words, n_words)
    if threads == "shared":  # one thread runs the topology: its trees are counted in place
        assert acker.processed == acker.acked == 0
    else:  # one ACK_INIT per sentence, one ACK per tuple processed
        assert acker.processed == 2 * n_sentences + n_words and acker.acked == n_sentences
    assert spout.pending == 0 and 1 <= spout.pending_max <= n_sentences
    for bolt in (split, count):
        assert bolt.latency_ms_mean > 0 and bolt.latency_ms_p99 > 0
        assert 1 <= bolt.queue_depth_max <= bolt.queue_capacity == Config().executor_queue_size
        assert bolt.queue_depth == 0 and bolt.errors == 0
    assert spout.latency_ms_mean > 0  # complete latency
    assert [w.worker for w in stats.workers] == [0]
    assert stats.as_dict()["components"]["count"]["emitted"] == n_words


def test_execute_latency_measures_the_bolt():
    topo = (
        Topology("latency")
        .spout("spout", partial(ValueSpout, range(20)))
        .bolt("busy", partial(Busy, 2.0), inputs={"spout": all_()})
    )
    stats = complete_topology(topo, timeout=20).statistics
    assert 2.0 <= stats["busy"].latency_ms_mean < 50
    assert stats["busy"].latency_ms_p99 >= 2.0
    # a spout tuple's tree completes after the 2 ms bolt ran
    assert stats["spout"].latency_ms_mean >= 2.0


class CountsVowels(Bolt):
    """Counts the vowels of its input in a counter of its own."""

    def prepare(self, conf, context):
        self.vowels = context.register_counter("vowels")
        self.words = context.register_counter("words")

    def process(self, tup):
        self.vowels.incr(sum(ch in "aeiou" for ch in tup[0]))
        self.words.incr()


@pytest.mark.parametrize("mode", ["local", "multiprocess"])
def test_a_component_counts_in_counters_of_its_own(mode):
    """Storm's registered metrics (``context.registerCounter``): each task counts in its
    component's counters, and ``statistics()`` sums them per component and per executor.
    brokerless had none."""
    words = ["storm", "spark", "zeromq", "queue"] * 25
    topology = (
        Topology("counters")
        .spout("words", partial(ValueSpout, words))
        .bolt("vowels", CountsVowels, parallelism=2, tasks=4, inputs={"words": all_()})
    )
    workers = 2 if mode == "multiprocess" else None
    stats = complete_topology(topology, mode=mode, workers=workers, timeout=30).statistics
    vowels = sum(ch in "aeiou" for w in words for ch in w)
    assert stats["vowels"].metrics == {"vowels": 4 * vowels, "words": 4 * len(words)}
    per_executor = [e.metrics for e in stats.executors if e.component == "vowels"]
    assert [m["words"] for m in per_executor] == [2 * len(words)] * 2
    assert stats["words"].metrics == {}
    with pytest.raises(ValueError, match="a counter's name is a non-empty string"):
        ExecutorMetrics().counter("")
