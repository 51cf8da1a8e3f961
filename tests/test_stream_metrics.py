"""Per-component metrics: emitted, acked, failed, latency, queue depth, own counters."""

from __future__ import annotations

import threading
from functools import partial

import pytest

from brokerless.stream import (
    Bolt,
    Config,
    Topology,
    all_,
    complete_topology,
    run_local,
    run_multiprocess,
    shuffle,
)
from brokerless.stream.examples import SENTENCES, word_count
from brokerless.stream.metrics import (
    BUCKETS,
    MAX_ARRIVED,
    ROLL_SECS,
    WINDOWS,
    ExecutorMetrics,
    MetricsRoller,
)
from brokerless.stream.statistics import Statistics

from .stream_topologies import (
    AckInBatches,
    Busy,
    Counter,
    FlushesEvery,
    ValueSpout,
    Waits,
    WritesBatches,
    wait_for,
)


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
    # 64 tuples: 4 or 5 timed (one in each 16), so one slow first call is not the mean
    topo = (
        Topology("latency")
        .spout("spout", partial(ValueSpout, range(64)))
        .bolt("busy", partial(Busy, 2.0), inputs={"spout": all_()})
    )
    stats = complete_topology(topo, timeout=20).statistics
    assert 2.0 <= stats["busy"].latency_ms_mean < 50
    assert stats["busy"].latency_ms_p99 >= 2.0
    # a spout tuple's tree completes after the 2 ms bolt ran
    assert stats["spout"].latency_ms_mean >= 2.0


@pytest.mark.timeout(60)
def test_execute_latency_sees_work_that_comes_every_nth_tuple():
    """Latency is timed for one tuple in 16, at a random place in each 16 as Storm's even
    sampler: a bolt that writes out its buffer every 20th tuple spends nearly all its time
    there, and its latency and capacity say so.  Timing every 16th tuple, brokerless never
    timed a write (the 20th, 40th, ... tuple is never 16k + 1st): a mean of microseconds."""
    topology = (
        Topology("bursts")
        .spout("spout", partial(ValueSpout, range(4000), replay=False))
        .bolt("writes", partial(FlushesEvery, 20, 20), inputs={"spout": all_()})
    )
    stats = complete_topology(topology, timeout=50).statistics
    # 200 writes of 20 ms in 4000 tuples: 1 ms a tuple; 250 timed, ~12 of them writes
    assert stats["writes"].latency_ms_mean > 0.04
    assert stats["writes"].capacity > 0.04


def test_latency_is_timed_once_in_each_16_tuples_at_a_random_place():
    metrics, timed = ExecutorMetrics(), []
    for count in range(16 * 2000):  # as an executor does (bolts: processed; spouts: acked)
        if count >= metrics.next_sample:
            timed.append(count)
            metrics.sampled(1000, count)
    assert timed[0] == 0 and metrics.latency.n == len(timed) == 2000
    assert [count // 16 for count in timed] == list(range(2000))  # one in each 16
    assert {count % 16 for count in timed} == set(range(16))  # anywhere in them


class WaitsThenAcksInBatches(AckInBatches):
    """Spends 1 ms blocked in each ``process`` and acks its tuples 20 at a time: each waits in
    the bolt for the ones after it in its batch."""

    def prepare(self, conf, context):
        self.never = threading.Event()

    def process(self, tup):
        self.never.wait(0.001)
        super().process(tup)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["local", "multiprocess"])
