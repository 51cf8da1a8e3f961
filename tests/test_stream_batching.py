"""streamparse's batching bolts (``BatchingBolt``, ``TicklessBatchingBolt``) and ``auto_fail``:
batches per key processed on ticks, their tuples acked, failed or anchored together, a run to
completion waiting for the last batch, and a checkpoint taking every batch before its barrier."""

from __future__ import annotations

import collections
from functools import partial
from typing import Any

import pytest

from brokerless.stream import (
    DEFAULT_STREAM,
    BatchingBolt,
    Bolt,
    Config,
    SequenceSpout,
    Topology,
    TopologyError,
    complete_topology,
    fields,
    run_local,
    shuffle,
)

from .live_input import counted, words
from .stream_topologies import (
    CountBatches,
    FailAll,
    StatefulCount,
    TicklessCount,
    ValueSpout,
    WordSplit,
    wait_for,
)

pytestmark = pytest.mark.timeout(60)

WORDS = [f"w{i % 5}" for i in range(300)]


class FailBatch(CountBatches):
    """Raises on the batch of ``w0``: its tuples fail, the others' are acked."""

    def process_batch(self, key: Any, tups: list[Any]) -> None:
        if key == "w0":
            raise ValueError("the w0 batch failed")
        super().process_batch(key, tups)


def batching(bolt: Any = CountBatches, *, ackers: int = 1, tick: float | None = 0.05) -> Topology:
    return (
        Topology("batching", Config(num_ackers=ackers, tick_tuple_freq_secs=tick))
        .spout("words", partial(ValueSpout, WORDS, replay=False))
        .bolt("batch", bolt, inputs={"words": shuffle()})
    )


def summed(result: Any) -> collections.Counter[str]:
    total: collections.Counter[str] = collections.Counter()
    for word, n in result.emitted("batch"):
        total[word] += n
    return total


@pytest.mark.parametrize(
    ("mode", "ackers", "bolt"),
    [
        ("local", 1, CountBatches),
        ("local", 0, CountBatches),
        ("local", 1, TicklessCount),
        ("multiprocess", 1, CountBatches),
        ("multiprocess", 0, TicklessCount),
    ],
)
def test_batches_per_key_are_processed_on_ticks_and_a_run_waits_for_the_last(mode, ackers, bolt):
    """Each tuple is in exactly one batch of its key; batches hold several tuples; a run to
    completion ends only once the last batch was processed (without acking too, where only
    the executor's own bookkeeping knows the bolt still holds tuples)."""
    workers = 2 if mode == "multiprocess" else None
    result = complete_topology(batching(bolt, ackers=ackers), mode=mode, workers=workers)
    assert summed(result) == collections.Counter(WORDS)
    assert max(n for _, n in result.emitted("batch")) > 1
    if ackers:
        acked = result.emitted("words", "acked")
        assert sorted(msg_id for msg_id, _ in acked) == list(range(len(WORDS)))
        assert result.emitted("words", "failed") == []


def test_a_batch_whose_processing_raised_fails_its_tuples_and_the_others_are_acked():
    result = complete_topology(batching(FailBatch))
    failed = sorted(msg_id for (msg_id,) in result.emitted("words", "failed"))
    acked = sorted(msg_id for msg_id, _ in result.emitted("words", "acked"))
    assert failed == [i for i, w in enumerate(WORDS) if w == "w0"]
    assert acked == [i for i, w in enumerate(WORDS) if w != "w0"]
    assert summed(result) == collections.Counter(w for w in WORDS if w != "w0")
    assert {e.error for e in result.errors} == {"ValueError('the w0 batch failed')"}


def test_what_a_batch_emits_is_anchored_to_every_tuple_of_the_batch():
    """A tuple ``process_batch`` emits carries the batch's spout tuples: when a bolt
    downstream fails it, every one of them fails."""
    topology = batching().bolt("fail", FailAll, inputs={"batch": shuffle()})
    result = complete_topology(topology)
    failed = sorted(msg_id for (msg_id,) in result.emitted("words", "failed"))
    assert failed == list(range(len(WORDS)))
    assert result.emitted("words", "acked") == []


class RaiseOnOdd(Bolt):
    """Raises on odd values."""

    outputs = ["value"]

    def process(self, tup: Any) -> None:
        if tup[0] % 2:
            raise ValueError(f"odd: {tup[0]}")
        self.emit([tup[0]])


class RaiseOnOddNoFail(RaiseOnOdd):
    auto_fail = False


