"""Back pressure: a slow bolt holds its spout back (bounded queues, measured), and full queues
never deadlock -- not in cycles of bolts, not against acker traffic, not between workers."""

from __future__ import annotations

import collections
import threading
from functools import partial

import pytest

from brokerless.stream import Config, Topology, all_, complete_topology, fields, run_local, shuffle
from brokerless.stream.examples import final_counts, word_count_topology

from .stream_topologies import (
    Bounce,
    Counter,
    Gate,
    Recorder,
    StartBounce,
    ValueSpout,
    wait_for,
)

SIZE, BATCH = 16, 4


@pytest.mark.parametrize("workers", [1, 2])
def test_a_slow_bolt_holds_its_spout_back_within_the_queue_bound(workers):
    gate = threading.Semaphore(0)
    config = Config(executor_queue_size=SIZE, executor_batch_size=BATCH, num_ackers=0)
    topo = (
        Topology("slow", config)
        .spout("counter", Counter)
        .bolt("slow", partial(Gate, gate), inputs={"counter": all_()})
    )
    # How far the spout can get ahead of the bolt: the bolt holds a batch it took; the spout
    # holds what it emitted in its last round (up to a batch) until there is room for it.
    # One worker: room is the bolt's queue.  Two workers (the spout and the bolt apart):
    # room is one credit window (SIZE // 2) of tuples in flight, wherever they are.
    if workers == 1:
        least, most = SIZE + BATCH, SIZE + 2 * BATCH
    else:
        least, most = SIZE // 2, SIZE // 2 + BATCH
    with run_local(topo, workers=workers) as run:
        try:
            opened = 0
            for more in (0, 12 * BATCH, 20 * BATCH):  # let the bolt process this many more
                if more:
                    gate.release(more)
                opened += more

                def held_back(opened=opened):
                    stats = run.statistics()
                    ahead = stats["counter"].emitted - stats["slow"].processed
                    assert ahead <= most  # at every moment we look
                    full = workers == 2 or stats["slow"].queue_depth == SIZE
                    return stats if stats["slow"].processed == opened and ahead >= least \
                        and full else None

                stats = wait_for(held_back, what=f"the spout to be held back after {opened}")
                assert stats["slow"].queue_depth_max <= SIZE
                assert stats["slow"].queue_capacity == SIZE
                assert all(w.transfer_depth_max <= SIZE // 2 for w in stats.workers)
            assert run.errors() == []
        finally:
            gate.release(10**6)


def cycle_topology(config):
    return (
        Topology("cycle", config)
        .spout("spout", partial(ValueSpout, range(300)))
        .bolt("start", partial(StartBounce, 6), inputs={"spout": shuffle()})
        .bolt("a", Bounce, parallelism=2, inputs={"start": shuffle(), "b": shuffle()})
        .bolt("b", Bounce, parallelism=2, inputs={"a": shuffle()})
        .bolt("sink", Recorder, inputs={("a", "out"): shuffle(), ("b", "out"): shuffle()})
    )


@pytest.mark.parametrize("workers", [1, 2])
def test_a_cycle_of_bolts_with_tiny_queues_does_not_deadlock(workers):
    config = Config(executor_queue_size=2, executor_batch_size=1, max_spout_pending=None)
    result = complete_topology(cycle_topology(config), workers=workers, timeout=40)
    assert sorted(v for _, _, (v,) in result.emitted("sink")) == list(range(300))
    assert sorted(m for m, _ in result.emitted("spout", "acked")) == list(range(300))
    assert result.errors == []


@pytest.mark.timeout(90)
@pytest.mark.parametrize("workers", [1, 3])
def test_tiny_queues_with_acking_between_workers_do_not_deadlock(workers):
    # tuples cross between the workers in every direction while acks flow back to the
    # spouts; every queue holds at most 3 tuples and spouts are not limited in flight
    sentences = [f"w{i % 7} w{i % 5} w{i % 3} shared" for i in range(400)]
    topo = word_count_topology(sentences, parallelism=3, count_tasks=6)
    config = Config(executor_queue_size=3, executor_batch_size=1, max_spout_pending=None)
    result = complete_topology(topo, workers=workers, config=config, timeout=80)
    expected = collections.Counter(w for s in sentences for w in s.split())
    assert final_counts(result.emitted("count")) == expected
    assert result.statistics["sentences"].acked == len(sentences)
    assert result.statistics["count"].queue_depth_max <= 3


def test_back_pressure_keeps_a_bounded_pipeline_from_growing():
    # the slow stage is the second of two: its bound holds the first, which holds the spout
    gate = threading.Semaphore(0)
    config = Config(executor_queue_size=SIZE, executor_batch_size=BATCH, num_ackers=0)
    topo = (
        Topology("chain", config)
        .spout("counter", Counter)
        .bolt("fast", Recorder, inputs={"counter": all_()})
        .bolt("slow", partial(Gate, gate), inputs={"fast": fields("task")})
    )
    with run_local(topo) as run:
        try:
            def held():
                stats = run.statistics()
                full = stats["slow"].queue_depth == SIZE and stats["fast"].queue_depth == SIZE
                return stats if full else None

            stats = wait_for(held, what="both queues to fill")
            # each stage holds back at most a batch it took and a batch it emitted
            assert stats["counter"].emitted <= 2 * (SIZE + 2 * BATCH)
            assert stats["slow"].queue_depth_max <= SIZE
            assert stats["fast"].queue_depth_max <= SIZE
        finally:
            gate.release(10**6)