def test_process_latency_runs_from_process_to_the_ack(mode):
    """Storm UI's "process latency": from ``process`` called with a tuple to the bolt's ack of
    it.  "batches" acks 20 at a time: a tuple waits there for up to 19 more executes of 1 ms,
    so its process latency is several times its execute latency; "busy" acks each tuple as
    ``process`` returns (``auto_ack``): the two are the same 2 ms (the ack comes before the
    execute latency is taken).  brokerless had execute latency only."""
    topology = (
        Topology("process-latency")
        .spout("numbers", partial(ValueSpout, range(400)))
        .bolt("batches", partial(WaitsThenAcksInBatches, 20), inputs={"numbers": shuffle()})
        .bolt("busy", partial(Busy, 2.0), inputs={"numbers": shuffle()})
    )
    workers = 2 if mode == "multiprocess" else None
    stats = complete_topology(topology, mode=mode, workers=workers, timeout=60).statistics
    batches, busy = stats["batches"], stats["busy"]
    assert batches.acked == busy.acked == 400
    assert batches.latency_ms_mean >= 1.0
    assert batches.process_latency_ms_mean > 3 * batches.latency_ms_mean
    assert batches.process_latency_ms_p99 >= batches.latency_ms_p99
    assert 2.0 <= busy.process_latency_ms_mean <= busy.latency_ms_mean
    for row in (batches, *(e for e in stats.executors if e.component == "batches")):
        for window in row.windows.values():  # (younger than 10 minutes: all the same)
            assert window.process_latency_ms_mean == pytest.approx(row.process_latency_ms_mean)
    for spout in (stats["numbers"], *(e for e in stats.executors if e.component == "numbers")):
        assert spout.process_latency_ms_mean is None and spout.process_latency_ms_p99 is None
        assert spout.windows["10m"].process_latency_ms_mean is None
    as_dict = stats.as_dict()["components"]["batches"]
    assert as_dict["process_latency_ms_mean"] == batches.process_latency_ms_mean
    assert as_dict["windows"]["3h"]["process_latency_ms_mean"] > 0


def test_a_sampled_tuple_never_acked_is_forgotten_in_time():
    """A bolt may leave tuples to time out: the sampled ones waiting for their ack are bounded,
    the first to arrive forgotten first; a failed tuple has no process latency."""
    metrics, held = ExecutorMetrics(), [object() for _ in range(MAX_ARRIVED + 1)]
    for ns, tup in enumerate(held):
        metrics.arrive(tup, ns)
    assert len(metrics.arrived) == MAX_ARRIVED and held[0] not in metrics.arrived
    metrics.settle(held[0], True)  # (forgotten: nothing taken)
    metrics.settle(held[1], False)
    assert metrics.process_latency.n == 0
    metrics.settle(held[2], True)
    assert metrics.process_latency.n == 1 and len(metrics.arrived) == MAX_ARRIVED - 2


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


class Clock:
    """A clock the test moves (``ExecutorMetrics(clock=...)``)."""

    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now

    def pass_(self, seconds: float, metrics: ExecutorMetrics) -> None:
        """``seconds`` go by, the worker's roller marking ``metrics`` every ROLL_SECS."""
        for _ in range(round(seconds / ROLL_SECS)):
            self.now += ROLL_SECS
            metrics.roll()


def test_a_window_counts_only_what_happened_within_it():
    """Storm UI's windows: 10 minutes, 3 hours, 1 day, all time, each moving on by 1/20 of
    itself.  brokerless had all-time counters only."""
    clock = Clock()
    m = ExecutorMetrics(clock=clock)
    m.processed, m.emitted = 100, 50  # in the first half hour
    m.latency.add(4_000_000)
    clock.pass_(1800, m)
    m.processed += 7  # in the last 10 minutes
    m.latency.add(2_000_000)
    clock.pass_(300, m)
    windows = m.windows()
    assert set(windows) == set(WINDOWS) == {"10m", "3h", "1d", "all-time"}
    ten = windows["10m"]
    assert (ten["processed"], ten["emitted"], ten["timed"], ten["timed_ns"]) == (7, 0, 1, 2e6)
    assert 600 * (1 - 1 / BUCKETS) <= ten["span_s"] <= 600
    for name in ("3h", "1d", "all-time"):  # the executor is younger: its whole life
        window = windows[name]
        assert (window["processed"], window["emitted"], window["timed"]) == (107, 50, 2)
        assert window["span_s"] == 2100
    clock.pass_(3 * 3600, m)  # 3 h later, nothing since
    windows = m.windows()
    assert windows["10m"]["processed"] == windows["3h"]["processed"] == 0
    assert windows["1d"]["processed"] == windows["all-time"]["processed"] == 107
    assert 3 * 3600 * (1 - 1 / BUCKETS) <= windows["3h"]["span_s"] <= 3 * 3600 + ROLL_SECS


