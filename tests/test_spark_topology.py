"""Topologies on Spark (``brokerless.spark.run_on_spark``): the same results as local mode, a
lost worker restarts the topology with exact counts once Spark has the slots for it (and the
run says what it waits for), a stage Spark refuses for slots costs no attempt, too few slots
and attempts that run out say so, a failed job is sorted by what Spark says and told whole,
stop and Ctrl-C end everything, and the demo runs end to end.

One local Spark session (``local[3]``) serves the whole module; the demo's Ctrl-C test starts
its own, in the driver process it interrupts.  A local master cannot lose or gain an executor,
so the tests that need one "gone" make the run count fewer (or more) slots than Spark has;
``test_spark_cluster.py`` does it for real, on a standalone cluster.
"""

from __future__ import annotations

import collections
import gc
import io
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest
from py4j.protocol import Py4JJavaError

from brokerless.spark import (
    Phase,
    complete_on_spark,
    demo,
    run_on_spark,
    session_builder,
    task_slots,
)
from brokerless.spark import topology as spark_topology
from brokerless.spark.demo import book_lines, run_demo, sherlock_topology, top_words, word_counts
from brokerless.spark.failures import JobEnd, job_failure
from brokerless.spark.session import barrier_refusal, slot_shortage
from brokerless.stream import (
    Config,
    Count,
    Topology,
    TopologyError,
    WorkerProcessError,
    all_,
    registry,
    shuffle,
)
from brokerless.stream.examples import final_counts
from brokerless.stream.testing import complete_topology, run_to_completion

from .live_input import counted
from .processes import descendants, gone
from .spark_topologies import (
    LONG_ERROR,
    CountThenReport,
    KillOwnProcess,
    kill_second_task,
    no_op,
    raise_deep_in_task,
    wait_for_cancel,
)
from .stream_topologies import (
    Counter,
    FailingCount,
    ReportInterpreter,
    Sink,
    Source,
    TicklessCount,
    Windows,
    wait_for,
)
from .test_stream_state import EXPECTED as STATEFUL_EXPECTED
from .test_stream_state import SENTENCES as STATEFUL_SENTENCES
from .test_stream_state import word_count as stateful_word_count

ROOT = Path(__file__).resolve().parent.parent
SLOTS = 3


@pytest.fixture(scope="module")
def spark():
    with pytest.MonkeyPatch.context() as env:  # PySpark reads the workers' Python from here
        env.setenv("PYSPARK_PYTHON", sys.executable)
        session = (
            session_builder(f"local[{SLOTS}]", "brokerless-spark-topology")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def left_behind(run) -> list[str]:
    """Threads of ours that a worker's (reused) Python process had before its task began."""
    return [
        name
        for info in run.worker_info
        for name in info["threads_before"]
        if name.startswith("brokerless") or ":" in name
    ]


def occurrences(counts: collections.Counter) -> list[tuple[str, int]]:
    """Every ``[word, running count]`` a count bolt emits when it sees each word once."""
    return sorted((word, k) for word, n in counts.items() for k in range(1, n + 1))


@pytest.mark.timeout(60)
def test_too_few_slots_is_reported_at_once(spark):
    assert task_slots(spark.sparkContext) == SLOTS
    began = time.monotonic()
    with pytest.raises(
        TopologyError,
        match=rf"needs {SLOTS + 1} Spark task slots .* has "
        rf"{SLOTS}: ask for fewer workers \(workers={SLOTS}\) "
        rf"or give Spark more cores: master='local\[4\]'$",
    ):
        run_on_spark(sherlock_topology(lines=10), spark=spark, workers=SLOTS + 1)
    assert time.monotonic() - began < 10  # a local master never gains slots: no wait


class SlotCount:
    """Stands in for ``task_slots``: reports ``slots`` (the test changes it), counts calls."""

    def __init__(self, slots: int) -> None:
        self.slots, self.calls = slots, 0

    def __call__(self, sc) -> int:
        self.calls += 1
        return self.slots


@pytest.mark.timeout(60)
def test_a_stage_spark_refuses_for_slots_costs_no_attempt(spark, monkeypatch, caplog):
    # As if an executor went away between each count and the submission: the run counts 4
    # slots, Spark (local[3]) has 3 and refuses the stage before any task runs, every time.
    monkeypatch.setattr(spark_topology, "task_slots", SlotCount(SLOTS + 1))
    began = time.monotonic()
    with pytest.raises(
        TopologyError,
        match=rf"needs {SLOTS + 1} Spark task slots at once .* has "
        rf"{SLOTS}: .* \(waited 4 s\)$",
    ):
        run_on_spark(
            sherlock_topology(lines=10),
            spark=spark,
            workers=SLOTS + 1,
            start_timeout=4,
            max_attempts=2,
        )
    refusals = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith("topology 'sherlock-top-words': Spark refused")
    ]
    assert len(refusals) >= 2, caplog.text  # submitted again after a refusal, in the same wait
    assert refusals[0].endswith(f"(needed, there: ({SLOTS + 1}, {SLOTS})); waiting for slots")
    assert time.monotonic() - began < 30


