"""Exactly-once state on a live stream with a lost worker: a pyzmq PUSH sends numbered
sentences; a brokerless PULL in this process appends them to a write-ahead log; a checkpointed
word count reads the log (WALSpout) in two workers, one of which is lost mid-stream
(``kill_worker`` in local mode, SIGKILL of its process in multi-process mode and of its Python
worker on Spark).  The counts in the last checkpoint equal a ``collections.Counter`` of what
was sent (``live_input.py``).  ``test_spark_cluster.py`` loses a whole executor instead.

The default suite sends for a few seconds; ``make test-recovery`` for a minute
(``BROKERLESS_RECOVERY_SECONDS``)."""

from __future__ import annotations

import os
import signal
import sys
from functools import partial

import pytest

from brokerless.spark import run_on_spark, session_builder
from brokerless.stream import run_local, run_multiprocess

from .live_input import SECONDS, LiveInput, counted
from .processes import child_pids
from .stream_topologies import HangingCount
from .test_stream_state import EXPECTED, HANGING, said_where_it_hung, word_count

pytestmark = pytest.mark.timeout(180 + 3 * SECONDS)


@pytest.fixture(scope="module")
def spark_session():
    """A local Spark session with a task slot for each of the word count's two workers."""
    with pytest.MonkeyPatch.context() as env:  # PySpark reads the workers' Python from here
        env.setenv("PYSPARK_PYTHON", sys.executable)
        session = (
            session_builder("local[2]", "brokerless-state-recovery")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.mark.parametrize("mode", ["local", "multiprocess", "spark"])
def test_a_live_word_count_that_loses_a_worker_counts_exactly_what_was_sent(
    tmp_path, mode, request
):
    before = child_pids()
    with LiveInput(str(tmp_path)) as live:
        if mode == "spark":
            run = run_on_spark(live.topology(), spark=request.getfixturevalue("spark_session"))
        elif mode == "multiprocess":
            run = run_multiprocess(live.topology())
        else:
            run = run_local(live.topology())
        with run:
            live.send_until_half_way(run, timeout=30)
            if mode == "local":
                run.kill_worker(1)
            elif mode == "multiprocess":
                os.kill(run.pids[1], signal.SIGKILL)
            else:
                os.kill(run.worker_pids[1], signal.SIGKILL)  # the task's Python worker
            live.finish(run, timeout=60 + SECONDS)
            assert len(run.restarts) == 1
            assert run.checkpoint_statistics().restored_from >= 2  # not from the start
    live.check()
    if mode != "spark":  # Spark's own Python workers belong to its session
        assert child_pids() - before == set()


@pytest.mark.slow  # the Spark path of test_stream_state.py's hung-task rollback
def test_a_task_hung_in_process_on_spark_rolls_the_run_back(tmp_path, spark_session):
    """A stateful task hangs in ``process`` (once in all) on Spark: after more failed
    checkpoints in a row than tolerable_failed_checkpoints the run ends the attempt (its job
    cancelled, its hung Python worker with it) and the next one starts from the last complete
    checkpoint.  Before, every checkpoint timed out for ever.  (Local and multi-process mode:
    test_stream_state.py.)"""
    once = str(tmp_path / "hung")
    topology = word_count(
        count=partial(HangingCount, "cow", once=once),
        checkpoint_dir=str(tmp_path / "checkpoints"),
        **HANGING,
    )
    with run_on_spark(topology, spark=spark_session) as run:
        run.wait_until_done(120)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == EXPECTED
        [cause] = run.restarts
        assert "3 checkpoints in a row failed (tolerable_failed_checkpoints=2)" in cause
        assert "'count' task" in cause
        assert said_where_it_hung(run)
