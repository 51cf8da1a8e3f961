"""Error reports keep each task's latest, as Storm UI shows a component's latest errors, and
count them all (``stream/errorlog.py``): in a worker, in what it ships to a driver, in
``errors()`` of every mode, across a lost attempt; and a bolt that raises on every tuple does
not flood the log."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from brokerless.stream import Bolt, Config, Topology, all_, run_local, run_multiprocess
from brokerless.stream.control import AttemptState
from brokerless.stream.errorlog import (
    KEEP,
    LOG_INTERVAL,
    LOG_PER_INTERVAL,
    MAX_ERROR,
    MAX_TRACEBACK,
    ErrorLog,
    ErrorReport,
)
from brokerless.stream.local import LocalRun
from brokerless.stream.run import TopologyRun

from .stream_topologies import (
    Counter,
    GatedValueSpout,
    RaiseAlways,
    RaiseHuge,
    RaiseOn,
    ValueSpout,
    wait_for,
)

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent
N = 300  # tuples each raising task gets: many more than it keeps


def raising(n: int = N, tasks: int = 1, workers: int = 1) -> Topology:
    """A spout of 0..n-1 whose every tuple goes to each of ``tasks`` tasks that raise."""
    return (
        Topology("raising", Config(num_workers=workers))
        .spout("values", partial(ValueSpout, range(n), False))
        .bolt("raise", RaiseAlways, parallelism=tasks, inputs={"values": all_()})
    )


def assert_latest_kept(errors: list[ErrorReport], tasks: list[int], n: int = N) -> None:
    """Each raising task's reports are its latest ``KEEP`` (of n), oldest first."""
    for task in tasks:
        said = [e.error for e in errors if (e.component, e.task) == ("raise", task)]
        assert said == [f"ValueError('cannot handle {v}')" for v in range(n - KEEP, n)]


def test_a_local_run_keeps_the_latest_errors_of_each_task_and_counts_them_all():
    """Before, each worker kept its first 1,000 reports: a bolt raising on every tuple for an
    hour showed the errors of its first second."""
    with run_local(raising()) as run:
        run.wait_until_done(60)
        errors = run.errors()
        assert run.statistics()["raise"].errors == N
    assert_latest_kept(errors, run.plan.component_tasks["raise"])
    assert len(errors) == KEEP and errors.total == N
    assert "Traceback (most recent call last)" in errors[-1].traceback


def test_a_multiprocess_run_keeps_the_latest_errors_of_each_task_and_counts_them_all():
    """The workers ship what they keep since the last report shipped; the driver counts the
    ones they dropped (the gap in the numbers) and keeps each task's latest."""
    with run_multiprocess(raising(tasks=2, workers=2)) as run:
        run.wait_until_done(60)
        errors = run.errors()
        pids = run.pids
    assert_latest_kept(errors, run.plan.component_tasks["raise"])
    assert len(errors) == 2 * KEEP and errors.total == 2 * N
    # where each was raised, as Storm UI shows an error's host: its worker process, its host
    assert {(e.worker, e.pid) for e in errors} == {(0, pids[0]), (1, pids[1])}
    assert {e.host for e in errors} == {socket.gethostname()}


def test_an_error_with_a_huge_message_is_reported_clipped_and_the_worker_goes_on():
    """A report larger than a control message made the worker fail ("a control message of
    10486260 bytes is larger than the control channel carries"), and the run with it."""
    topology = (
        Topology("huge", Config(num_workers=2))
        .spout("values", partial(ValueSpout, range(3), False))
        .bolt("raise", RaiseHuge, parallelism=2, inputs={"values": all_()})
    )
    with run_multiprocess(topology) as run:
        run.wait_until_done(60)
        errors = run.errors()
    assert errors.total == len(errors) == 6
    for error in errors:
        assert error.error.startswith("ValueError('cannot handle ")
        assert "characters cut" in error.error and len(error.error) < MAX_ERROR + 100
        assert len(error.traceback) < MAX_TRACEBACK + 100
        assert 'raise ValueError(f"cannot handle {tup[0]!r}: "' in error.traceback


class BrokenRepr(Exception):
    def __repr__(self) -> str:
        raise RuntimeError("repr broke")

    def __str__(self) -> str:
        raise RuntimeError("str broke")


class RaiseBrokenRepr(Bolt):
    def process(self, tup: Any) -> None:
        raise BrokenRepr()


def test_an_error_whose_repr_raises_is_reported_and_its_tuple_failed():
    """Making the report raised in the executor: it dropped the tuple without failing it
    ("executor 1 of 'raise' dropped an item it could not handle"; failed stayed 0), and the
    report was lost."""
    topology = (
        Topology("broken-repr")
        .spout("values", partial(ValueSpout, range(3), False))
        .bolt("raise", RaiseBrokenRepr, inputs={"values": all_()})
    )
    with run_local(topology) as run:
        run.wait_until_done(30)
        errors = run.errors()
        assert run.statistics()["raise"].failed == 3
    assert [e.error for e in errors] == ["BrokenRepr(<repr() failed>)"] * 3
    assert errors[0].traceback.endswith("BrokenRepr: <exception str() failed>\n")