def barrier_job_failure(sc, partitions: int, body):
    """How ``failures.job_failure`` sorts the error of a barrier job running ``body``."""
    try:
        sc.parallelize(range(partitions), partitions).barrier().mapPartitions(body).collect()
    except Py4JJavaError as error:
        return job_failure(error)
    raise AssertionError("the job did not fail")


@pytest.mark.timeout(120)
def test_a_failed_job_is_sorted_by_what_spark_says_and_told_whole(spark):
    sc = spark.sparkContext
    raised = barrier_job_failure(sc, 2, raise_deep_in_task)
    assert raised.end is JobEnd.TASK_RAISED and not raised.retried
    assert f"ValueError: {LONG_ERROR}" in raised.cause  # the whole of it, in its own line
    assert "in raise_deep_in_task\n" in raised.cause  # and the whole traceback, from the top
    assert "[Previous line repeated 7 more times]" in raised.cause
    assert "\tat " not in raised.cause  # not the JVM's stack frames
    lost = barrier_job_failure(sc, 2, kill_second_task)
    assert lost.end is JobEnd.WORKER_LOST and lost.retried
    assert "Python worker exited unexpectedly (crashed)" in lost.cause
    refused = barrier_job_failure(sc, SLOTS + 1, no_op)
    assert refused.end is JobEnd.SLOTS_REFUSED and refused.slots == (SLOTS + 1, SLOTS)
    failure = {}

    def run_cancellable() -> None:
        sc.setJobGroup("cancel-me", "a job the test cancels", interruptOnCancel=True)
        failure["it"] = barrier_job_failure(sc, 2, wait_for_cancel)

    job = threading.Thread(target=run_cancellable)
    job.start()
    wait_for(lambda: sc.statusTracker().getActiveJobsIds(), timeout=60, what="the job to run")
    sc.cancelJobGroup("cancel-me")
    job.join(60)
    assert failure["it"].end is JobEnd.CANCELLED and not failure["it"].retried


def test_the_slot_error_names_what_to_change_on_each_kind_of_master():
    def shortage(master: str, cpus: str = "1") -> str:
        sc = SimpleNamespace(master=master, getConf=lambda: {"spark.task.cpus": cpus})
        return slot_shortage(sc, "t", 4, 2)

    assert shortage("local[2]").endswith(
        "has 2: ask for fewer workers (workers=2) or give Spark more cores: master='local[4]'"
    )
    assert shortage("local[4]", cpus="2").endswith(
        "has 2 (2 cores per task: spark.task.cpus=2): ask for fewer workers (workers=2) or give "
        "Spark more cores: master='local[8]'"
    )
    for master in ("spark://h:7077", "yarn", "k8s://https://h:6443", "local-cluster[2,1,512]"):
        assert "local[" not in shortage(master), master
    assert "more Workers (or Workers with more --cores)" in shortage("spark://host:7077")
    assert "spark.executor.instances" in shortage("yarn")