def test_a_stopped_executors_figures_stay_as_they_were_when_it_stopped():
    """Statistics after ``stop()`` are the run's last: a local run's (read from its stopped
    workers) no longer show a capacity that falls as time goes by, as a multi-process run's
    (its workers' final reports) never did."""
    clock = Clock()
    m = ExecutorMetrics(clock=clock)
    roller = MetricsRoller("test", [m])  # (its thread not started: the test rolls)
    m.processed = 10
    m.latency.add(3_000_000_000)  # 10 tuples of 3 s in 60 s: capacity 0.5
    clock.pass_(60, m)
    roller.close()
    stopped = m.windows()
    clock.pass_(3600, m)
    assert m.windows() == stopped
    assert stopped["10m"]["span_s"] == stopped["all-time"]["span_s"] == 60
    snapshot = {
        "worker": dict.fromkeys(
            ("worker", "transfer_depth", "transfer_depth_max", "sent", "received", "bad_messages"),
            0,
        ),
        "executors": [
            {
                "executor": 0,
                "component": "bolt",
                "kind": "bolt",
                "tasks": 1,
                **dict.fromkeys(
                    ("emitted", "transferred", "acked", "failed", "errors", "pending"), 0
                ),
                "processed": m.processed,
                "latency": m.latency.snapshot(),
                "process_latency": m.process_latency.snapshot(),
                **dict.fromkeys(("queue_depth", "queue_depth_max", "pending_max"), 0),
                "queue_capacity": None,
                "metrics": {},
                "windows": m.windows(),
            }
        ],
    }
    assert Statistics.merge([snapshot])["bolt"].capacity == 0.5


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["local", "multiprocess"])
def test_capacity_is_the_share_of_time_a_bolt_spends_in_process(mode):
    """Storm UI's capacity (executed * execute latency / window): "slow" blocks 20 ms in each
    ``process`` and is never short of input, so each of its executors (a thread each) is busy
    nearly all the time; "quick" processes as many tuples, in microseconds.  brokerless had
    no capacity."""
    topology = (
        Topology("capacity", Config(executor_threads="per_executor"))
        .spout("numbers", Counter)
        .bolt("slow", partial(Waits, 20), parallelism=2, inputs={"numbers": shuffle()})
        .bolt("quick", partial(Waits, 0), inputs={"slow": shuffle()})
    )
    run = run_local if mode == "local" else partial(run_multiprocess, workers=2)
    with run(topology) as running:

        def each_slow_executor_did_200() -> Statistics | None:  # 4 s of work: start-up is
            stats = running.statistics()  # a small part of its time
            slow = [e for e in stats.executors if e.component == "slow"]
            return stats if all(e.processed >= 200 for e in slow) else None

        stats = wait_for(each_slow_executor_did_200, timeout=60, what="200 tuples each")
    slow, quick = stats["slow"], stats["quick"]
    executors = [e for e in stats.executors if e.component == "slow"]
    # about 1: timings are sampled (one tuple in 16: some 12 samples an executor here), and on
    # a loaded machine a sleep of 20 ms can overrun, so one late sample moves the mean (once
    # above 1.5); a slow start of the other worker leaves an executor idle for part of its
    # life (once below 0.5)
    capacities = [e.capacity for e in executors]
    assert slow.capacity == max(capacities) > 0.3, capacities
    assert all(0.3 < c < 2.0 for c in capacities), capacities
    assert quick.capacity is not None and quick.capacity < 0.1
    assert stats["numbers"].capacity is None and stats["numbers"].windows["10m"].capacity is None
    # younger than 10 minutes: every window is its whole life, as the all-time figures
    for name in ("10m", "3h", "1d"):
        assert slow.windows[name] == slow.windows["all-time"]
    everything = slow.windows["all-time"]
    assert everything.processed >= slow.processed >= 1 and everything.span_s > 0
    assert everything.latency_ms_mean >= 20 and slow.latency_ms_mean >= 20
    assert stats.as_dict()["components"]["slow"]["windows"]["10m"]["capacity"] == slow.capacity


@pytest.mark.timeout(60)
def test_a_batching_bolts_capacity_counts_its_batches():
    """A batching bolt (streamparse's) does its work in ``process_tick``, not ``process``:
    this one spends 80 ms of every 100 writing batches, and its capacity says it is busy.
    Counting ``process`` alone, it said 0.00 (all its time was in tick tuples)."""
    topology = (
        Topology("batches")
        .spout("numbers", Counter)
        .bolt("writes", WritesBatches, inputs={"numbers": shuffle()})
    )
    with run_local(topology) as running:
        stats = wait_for(
            lambda: (s := running.statistics())["writes"].metrics.get("batches", 0) >= 10 and s,
            timeout=50,
            what="10 batches written",
        )
    assert stats["writes"].capacity > 0.3