@pytest.mark.parametrize("auto_fail", [True, False])
def test_auto_fail_false_leaves_the_tuple_of_a_raising_process_to_time_out(auto_fail):
    """streamparse's ``auto_fail``: with it (the default) the input of a ``process`` that
    raised is failed at once; without it, only the error is recorded and the tuple is left to
    its timeout.  Values 1 (odd) then 2: the bolt's fail of 1 goes to the acker before its
    ack of 2, so once 2 is acked the spout has heard of 1's failure if there was one."""
    bolt = RaiseOnOdd if auto_fail else RaiseOnOddNoFail
    topology = (
        Topology("auto-fail", Config(num_ackers=1, message_timeout_secs=600))
        .spout("values", partial(ValueSpout, [1, 2], replay=False))
        .bolt("check", bolt, inputs={"values": shuffle()})
    )
    with run_local(topology, capture=True) as run:

        def told(stream: str) -> list[int]:
            return [v[0] for c, s, v in run.captured() if c == "values" and s == stream]

        wait_for(lambda: 1 in told("acked"), what="value 2 acked")
        failed = told("failed")
        assert any("odd: 1" in e.error for e in run.errors())
    assert failed == ([0] if auto_fail else [])


def test_a_batching_bolt_without_tick_tuples_is_refused_with_what_to_do():
    with pytest.raises(TopologyError, match=r"BatchingBolt.*tick_tuple_freq_secs"):
        batching(tick=None).build()
    plan = (
        Topology("tickless")
        .spout("words", partial(ValueSpout, WORDS))
        .bolt("a", TicklessCount, inputs=["words"])
        .bolt("b", TicklessCount, inputs=["words"], tick_tuple_freq_secs=1.5)
        .bolt("c", CountBatches, inputs=["words"], tick_tuple_freq_secs=0.5)
        .build()
    )
    assert [plan.components[c].tick_secs for c in "abc"] == [0.05, 1.5, 0.5]

    class Never(CountBatches):
        ticks_between_batches = 0

    with pytest.raises(TopologyError, match="ticks_between_batches must be an integer >= 1"):
        batching(Never).build()


class BatchWords(BatchingBolt):
    """Passes each word on, a batch at a time (one batch per word)."""

    outputs = ["word"]

    def group_key(self, tup: Any) -> Any:
        return tup[0]

    def process_batch(self, key: Any, tups: list[Any]) -> None:
        for _ in tups:
            self.emit([key])


class TrackedSentences(SequenceSpout):
    """SequenceSpout's tuples, each with its position as ``msg_id``: tracked, so
    ``max_spout_pending`` bounds how far the spout runs ahead of the barriers."""

    def emit(
        self,
        values: Any,
        stream: str = DEFAULT_STREAM,
        msg_id: Any = None,
        direct_task: int | None = None,
    ) -> list[int]:
        return super().emit(values, stream, self.position(), direct_task)


SENTENCES = [f"s{i} the cow jumped over the moon {i % 7}" for i in range(1200)]


def test_a_checkpoint_takes_every_batch_before_its_barrier_so_a_rollback_loses_none():
    """In a checkpointed topology a batching bolt processes its batches before a barrier
    passes it (its ticks here come once an hour): the tuples it held are in the checkpoint,
    and a worker killed after it loses none of them.  The run ends only with the last batch.
    The spout's tuples are acked only as the batches holding them are processed, at a barrier,
    and at most 200 are in flight: the run moves on a checkpoint at a time, so the worker is
    killed with most of the input still to come, however slow the machine.  (Untracked, the
    spout emitted all its sentences at once, the second barrier came behind all of them, and
    the wait for two checkpoints timed out when two test files ran side by side.)"""
    topology = (
        Topology(
            "batched-count",
            Config(
                num_workers=2,
                checkpoint_interval_secs=0.05,
                tick_tuple_freq_secs=3600,
                max_spout_pending=200,
            ),
        )
        .spout("sentences", partial(TrackedSentences, [[s] for s in SENTENCES], ["sentence"]))
        .bolt("split", WordSplit, parallelism=2, inputs={"sentences": shuffle()})
        .bolt("batch", BatchWords, parallelism=2, inputs={"split": fields("word")})
        .bolt("count", StatefulCount, parallelism=2, inputs={"batch": fields("word")})
    )
    with run_local(topology) as run:
        wait_for(lambda: run.checkpoint_statistics().completed >= 2, what="two checkpoints")
        assert counted(run.checkpoint_dir).total() < words(SENTENCES).total() / 2
        run.kill_worker(1)
        run.wait_until_done(30)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == words(SENTENCES)
        assert len(run.restarts) == 1
