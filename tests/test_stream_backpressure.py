"""Back pressure: a slow bolt holds its spout back (bounded queues, measured), and full queues
never deadlock -- not in cycles of bolts, not against acker traffic, not between workers --
whether a worker runs its executors in one shared thread or in a thread each.

The slow bolt here blocks (on a semaphore); in a shared thread that would hold up its whole
worker, so those cases put it in a worker of its own or give executors their own threads."""

from __future__ import annotations

import collections
import threading
from functools import partial

import pytest

from brokerless.stream import (
    Bolt,
    Config,
    Topology,
    all_,
    complete_topology,
    fields,
    run_local,
    shuffle,
)
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


@pytest.mark.parametrize(
    "workers, threads", [(1, "per_executor"), (2, "per_executor"), (2, "shared")]
)
def test_a_slow_bolt_holds_its_spout_back_within_the_queue_bound(workers, threads):
    gate = threading.Semaphore(0)
    config = Config(
        executor_queue_size=SIZE, executor_batch_size=BATCH, num_ackers=0, executor_threads=threads
    )
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
                    return (
                        stats
                        if stats["slow"].processed == opened and ahead >= least and full
                        else None
                    )

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


@pytest.mark.parametrize("threads", ["shared", "per_executor"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_cycle_of_bolts_with_tiny_queues_does_not_deadlock(workers, threads):
    config = Config(
        executor_queue_size=2,
        executor_batch_size=1,
        max_spout_pending=None,
        executor_threads=threads,
    )
    result = complete_topology(cycle_topology(config), workers=workers, timeout=40)
    assert sorted(v for _, _, (v,) in result.emitted("sink")) == list(range(300))
    assert sorted(m for m, _ in result.emitted("spout", "acked")) == list(range(300))
    assert result.errors == []


@pytest.mark.timeout(90)
@pytest.mark.parametrize("threads", ["shared", "per_executor"])
@pytest.mark.parametrize("workers", [1, 3])
def test_tiny_queues_with_acking_between_workers_do_not_deadlock(workers, threads):
    # tuples cross between the workers in every direction while acks flow back to the
    # spouts; every queue holds at most 3 tuples and spouts are not limited in flight
    sentences = [f"w{i % 7} w{i % 5} w{i % 3} shared" for i in range(400)]
    topo = word_count_topology(sentences, parallelism=3, count_tasks=6)
    config = Config(
        executor_queue_size=3,
        executor_batch_size=1,
        max_spout_pending=None,
        executor_threads=threads,
    )
    result = complete_topology(topo, workers=workers, config=config, timeout=80)
    expected = collections.Counter(w for s in sentences for w in s.split())
    assert final_counts(result.emitted("count")) == expected
    assert result.statistics["sentences"].acked == len(sentences)
    # A thread of its own waits for room before it puts; a shared thread puts, then does not
    # step the producer again while the queue is full: past the bound by at most one step's
    # output of each producer (3 splitters, 4 words from the one sentence a step takes).
    bound = 3 if threads == "per_executor" else 3 + 3 * 4
    assert result.statistics["count"].queue_depth_max <= bound


def test_back_pressure_keeps_a_bounded_pipeline_from_growing():
    # the slow stage is the second of two: its bound holds the first, which holds the spout
    gate = threading.Semaphore(0)
    config = Config(
        executor_queue_size=SIZE,
        executor_batch_size=BATCH,
        num_ackers=0,
        executor_threads="per_executor",
    )
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


class Amplify(Bolt):
    """Emits ``AMPLIFY`` tuples for each input: a stage that makes more than it takes."""

    outputs = ["value", "copy"]

    def process(self, tup):
        for copy in range(AMPLIFY):
            self.emit([tup[0], copy])


AMPLIFY = 10


def test_a_shared_thread_does_not_step_an_executor_whose_queue_downstream_is_full():
    # In one thread nothing is slow by blocking: a stage that emits ten tuples per input
    # outruns the next.  Without back pressure the sink's queue would grow by nine batches a
    # round; the shared thread holds the amplifier while the sink's queue is full, and the
    # amplifier's full queue holds the spout.
    config = Config(executor_queue_size=SIZE, executor_batch_size=BATCH, num_ackers=0)
    assert config.executor_threads == "shared"  # the default
    topo = (
        Topology("amplified", config)
        .spout("counter", Counter)
        .bolt("amplify", Amplify, inputs={"counter": shuffle()})
        .bolt("sink", Recorder, inputs={"amplify": shuffle()})
    )
    with run_local(topo) as run:
        stats = wait_for(
            lambda: (s := run.statistics())["sink"].processed >= 50 * SIZE * AMPLIFY and s,
            what="the sink to process its share",
        )
        # one step of the amplifier puts BATCH * AMPLIFY past a full queue, one of the spout
        # BATCH; the queues did fill (else nothing was held back)
        assert SIZE <= stats["sink"].queue_depth_max <= SIZE + BATCH * AMPLIFY
        assert SIZE <= stats["amplify"].queue_depth_max <= SIZE + BATCH
        ahead = stats["counter"].emitted - stats["sink"].processed // AMPLIFY
        assert ahead <= 2 * SIZE + BATCH * (AMPLIFY + 2)
        assert run.errors() == []


def test_a_worker_stops_while_its_shared_thread_holds_executors_back():
    # Placement (assignment.py): the spout on worker 0, the gate (declared next) on worker 1,
    # the relay beside its input, on worker 0.  The relay has sent its window of credits
    # to the closed gate and holds the rest; its queue fills, and the spout, whose emits would
    # go there, is not stepped either.  Stopping the worker must still end both, and its thread.
    gate = threading.Semaphore(0)
    config = Config(executor_queue_size=SIZE, executor_batch_size=BATCH, num_ackers=0)
    topo = (
        Topology("held", config)
        .spout("counter", Counter)
        .bolt("slow", partial(Gate, gate), inputs={"relay": all_()})
        .bolt("relay", Recorder, inputs={"counter": all_()})
    )
    with run_local(topo, workers=2) as run:
        try:
            worker = run.workers[0]
            spout, relay = sorted(worker.executors, key=lambda e: e.component)
            assert (spout.component, relay.component) == ("counter", "relay")
            wait_for(
                lambda: relay.outbox.held and spout.outbox.blocked,
                what="the relay to run out of credits and the spout to be held back by it",
            )
            assert worker.stop(timeout=5) == []
        finally:
            gate.release(10**6)


def test_items_whose_output_waits_for_credits_are_not_counted_as_handled():
    # The completion detector trusts that an item counts as handled only once what it emitted
    # is on its way.  Worker 0's relay (placed beside its input, the spout, on worker 0; the
    # gate on worker 1) turns the one spout tuple into ten for the
    # other worker, which has credits for eight: two wait in the relay's outbox, and until
    # they leave, worker 0 must not look finished.
    gate = threading.Semaphore(0)
    config = Config(executor_queue_size=SIZE, executor_batch_size=BATCH, num_ackers=0)
    assert AMPLIFY > SIZE // 2  # more than the window of credits towards worker 1
    topo = (
        Topology("unsent", config)
        .spout("one", partial(ValueSpout, [7], replay=False))
        .bolt("slow", partial(Gate, gate), inputs={"relay": all_()})
        .bolt("relay", Amplify, inputs={"one": all_()})
    )
    with run_local(topo, workers=2) as run:
        try:
            worker = run.workers[0]
            (relay,) = [e for e in worker.executors if e.component == "relay"]
            wait_for(lambda: relay.outbox.held, what="the relay to run out of credits")
            activity = worker.activity()
            assert activity.spouts_done
            assert activity.dequeued < activity.enqueued  # the relay's input is not done yet
            gate.release(10**6)
            stats = wait_for(
                lambda: (s := run.statistics())["slow"].processed == AMPLIFY and s,
                what="every tuple to arrive",
            )
            assert stats["relay"].processed == 1
            wait_for(lambda: run.done(), what="the run to be seen complete")
        finally:
            gate.release(10**6)