def test_a_session_with_dynamic_allocation_is_refused_as_spark_would():
    def refusal(master: str, **conf: str) -> str | None:
        settings = {f"spark.dynamicAllocation.{key}": value for key, value in conf.items()}
        return barrier_refusal(SimpleNamespace(master=master, getConf=lambda: settings), "t")

    for master in ("spark://h:7077", "yarn", "local-cluster[2,1,512]"):
        assert refusal(master) is None
        assert refusal(master, enabled="false") is None
        message = refusal(master, enabled="true")
        assert message is not None
        assert "BarrierJobRunWithDynamicAllocationException" in message
        assert "spark.executor.instances, or spark.cores.max" in message
    assert refusal("local[2]", enabled="true") is None  # Spark ignores it in-process
    assert refusal("local[2]", enabled="true", testing="true") is not None  # unless testing


@pytest.mark.timeout(180)
def test_word_count_on_spark_equals_a_plain_count_and_local_mode(spark):
    lines = 3000
    topology = sherlock_topology(lines=lines)
    expected = word_counts(lines)
    run = run_on_spark(topology, spark=spark, workers=SLOTS, capture=True)
    result = run_to_completion(run, timeout=120)
    assert result.errors == []
    # count is split over 4 tasks in 3 workers: a word whose tuples reached two tasks would
    # be counted in halves; every running count appears exactly once
    assert final_counts(result.emitted("count")) == expected
    assert sorted(map(tuple, result.emitted("count"))) == occurrences(expected)
    local = complete_topology(topology, timeout=60)
    assert final_counts(local.emitted("count")) == expected
    assert sorted(map(tuple, result.emitted("split"))) == sorted(map(tuple, local.emitted("split")))
    stats = result.statistics
    assert stats["lines"].acked == lines and stats["count"].processed == sum(expected.values())
    assert [w.worker for w in stats.workers] == [0, 1, 2]
    assert sum(w.sent for w in stats.workers) == sum(w.received for w in stats.workers) > 0
    assert run.attempt == 1 and run.restarts == [] and run.job_error is None
    assert len(set(run.worker_pids)) == SLOTS and left_behind(run) == []


@pytest.mark.timeout(180)
def test_complete_on_spark_with_mocked_sources(spark):
    topology = (
        Topology("mocked")
        .spout("values", Source)
        .bolt("sink", Sink, parallelism=2, inputs={"values": shuffle()})
    )
    result = complete_on_spark(
        topology, {"values": [[i] for i in range(50)]}, spark=spark, workers=2, timeout=120
    )
    assert sorted(v for (v,) in result.emitted("values")) == list(range(50))
    assert result.statistics["values"].acked == 50


class TumblingTen(Windows):
    window_length = Count(10)


@pytest.mark.timeout(180)
def test_batching_and_windowed_bolts_complete_on_spark(spark):
    """A TicklessBatchingBolt and a tumbling Count window, their executors as in the other
    modes: every tuple batched once, every window of ten, every spout tuple acked."""
    topology = (
        Topology("buffered")
        .spout("values", Source)
        .bolt("batch", TicklessCount, parallelism=2, inputs={"values": shuffle()})
        .bolt("window", TumblingTen, inputs={"values": shuffle()})
    )
    values = [f"w{i % 3}" for i in range(60)]
    result = complete_on_spark(
        topology, {"values": [[v] for v in values]}, spark=spark, workers=2, timeout=120
    )
    batched: collections.Counter[str] = collections.Counter()
    for word, n in result.emitted("batch"):
        batched[word] += n
    assert batched == collections.Counter(values)
    windows = [w for w, _, _ in result.emitted("window")]
    assert sorted(len(w) for w in windows) == [10] * 6
    assert sorted(v for w in windows for v in w) == sorted(values)
    assert result.statistics["values"].acked == 60 and result.errors == []
    # Storm's process latency, from Spark tasks too: a tuple waits in its batch until acked
    batch = result.statistics["batch"]
    assert batch.process_latency_ms_mean > batch.latency_ms_mean > 0


