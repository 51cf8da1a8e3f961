"""The condition a benchmark runs in: how loaded the machine is, and CPU-bound processes added
beside the benchmark on purpose (``--busy N``).

On a machine with few CPUs the ratio of two implementations depends on what else runs: a
benchmark whose two processes have the CPUs to themselves schedules differently from one that
shares them.  So a run either records the load it found, or adds a known one: ``busy(n)`` keeps
``n`` CPU-bound processes running for as long as its ``with`` block lasts (a benchmark starts
them before its first trial and stops them after its last, so every trial of either
implementation shares the CPUs with the same load).

A busy process is a pure-Python loop in a fresh interpreter, in a session of its own (Ctrl-C
at the terminal reaches the benchmark, which stops it).  Every few milliseconds it checks that
its parent is still the process that started it, so a benchmark killed outright does not leave
it spinning.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: The busy process: spin; every million iterations (a few ms) check the parent is alive.
_BUSY_LOOP = """\
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass
"""


def load_average() -> tuple[float, float, float] | None:
    """The 1-, 5- and 15-minute load averages, or None where the OS has none."""
    if not hasattr(os, "getloadavg"):
        return None
    one, five, fifteen = (round(x, 2) for x in os.getloadavg())
    return one, five, fifteen


def format_load(load: tuple[float, float, float] | None) -> str:
    return ", ".join(f"{x:.2f}" for x in load) if load is not None else "?"


def cpu_count() -> str:
    """How many CPUs there are, and which ones this process may use if not all."""
    text = f"{os.cpu_count()} CPUs"
    if hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) != os.cpu_count():
        text += f", run pinned to CPUs {sorted(os.sched_getaffinity(0))}"
    return text


def describe_busy(count: int) -> str:
    if count == 0:
        return "no load added (what else ran on the machine shows in the load average)"
    return (
        f"{count} CPU-bound process{'es' * (count > 1)} (a pure-Python loop, `--busy {count}`) "
        "running beside the benchmark from before its first trial to after its last"
    )


@dataclass
class Condition:
    """What a run's header says about the load: the added processes and the load average
    at the start (before any busy process started) and at the end (before they stopped)."""

    busy: int
    load_at_start: tuple[float, float, float] | None
    load_at_end: tuple[float, float, float] | None = None

    def lines(self) -> list[str]:
        end = f", at end {format_load(self.load_at_end)}" if self.load_at_end else ""
        return [
            f"- Condition: {describe_busy(self.busy)}",
            f"- Load average (1, 5, 15 min) at start {format_load(self.load_at_start)}{end}; "
            f"{cpu_count()}",
        ]

    def summary(self) -> str:
        """One line, for a plot's title."""
        added = (
            f"{self.busy} CPU-bound process{'es' * (self.busy > 1)} beside it"
            if self.busy
            else "no load added"
        )
        start = self.load_at_start[0] if self.load_at_start else None
        end = self.load_at_end[0] if self.load_at_end else None
        load = f"load average {start:.2f} at start" if start is not None else "load average ?"
        if end is not None:
            load += f", {end:.2f} at end"
        return f"{added}; {load}; {os.cpu_count()} CPUs"

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> Condition:
        """The condition :meth:`as_dict` saved (JSON has lists where the loads were tuples)."""
        start, end = (
            tuple(saved[key]) if saved[key] else None for key in ("load_at_start", "load_at_end")
        )
        return cls(saved["busy"], start, end)

    def as_dict(self) -> dict[str, object]:
        return {
            "busy": self.busy,
            "load_at_start": self.load_at_start,
            "load_at_end": self.load_at_end,
            "cpus": os.cpu_count(),
        }


class BusyProcessDied(RuntimeError):
    """A busy process ended before the run did: the condition did not hold throughout."""


@contextlib.contextmanager
def busy(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Keep ``count`` CPU-bound processes running while the block runs; stop them after it.

    Raises :class:`BusyProcessDied` at the end of the block if one of them ended early.
    """
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _BUSY_LOOP, str(os.getpid())],
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        yield procs
        died = [proc for proc in procs if proc.poll() is not None]
        if died:
            codes = ", ".join(str(proc.returncode) for proc in died)
            raise BusyProcessDied(
                f"{len(died)} of the {count} busy processes ended during the run "
                f"(exit status {codes}): the condition did not hold throughout"
            )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