def test_a_worker_ships_only_what_it_kept_and_the_driver_counts_the_rest():
    """The sequence logic: a worker's log numbers every report and keeps each task's latest;
    shipping "since" a number skips what was dropped; the driver counts the gap."""
    worker = ErrorLog()
    for i in range(25):
        worker.add(ErrorReport("bolt", 1, 0, f"e{i}", ""))
    worker.add(ErrorReport("bolt", 2, 0, "other task", ""))
    first = worker.since(0)
    assert [n for n, _ in first] == [*range(15, 25), 25]  # task 1's latest 10, then task 2's
    for i in range(25, 40):
        worker.add(ErrorReport("bolt", 1, 0, f"e{i}", ""))
    second = worker.since(first[-1][0] + 1)
    assert [r.error for _, r in second] == [f"e{i}" for i in range(30, 40)]
    assert worker.total == 41

    state = AttemptState()
    state.take_events(0, 1, [], second)  # early: waits for message 0
    assert state.errors.total == 0
    state.take_events(0, 0, [], first)
    state.take_events(0, 0, [], first)  # a repeat (said again on a new connection)
    assert state.errors.total == worker.total
    assert [r.error for r in state.errors.reports() if r.task == 1] == [
        f"e{i}" for i in range(30, 40)
    ]


def kill_one(run: TopologyRun) -> None:
    """Lose worker 1: local mode's simulation, or its process killed."""
    if isinstance(run, LocalRun):
        run.kill_worker(1)
    else:
        os.kill(run.worker_pids[1], signal.SIGKILL)


@pytest.mark.parametrize("start", [run_local, run_multiprocess])
def test_a_run_keeps_the_errors_of_an_attempt_it_lost(start, tmp_path):
    """As Storm keeps a component's errors when its worker restarts: a plain topology's new
    attempt starts over, and the reports of the lost attempt's errors stay beside the new
    one's (before, a plain run dropped them)."""
    gate = tmp_path / "gate"  # the spout stops after "bad" until it exists
    topology = (
        Topology("lose-one", Config(num_workers=2))
        .spout("values", partial(GatedValueSpout, ["bad", *range(100)], 1, str(gate)))
        .bolt("raise", partial(RaiseOn, "bad"), parallelism=2, inputs={"values": all_()})
    )
    with start(topology) as run:
        wait_for(lambda: run.errors().total == 2, what="the first attempt's two errors")
        lost = run.errors()
        kill_one(run)
        wait_for(lambda: run.attempt == 2, what="the second attempt")
        gate.touch()
        run.wait_until_done(60)
        errors = run.errors()
    assert errors.total == 4 and errors[:2] == lost
    assert [e.error for e in errors] == ["ValueError(\"cannot handle 'bad'\")"] * 4


def most_logged(seconds: float) -> int:
    """The most errors of one component a worker logs in ``seconds`` (however slow the run)."""
    return LOG_PER_INTERVAL * (int(seconds // LOG_INTERVAL) + 1)


def test_a_bolt_raising_on_every_tuple_does_not_flood_the_log(caplog):
    """Each error was logged (on stderr when logging is not configured: 23,000 lines in 3 s
    of ``brokerless stream run``); a worker now logs at most a few per component every 10 s,
    as Storm reports at most 5 per 10 s, and says how many it left out."""
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="brokerless.stream"), run_local(raising()) as run:
        run.wait_until_done(60)
    logged = [r.getMessage() for r in caplog.records if "failed: ValueError" in r.getMessage()]
    assert 1 <= len(logged) <= most_logged(time.monotonic() - started)
    [task] = run.plan.component_tasks["raise"]
    first, traceback = logged[0].split("\n", 1)  # with its traceback, as Storm logs each
    assert first == f"raise task {task} (worker 0) failed: ValueError('cannot handle 0')"
    assert traceback.startswith("Traceback (most recent call last):")
    assert traceback.endswith("ValueError: cannot handle 0")


def test_brokerless_stream_run_does_not_print_every_error(tmp_path):
    """The command line's stderr gets a few lines, the report the latest errors and count."""
    module = tmp_path / "raisers.py"
    module.write_text(
        textwrap.dedent(
            f"""
            from tests.test_stream_errors import raising
            topology = raising({N})
            """
        )
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "brokerless.stream", "run", "raisers:topology", "--local"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "failed: ValueError" in line]
    assert 1 <= len(lines) <= most_logged(time.monotonic() - started)
    report = json.loads(done.stdout)
    errors = report["errors"]
    assert len(errors) == KEEP and errors[-1].endswith(f"ValueError('cannot handle {N - 1}')")
    assert report["errors_total"] == N


def test_a_run_not_done_in_time_says_how_many_errors_there_were_in_all():
    """The message of a run that is not done counted the reports kept (at most KEEP a
    task), not the errors there were."""
    endless = (
        Topology("raising-endless")
        .spout("values", Counter)
        .bolt("raise", RaiseAlways, inputs={"values": all_()})
    )
    with run_local(endless) as run:
        wait_for(lambda: run.errors().total > KEEP, what="more errors than are kept")
        with pytest.raises(TimeoutError) as raised:
            run.wait_until_done(0.5)
    said = re.search(r"; (\d+) error\(s\), the last: ", str(raised.value))
    assert said is not None and int(said[1]) > KEEP, str(raised.value)
