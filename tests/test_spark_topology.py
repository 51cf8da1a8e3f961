"""Topologies on Spark (``brokerless.spark.run_on_spark``): the same results as local mode, a
lost worker restarts the topology with exact counts, too few slots and attempts that run out
say so at once, stop and Ctrl-C end everything, and the demo runs end to end.

One local Spark session (``local[3]``) serves the whole module; the demo's Ctrl-C test starts
its own, in the driver process it interrupts.
"""

from __future__ import annotations

import collections
import gc
import io
import os
import re
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from brokerless.spark import complete_on_spark, run_on_spark, session_builder, task_slots
from brokerless.spark.demo import book_lines, run_demo, sherlock_topology, top_words, word_counts
from brokerless.stream import Topology, TopologyError, WorkerProcessError, all_, shuffle
from brokerless.stream.examples import final_counts
from brokerless.stream.testing import complete_topology, run_to_completion

from .processes import descendants, gone
from .spark_topologies import CountThenReport, KillOwnProcess
from .stream_topologies import Counter, Sink, Source, wait_for

ROOT = Path(__file__).resolve().parent.parent
SLOTS = 3


@pytest.fixture(scope="module")
def spark():
    with pytest.MonkeyPatch.context() as env:  # PySpark reads the workers' Python from here
        env.setenv("PYSPARK_PYTHON", sys.executable)
        session = (session_builder(f"local[{SLOTS}]", "brokerless-spark-topology")
                   .config("spark.ui.enabled", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def left_behind(run) -> list[str]:
    """Threads of ours that a worker's (reused) Python process had before its task began."""
    return [name for info in run.worker_info for name in info["threads_before"]
            if name.startswith("brokerless") or ":" in name]


def occurrences(counts: collections.Counter) -> list[tuple[str, int]]:
    """Every ``[word, running count]`` a count bolt emits when it sees each word once."""
    return sorted((word, k) for word, n in counts.items() for k in range(1, n + 1))


@pytest.mark.timeout(60)
def test_too_few_slots_is_reported_at_once(spark):
    assert task_slots(spark.sparkContext) == SLOTS
    began = time.monotonic()
    with pytest.raises(TopologyError, match=rf"needs {SLOTS + 1} Spark task slots .* has "
                                            rf"{SLOTS}: ask for fewer workers"):
        run_on_spark(sherlock_topology(lines=10), spark=spark, workers=SLOTS + 1)
    assert time.monotonic() - began < 10  # Spark's own check would retry for minutes


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
    assert sorted(map(tuple, result.emitted("split"))) == sorted(
        map(tuple, local.emitted("split")))
    stats = result.statistics
    assert stats["lines"].acked == lines and stats["count"].processed == sum(expected.values())
    assert [w.worker for w in stats.workers] == [0, 1, 2]
    assert sum(w.sent for w in stats.workers) == sum(w.received for w in stats.workers) > 0
    assert run.attempt == 1 and run.restarts == [] and run.job_error is None
    assert len(set(run.worker_pids)) == SLOTS and left_behind(run) == []


@pytest.mark.timeout(180)
def test_complete_on_spark_with_mocked_sources(spark):
    topology = (Topology("mocked").spout("values", Source)
                .bolt("sink", Sink, parallelism=2, inputs={"values": shuffle()}))
    result = complete_on_spark(topology, {"values": [[i] for i in range(50)]}, spark=spark,
                               workers=2, timeout=120)
    assert sorted(v for (v,) in result.emitted("values")) == list(range(50))
    assert result.statistics["values"].acked == 50


@pytest.mark.timeout(240)
def test_a_killed_worker_restarts_the_topology_and_the_counts_stay_exact(spark):
    # Recovery is replay from the start: the second attempt reads the text again from line 0
    # with fresh bolts, and nothing the first attempt counted survives it.
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
        os.kill(victim, signal.SIGKILL)
        result = run_to_completion(run, timeout=150)
    assert run.attempt == 2 and len(run.restarts) == 1
    assert run.restarts[0].startswith("attempt 1: ") and "crashed" in run.restarts[0]
    assert victim not in run.worker_pids
    assert result.errors == []
    assert final_counts(result.emitted("count")) == expected
    assert sorted(map(tuple, result.emitted("count"))) == occurrences(expected)
    assert result.statistics["lines"].acked == lines  # the second attempt's own statistics


@pytest.mark.timeout(240)
def test_a_worker_that_dies_every_time_ends_in_one_clear_error(spark):
    topology = (Topology("doomed").spout("counter", Counter)
                .bolt("kill", KillOwnProcess, inputs={"counter": shuffle()}))
    began = time.monotonic()
    with (pytest.raises(WorkerProcessError) as failure,
          run_on_spark(topology, spark=spark, workers=2, max_attempts=2) as run):
        run.wait_until_done(timeout=150)
    message = str(failure.value)
    assert "'doomed' on Spark lost a worker in each of its 2 attempt(s) (max_attempts=2)" \
        in message
    assert re.search(r"^attempt 1: .*crashed", message, re.M)
    assert re.search(r"^attempt 2: .*crashed", message, re.M)
    assert time.monotonic() - began < 150
    # the session is still usable: the next test runs on it


@pytest.mark.timeout(180)
def test_stop_from_the_driver_lets_workers_flush_and_ends_the_job(spark, tmp_path):
    topology = (Topology("endless").spout("counter", Counter, parallelism=2)
                .bolt("report", partial(CountThenReport, str(tmp_path)), parallelism=3,
                      inputs={"counter": all_()}))
    run = run_on_spark(topology, spark=spark, workers=SLOTS)
    wait_for(lambda: run.statistics()["report"].processed > 3000, timeout=60,
             what="tuples to flow")
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
    topology = (Topology("dropped").spout("counter", Counter)
                .bolt("sink", Sink, inputs={"counter": all_()}))
    # The workers would give up on a silent driver after driver_timeout; here they may not
    # before the test ends, so only cancelling the job can end it in time.
    run = run_on_spark(topology, spark=spark, workers=2, driver_timeout=300)
    job = run._job
    del run
    gc.collect()
    assert job.finished.wait(60)  # its tasks do not serve a run nobody holds
    assert "cancel" in str(job.error).lower()


@pytest.mark.timeout(180)
def test_the_demo_prints_the_top_words_of_the_text(spark):
    out = io.StringIO()
    lines, top = 1200, 8
    ranking = run_demo(spark=spark, workers=SLOTS, lines=lines, top=top, out=out)
    assert ranking == top_words(word_counts(lines), top)
    plain = collections.Counter(  # the same, counted independently of the demo's module
        w for line in book_lines(lines) for w in re.findall(r"[a-z]+(?:'[a-z]+)*", line.lower()))
    assert ranking == sorted(plain.items(), key=lambda wc: (-wc[1], wc[0]))[:top]
    text = out.getvalue()
    assert re.search(r"\d+/1,200 lines", text)  # a progress line
    assert f"Top {top} words of The Adventures of Sherlock Holmes (1,200 lines" in text
    assert "Equal to a plain collections.Counter over the same text." in text
    for i, (word, count) in enumerate(ranking, 1):
        assert re.search(rf"^ +{i}\. {word} +{count:,}$", text, re.M)


@pytest.mark.timeout(240)
def test_ctrl_c_stops_the_demo_and_leaves_nothing_running(tmp_path):
    driver = subprocess.Popen(
        [sys.executable, "-m", "brokerless.spark.demo", "--workers", "2", "--rate", "50"],
        stdout=subprocess.PIPE, stderr=(tmp_path / "stderr").open("w"), text=True, cwd=ROOT,
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
        wait_for(lambda: all(gone(p) for p in spawned), timeout=60,
                 what="Spark's processes to end")
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
