"""The registry of running topologies (``stream/registry.py``): one name, one run, however
many processes claim it at once; and runs started from Python in it (``stream/registration.py``):
listed, controlled and killed by name as runs of ``brokerless stream run`` are."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from brokerless.stream import registry, run_local, run_multiprocess
from brokerless.stream.ui.server import ACTION_HEADER

from .stream_topologies import wait_for
from .test_cli import ENV, ROOT
from .test_cli_stream import control, endless, listed
from .test_stream_ui import act, get, refused

ACTION = {ACTION_HEADER: "1"}

ROUNDS = 400
CLAIMERS = 3


def _claim(barrier: Any, results: Any, rounds: int) -> None:
    """In a process of its own: each round, claim the name "raced" at the same instant as the
    other claimers, say whether it got it, and give it up once all have said."""
    for _ in range(rounds):
        barrier.wait(timeout=60)
        try:
            held: registry.Registration | None = registry.register("raced", "local", 1)
        except registry.NameTaken:
            held = None
        results.put(held is not None)
        barrier.wait(timeout=60)  # (all have claimed: now give it up)
        if held is not None:
            held.close()
        barrier.wait(timeout=60)  # (the next round's stale entry is in place)


@pytest.mark.timeout(120)
def test_two_runs_claiming_a_dead_runs_name_at_once_one_wins_the_other_is_refused():
    """A run killed outright (kill -9) left its entry; runs of that name start at the same
    instant: each finds the entry stale, and exactly one of them takes the name (before the
    fix, two did now and then: a few rounds in 400)."""
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    stale = registry.Entry("raced", int(dead.stdout), "local", 1, 0.0)
    path = registry.directory() / "raced.json"
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(CLAIMERS + 1)
    results = spawn.Queue()
    claimers = [
        spawn.Process(target=_claim, args=(barrier, results, ROUNDS)) for _ in range(CLAIMERS)
    ]
    for claimer in claimers:
        claimer.start()
    try:
        won = []
        for _ in range(ROUNDS):
            path.write_text(json.dumps(asdict(stale)))
            barrier.wait(timeout=60)  # go
            won.append(sum(results.get(timeout=60) for _ in claimers))
            barrier.wait(timeout=60)
            barrier.wait(timeout=60)
        assert won == [1] * ROUNDS
        assert not path.exists()
    finally:
        for claimer in claimers:
            claimer.join(timeout=60)
            claimer.kill()


def test_an_entry_closed_again_leaves_a_later_runs_entry_of_the_name():
    """A process may run a topology, stop it, and run it again under the name: closing the
    first entry once more (a stop, then the end of a ``with`` block) must not remove the
    second's.  Entries were told apart by pid alone."""
    first = registry.register("again", "local", 1)
    first.close()
    second = registry.register("again", "local", 1)
    try:
        first.close()
        assert registry.find("again") == second.entry
    finally:
        second.close()
    assert registry.find("again") is None


def test_a_forked_child_leaves_its_parents_entry():
    """A program that registered a run and then forks (a worker pool, say): the child's exit
    closes the registrations it inherited (atexit), which must not remove the parent's."""
    held = registry.register("forked", "local", 1)
    try:
        child = os.fork()
        if child == 0:  # (the child: close as its exit would, then end at once)
            held.close()
            os._exit(0)
        assert os.waitpid(child, 0)[1] == 0
        assert registry.find("forked") == held.entry
    finally:
        held.close()


# -- runs started from Python ---------------------------------------------------------------------


def python_runs() -> list[str]:
    return [e.name for e in registry.running()]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["local", "multiprocess"])
def test_a_run_started_from_python_is_listed_and_killed_by_name(mode):
    """``stream ps`` lists a run of ``run_local`` or ``run_multiprocess`` as one of ``stream
    run``, and ``stream kill`` stops it after the wait: its ``wait_until_done`` says so.  Only
    runs of ``brokerless stream run`` and ``stream ui`` were listed."""
    start = run_local if mode == "local" else partial(run_multiprocess, workers=2)
    with start(endless()) as run:
        row = wait_for(lambda: listed("endless"), timeout=60, what="ps to list the run")
        assert row == dict(row, MODE=mode, WORKERS=str(run.plan.config.num_workers))
        assert row["PID"] == str(os.getpid()) and run.registration.entry.url is not None
        assert run.ui is None  # (its control server serves no page it was not asked for)
        control("deactivate", "endless")
        assert not run.active
        control("kill", "endless", "-w", "0")
        with pytest.raises(RuntimeError, match="topology 'endless' is stopped"):
            run.wait_until_done(60)
        assert run.stopped and python_runs() == []
    assert run.registration is None and run.control_server is None


@pytest.mark.timeout(120)
def test_a_kill_stops_a_run_with_a_ui_after_its_wait_and_a_later_kill_moves_it():
    """Its UI is its control server; a kill deactivates at once and stops it after the wait,
    which a second kill replaces, as ``stream kill`` of a ``stream run``."""
    with run_local(endless(), ui=True) as run:
        assert run.registration.entry.url == run.ui.url and run.control_server is None
        assert get(run.ui.url + "api/stats")["killable"] is True  # (the page's Kill button)
        assert act(run.ui.url + "api/kill?wait=3600", **ACTION) == {"killed": True, "wait_s": 3600}
        assert not run.active and not run.stopped
        act(run.ui.url + "api/kill?wait=0", **ACTION)
        wait_for(lambda: run.stopped, timeout=30, what="the run to stop")
        assert python_runs() == []


@pytest.mark.timeout(120)
def test_a_name_taken_gives_a_default_run_the_next_free_one_and_refuses_a_given_one():
    """A program is never refused over a name it did not choose (two sessions running one
    topology at once): the second default run is NAME-2; a name given is held or refused,
    as Storm refuses a topology name already running."""
    with run_local(endless()) as first, run_local(endless()) as second:
        assert first.registration.entry.name == "endless"
        assert second.registration.entry.name == "endless-2"
        with pytest.raises(registry.NameTaken, match="'endless' is already running"):
            run_local(endless(), register="endless")
        with run_local(endless(), register="mine") as mine:
            assert sorted(python_runs()) == ["endless", "endless-2", "mine"]
            assert mine.registration.entry.name == "mine"
    assert python_runs() == []


@pytest.mark.timeout(120)
def test_a_run_with_register_false_is_not_listed_and_takes_no_kill():
    with run_local(endless(), register=False, ui=True) as run:
        assert run.registration is None and python_runs() == []
        assert refused(run.ui.url + "api/kill?wait=0", **ACTION) == (
            409,
            "topology 'endless' was started with register=False: stop it where it runs "
            "(run.stop())",
        )
    with pytest.raises(TypeError, match="register=3: pass a name to run under"):
        run_local(endless(), register=3)


EXITS_RUNNING = """
import sys
from brokerless.stream import run_local
from tests.test_cli_stream import endless
run = run_local(endless())
print(run.registration.path, flush=True)
sys.stdin.read()  # (until the test closes it: then the program ends, the run still going)
"""


@pytest.mark.timeout(120)
def test_a_program_that_ends_with_its_run_going_leaves_no_entry():
    with subprocess.Popen(
        [sys.executable, "-c", EXITS_RUNNING],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=ENV,
        cwd=ROOT,
    ) as program:
        path = Path(program.stdout.readline().decode().strip())
        assert path.exists() and "endless" in python_runs()
        program.stdin.close()
        assert program.wait(60) == 0
    assert not path.exists()