@pytest.mark.timeout(180)
def test_a_task_runs_with_the_configured_interpreter_settings_and_leaves_the_old_ones_after(
    spark,
):
    config = Config(worker_gc_threshold=43_210, worker_switch_interval=0.004)
    topology = (
        Topology("interpreter", config)
        .spout("values", Source)
        .bolt("report", ReportInterpreter, parallelism=SLOTS, inputs={"values": shuffle()})
    )
    result = complete_on_spark(
        topology, {"values": [[i] for i in range(60)]}, spark=spark, workers=SLOTS, timeout=120
    )
    assert result.errors == []
    assert sorted(v for v, _, _, _ in result.emitted("report")) == list(range(60))
    assert {(t, i) for _, t, i, _ in result.emitted("report")} == {(43_210, 0.004)}
    # Spark runs its next tasks in the same Python processes: theirs are as they were before
    ran = {pid for _, _, _, pid in result.emitted("report")}
    after = dict(
        spark.sparkContext.parallelize(range(4 * SLOTS), 4 * SLOTS)
        .map(lambda _: (os.getpid(), (gc.get_threshold()[0], sys.getswitchinterval())))
        .collect()
    )
    assert ran & set(after), f"no task ran where the topology did: {ran} then {after}"
    assert {after[pid] for pid in ran & set(after)} == {
        (gc.get_threshold()[0], sys.getswitchinterval())
    }


@pytest.mark.timeout(90)
def test_a_start_that_times_out_says_which_tasks_started_and_what_spark_says_of_them(
    spark, monkeypatch
):
    # The workers are told a control endpoint nobody listens on: none can say it started.
    # The error says which did and what Spark's status tracker says of the stage (a start that
    # timed out once in CI with "1 of 2" and nothing more to go on).
    opened = spark_topology.SparkRun._open_control

    def unreachable(self, bind, advertise=None):
        opened(self, bind, advertise=advertise)
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
        return f"tcp://127.0.0.1:{port}"

    monkeypatch.setattr(spark_topology.SparkRun, "_open_control", unreachable)
    with pytest.raises(
        TimeoutError,
        match=r"'mocked': 0 of 2 Spark tasks started within 5 s \(workers \[\] did; "
        r"worker 0: never heard from; worker 1: never heard from; "
        r"stage \d+ \(attempt 0, job \d+, RUNNING\): 2 task\(s\), ",
    ):
        run_on_spark(
            Topology("mocked")
            .spout("values", Source)
            .bolt("sink", Sink, inputs={"values": shuffle()}),
            spark=spark,
            workers=2,
            start_timeout=5,
        )


@pytest.mark.timeout(240)
def test_a_killed_worker_restarts_the_topology_once_slots_allow_and_the_counts_stay_exact(
    spark, monkeypatch, caplog
):
    # Recovery is replay from the start: the second attempt reads the text again from line 0
    # with fresh bolts, and nothing the first attempt counted survives it.  The killed worker's
    # "executor" is gone too (the run counts a slot fewer) until the test gives it back: the
    # restart waits for it, says so, and submits nothing meanwhile.  Nobody asks the run
    # anything while it recovers: its own supervisor does it.
    slots = SlotCount(SLOTS)
    monkeypatch.setattr(spark_topology, "task_slots", slots)
    lines = 1500
    topology = sherlock_topology(lines=lines, rate=400)  # ~4 s per attempt: killed mid-run
    expected = word_counts(lines)
    run = run_on_spark(topology, spark=spark, workers=SLOTS, capture=True, max_attempts=3)
    with run:

        def acked() -> int:
            return run.statistics()["lines"].acked

        wait_for(lambda: acked() >= 200, timeout=60, what="200 lines acked")
        victim = run.worker_pids[1]
        assert acked() < lines  # killed mid-run
        slots.slots = SLOTS - 1
        os.kill(victim, signal.SIGKILL)
        wait_for(
            lambda: run.attempt == 2 and run.phase is Phase.WAITING_FOR_SLOTS,
            timeout=60,
            what="the restart to wait for slots",
        )
        counted = slots.calls
        wait_for(lambda: slots.calls >= counted + 3, timeout=30, what="three more counts")
        assert run.phase is Phase.WAITING_FOR_SLOTS and len(run._groups) == 1  # nothing submitted
        assert (
            f"topology 'sherlock-top-words' needs {SLOTS} Spark task slots at once (one "
            f"barrier task per worker) but Spark master 'local[{SLOTS}]' has {SLOTS - 1}: "
            in caplog.text
        )
        assert "; waiting for them, up to 120 s (start_timeout)" in caplog.text
        slots.slots = SLOTS
        result = run_to_completion(run, timeout=150)
    assert run.attempt == 2 and len(run.restarts) == 1 and len(run._groups) == 2
    assert run.restarts[0].startswith("attempt 1: ") and "crashed" in run.restarts[0]
    assert victim not in run.worker_pids
    assert result.errors == []
    assert final_counts(result.emitted("count")) == expected
    assert sorted(map(tuple, result.emitted("count"))) == occurrences(expected)
    assert result.statistics["lines"].acked == lines  # the second attempt's own statistics


