"""The registry of running topologies (``registry.py``): one name, one run, however many
processes claim it at once."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from dataclasses import asdict
from typing import Any

import pytest

from brokerless.cli import registry

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
