"""Multi-process mode: worker processes over ipc and tcp give local mode's results, start from
one call or one command, and never outlive their driver."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from functools import partial
from pathlib import Path

import pytest

from brokerless.stream import (
    Config,
    Topology,
    TopologyError,
    all_,
    complete_topology,
    fields,
    shuffle,
)
from brokerless.stream.examples import SENTENCES, final_counts, word_count_topology
from brokerless.stream.multiprocess import MultiprocessRun, WorkerProcessError, run_multiprocess

from .processes import child_pids, gone
from .stream_topologies import Counter, GatedValueSpout, Recorder, ValueSpout, wait_for

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = collections.Counter(w for s in SENTENCES for w in s.split())


@pytest.fixture(autouse=True)
def no_processes_left_behind():
    before = child_pids()
    yield
    assert child_pids() - before == set()


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_word_count_in_three_processes_equals_a_plain_count(transport):
    # count is split over 4 tasks in 3 processes: a word whose tuples reached two different
    # tasks (e.g. a hash that differs between processes) would be counted twice, in halves
    result = complete_topology(word_count_topology(), mode="multiprocess", workers=3,
                               transport=transport, timeout=60)
    assert result.errors == []
    assert final_counts(result.emitted("count")) == EXPECTED
    local = complete_topology(word_count_topology(), timeout=30)
    assert sorted(map(tuple, result.emitted("split"))) == sorted(
        map(tuple, local.emitted("split")))
    stats = result.statistics
    assert stats["sentences"].acked == len(SENTENCES)
    assert [w.worker for w in stats.workers] == [0, 1, 2]
    assert sum(w.sent for w in stats.workers) == sum(w.received for w in stats.workers) > 0


def test_acking_and_replay_across_processes():
    from .stream_topologies import FailEveryThirdOnce, Fanout

    topo = (
        Topology("replay")
        .spout("spout", partial(ValueSpout, range(20)), parallelism=2)
        .bolt("fanout", Fanout, parallelism=2, inputs={"spout": all_()})
        .bolt("flaky", FailEveryThirdOnce, parallelism=2,
              inputs={"fanout": fields("value", "child")})
        .bolt("after", Recorder, inputs={"flaky": all_()})
    )
    result = complete_topology(topo, mode="multiprocess", workers=2, timeout=60)
    acked = [m for m, _ in result.emitted("spout", "acked")]
    failed = [m for (m,) in result.emitted("spout", "failed")]
    assert sorted(acked) == list(range(20)) and failed and set(failed) <= set(acked)
    assert {tuple(v) for (v,) in result.emitted("flaky")} == {
        (v, c) for v in range(20) for c in range(3)}


def test_the_command_line_runs_word_count_in_worker_processes():
    out = subprocess.run(
        [sys.executable, "-m", "brokerless.stream", "run",
         "brokerless.stream.examples:word_count", "--workers", "2", "--emitted", "count"],
        capture_output=True, text=True, timeout=100, check=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    report = json.loads(out.stdout)
    assert report["mode"] == "multiprocess/ipc" and report["workers"] == 2
    assert report["errors"] == [] and not report["interrupted"]
    assert final_counts(report["emitted"]["count"]) == EXPECTED
    assert report["statistics"]["components"]["sentences"]["acked"] == len(SENTENCES)


def test_workers_die_with_their_driver():
    driver_code = textwrap.dedent("""
        import json, sys
        from brokerless.stream import Topology, all_
        from brokerless.stream.multiprocess import run_multiprocess
        from tests.stream_topologies import Counter, Sink
        topo = (Topology("endless").spout("counter", Counter)
                .bolt("sink", Sink, inputs={"counter": all_()}))
        run = run_multiprocess(topo, workers=2)
        print(json.dumps(run.pids), flush=True)
        sys.stdin.read()  # until the test kills this process
    """)
    driver = subprocess.Popen(
        [sys.executable, "-c", driver_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    try:
        pids = json.loads(driver.stdout.readline())
        assert len(pids) == 2 and not any(gone(p) for p in pids)
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
        wait_for(lambda: all(gone(p) for p in pids), timeout=20, what="workers to exit")
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait()
        driver.stdin.close()
        driver.stdout.close()


def test_a_worker_that_dies_every_time_is_reported_after_the_last_attempt():
    topo = Topology("endless").spout("counter", Counter).bolt(
        "sink", Recorder, inputs={"counter": all_()})
    with run_multiprocess(topo, workers=2, max_attempts=1) as run:
        victim = run.processes[1]
        victim.kill()
        victim.wait(10)
        with pytest.raises(WorkerProcessError, match=rf"worker 1 .*pid {victim.pid}"):
            run.wait_until_done(timeout=30)


def test_a_run_ended_by_a_lost_worker_says_so_to_whoever_asks_while_it_stops(monkeypatch):
    """The supervisor stopped the run, then recorded why: a wait that looked in between (CI,
    under load) got "RuntimeError: ... is stopped: its workers are gone" instead of the
    WorkerProcessError.  Here the look is made from inside the stop, the moment it is done."""
    seen = []
    real_stop = MultiprocessRun.stop

    def stop_and_look(run):
        real_stop(run)
        if threading.current_thread() is not threading.main_thread() and not seen:
            try:
                run.wait_until_done(timeout=5)
            except BaseException as exc:
                seen.append(exc)

    monkeypatch.setattr(MultiprocessRun, "stop", stop_and_look)
    topo = Topology("endless").spout("counter", Counter).bolt(
        "sink", Recorder, inputs={"counter": all_()})
    with run_multiprocess(topo, workers=2, max_attempts=1) as run:
        run.processes[1].kill()
        with pytest.raises(WorkerProcessError):
            run.wait_until_done(timeout=30)
    assert len(seen) == 1 and isinstance(seen[0], WorkerProcessError), seen


def test_a_plain_topology_that_loses_a_worker_starts_its_workers_again(tmp_path):
    """As Storm's supervisor starts a lost worker again: the run goes on with a new set of
    worker processes (a plain topology's start over: its spouts open again), up to
    ``max_attempts`` in a row.  Before, the run ended with the first lost worker.  The spout
    stops at 100 tuples until the gate file exists, so the first attempt cannot finish."""
    gate = tmp_path / "gate"
    topo = Topology("plain", Config(num_workers=2)).spout(
        "values", partial(GatedValueSpout, range(3000), 100, str(gate))).bolt(
        "sink", Recorder, parallelism=2, inputs={"values": shuffle()})
    with run_multiprocess(topo, capture=True) as run:
        wait_for(lambda: run.statistics()["sink"].processed >= 100, what="the first tuples")
        victim = run.processes[1]
        victim.kill()
        gate.touch()
        run.wait_until_done(timeout=60)
        assert run.attempt == 2 and len(run.restarts) == 1
        assert f"pid {victim.pid}" in run.restarts[0]
        got = sorted(v[2][0] for c, s, v in run.captured() if (c, s) == ("sink", "default"))
    assert got == list(range(3000))  # the new attempt's, each once


def test_a_frozen_worker_is_reported_as_lost_instead_of_hanging_the_run():
    """A worker that stops answering (SIGSTOP here; a host that froze) is lost after
    worker_timeout_secs, as Storm's supervisor finds a worker whose heartbeats stopped.
    Before, the run waited for it for ever: nothing but the process's exit counted."""
    topo = Topology("endless", Config(worker_timeout_secs=4)).spout("counter", Counter).bolt(
        "sink", Recorder, inputs={"counter": all_()})
    with run_multiprocess(topo, workers=2, max_attempts=1) as run:
        victim = run.processes[1]
        os.kill(victim.pid, signal.SIGSTOP)
        try:
            with pytest.raises(WorkerProcessError, match=rf"worker 1 .*pid {victim.pid}.* 4 s"):
                run.wait_until_done(timeout=60)
        finally:
            if victim.poll() is None:  # (the run kills what it lost when it gives up)
                os.kill(victim.pid, signal.SIGCONT)


def test_a_driver_paused_longer_than_the_worker_timeout_loses_no_worker():
    """The driver's own process paused (SIGSTOP here; a laptop's lid closed): on waking it had
    not read its workers' heartbeats yet, and took them all for frozen -- a needless rollback
    here, a failed plain run.  A worker is silent only for as long as the driver listened."""
    driver_code = textwrap.dedent("""
        import sys
        from brokerless.stream import run_multiprocess
        from tests.test_stream_state import word_count
        run = run_multiprocess(word_count(worker_timeout_secs=2))
        run.checkpoint()
        print("running", flush=True)
        sys.stdin.readline()  # the test pauses this process meanwhile
        run.wait_until_done(60)
        print(run.restarts, flush=True)
        run.stop()
    """)
    driver = subprocess.Popen(
        [sys.executable, "-c", driver_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    try:
        assert driver.stdout.readline() == "running\n"
        driver.send_signal(signal.SIGSTOP)
        # workers heartbeat into a paused driver for over twice the worker timeout
        with pytest.raises(subprocess.TimeoutExpired):  # (paused, it does not end meanwhile)
            driver.wait(5)
        driver.send_signal(signal.SIGCONT)
        driver.stdin.write("go on\n")
        driver.stdin.flush()
        assert driver.stdout.readline() == "[]\n"  # no restart
        assert driver.wait(30) == 0
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait()
        driver.stdin.close()
        driver.stdout.close()


def test_a_worker_timeout_under_two_seconds_is_refused():
    with pytest.raises(TopologyError, match="worker_timeout_secs must be a number >= 2"):
        Topology("t", Config(worker_timeout_secs=1)).spout("counter", Counter).build()


def test_a_topology_that_cannot_be_sent_to_processes_is_refused_before_starting():
    topo = Topology("lambda").spout("counter", lambda: Counter()).bolt(
        "sink", Recorder, inputs={"counter": all_()})
    with pytest.raises(TopologyError, match="no lambdas"):
        run_multiprocess(topo, workers=2)