def test_a_checkpointed_topology_needs_a_checkpoint_location_every_executor_reaches(spark):
    with pytest.raises(TopologyError, match=r"Config\(checkpoint_dir=\.\.\.\), a directory"):
        run_on_spark(stateful_word_count(), spark=spark)


@pytest.mark.timeout(240)
def test_a_checkpointed_topology_whose_task_fails_rolls_back_to_its_last_checkpoint(
    spark, tmp_path
):
    # The task's own failure (not a lost process): the worker reports it, the run ends the
    # attempt and starts the next from the last complete checkpoint, whose counts, with what
    # came after it counted again, are exact.  The failure stays in errors().
    word = f"s{len(STATEFUL_SENTENCES) // 2}"
    count = partial(FailingCount, word, once=str(tmp_path / "failed"))
    topology = stateful_word_count(count=count, checkpoint_dir=str(tmp_path / "checkpoints"))
    with run_on_spark(topology, spark=spark) as run:
        run.wait_until_done(120)
        run.checkpoint()
        assert counted(str(tmp_path / "checkpoints")) == STATEFUL_EXPECTED
        assert run.attempt == 2 and len(run.restarts) == 1
        assert f"failing on {word!r}" in run.restarts[0]
        assert any(f"failing on {word!r}" in e.error for e in run.errors())


@pytest.mark.timeout(240)
def test_a_worker_that_dies_every_time_ends_in_one_clear_error(spark):
    topology = (
        Topology("doomed")
        .spout("counter", Counter)
        .bolt("kill", KillOwnProcess, inputs={"counter": shuffle()})
    )
    began = time.monotonic()
    with (
        pytest.raises(WorkerProcessError) as failure,
        run_on_spark(topology, spark=spark, workers=2, max_attempts=2) as run,
    ):
        run.wait_until_done(timeout=150)
    message = str(failure.value)
    assert (
        "'doomed' on Spark lost a worker in each of its last 2 attempt(s), none of which "
        "completed a checkpoint (max_attempts=2)"
    ) in message
    # each attempt's whole cause, its lines indented under it
    for attempt in (1, 2):
        assert re.search(rf"^attempt {attempt}: .*(\n    .*)*crashed", message, re.M), message
    assert time.monotonic() - began < 150
    # the session is still usable: the next test runs on it


@pytest.mark.timeout(180)
def test_stop_from_the_driver_lets_workers_flush_and_ends_the_job(spark, tmp_path):
    topology = (
        Topology("endless")
        .spout("counter", Counter, parallelism=2)
        .bolt(
            "report",
            partial(CountThenReport, str(tmp_path)),
            parallelism=3,
            inputs={"counter": all_()},
        )
    )
    run = run_on_spark(topology, spark=spark, workers=SLOTS)
    wait_for(lambda: run.statistics()["report"].processed > 3000, timeout=60, what="tuples to flow")
    assert not run.job_finished
    run.stop()
    assert run.job_finished and run.job_error is None  # the tasks returned: not cancelled
    assert run.hung_threads == [] and left_behind(run) == []
    reports = sorted(p.read_text() for p in tmp_path.iterdir())
    tasks = topology.build().components["report"].tasks
    assert [int(r.split()[0]) for r in reports] == list(tasks)
    flushed = sum(int(r.split()[1]) for r in reports)
    assert flushed == run.statistics()["report"].processed > 3000  # the final reports


@pytest.mark.timeout(120)
def test_a_run_dropped_without_stop_cancels_its_job(spark):
    topology = (
        Topology("dropped").spout("counter", Counter).bolt("sink", Sink, inputs={"counter": all_()})
    )
    # The workers would give up on a silent driver after driver_timeout; here they may not
    # before the test ends, so only cancelling the job can end it in time.
    run = run_on_spark(topology, spark=spark, workers=2, driver_timeout=300)
    job = run._job
    del run
    gc.collect()
    assert job.finished.wait(60)  # its tasks do not serve a run nobody holds
    assert "cancel" in str(job.error).lower()
    assert "dropped" not in [e.name for e in registry.running()]  # (nor is it listed)


@pytest.mark.timeout(180)
def test_the_demo_prints_the_top_words_of_the_text(spark):
    out = io.StringIO()
    lines, top = 1200, 8
    ranking = run_demo(spark=spark, workers=SLOTS, lines=lines, top=top, out=out)
    assert ranking == top_words(word_counts(lines), top)
    plain = collections.Counter(  # the same, counted independently of the demo's module
        w for line in book_lines(lines) for w in re.findall(r"[a-z]+(?:'[a-z]+)*", line.lower())
    )
    assert ranking == sorted(plain.items(), key=lambda wc: (-wc[1], wc[0]))[:top]
    text = out.getvalue()
    assert re.search(r"\d+/1,200 lines", text)  # a progress line
    assert f"Top {top} words of The Adventures of Sherlock Holmes (1,200 lines" in text
    assert "Equal to a plain collections.Counter over the same text." in text
    for i, (word, count) in enumerate(ranking, 1):
        assert re.search(rf"^ +{i}\. {word} +{count:,}$", text, re.M)


def test_the_demo_top_bolt_first_reports_an_interval_after_its_first_tuple(monkeypatch):
    """A report sent with the first tuple ranked one word counted once ("top: him 1") beside
    the thousands of words the display said were counted."""
    clock = [100.0]
    monkeypatch.setattr(demo, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    bolt = demo.TopWords(n=2, interval=0.2)
    bolt.prepare(Config(), None)
    reports = []
    monkeypatch.setattr(bolt, "_publish", lambda final: reports.append(top_words(bolt.counts, 2)))

    def count(word, n, at):
        clock[0] = at
        bolt.process(SimpleNamespace(values=(word, n)))

    count("him", 1, 100.0)  # long after prepare (Spark starting): still too early to report
    count("the", 1, 100.1)
    count("the", 2, 100.19)
    assert reports == []
    count("him", 2, 100.25)  # an interval after the first tuple
    assert reports == [[("him", 2), ("the", 2)]]
    count("a", 1, 100.3)
    assert len(reports) == 1
    count("a", 2, 100.5)
    assert len(reports) == 2
    # the display, until the first report arrives
    out = io.StringIO()
    demo.Display(out, total=10, top=2).show(1, 230, 1, [])
    assert out.getvalue().endswith(" words counted, 0 words/s; top: (none yet)\n")


@pytest.mark.timeout(240)
def test_ctrl_c_stops_the_demo_and_leaves_nothing_running(tmp_path):
    driver = subprocess.Popen(
        [sys.executable, "-m", "brokerless.spark.demo", "--workers", "2", "--rate", "50"],
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr").open("w"),
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    try:
        output = []
        for line in driver.stdout:  # until the first progress line: the topology runs
            output.append(line)
            if " lines (" in line:
                break
        assert any(" lines (" in line for line in output), output
        spawned = descendants(driver.pid)  # Spark's JVM, its Python daemon and workers
        assert spawned
        driver.send_signal(signal.SIGINT)
        rest, _ = driver.communicate(timeout=60)
        assert driver.returncode == 130, rest
        assert "interrupted: the topology was stopped" in rest
        wait_for(lambda: all(gone(p) for p in spawned), timeout=60, what="Spark's processes to end")
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
