"""``brokerless stream monitor NAME``: Storm's ``storm monitor``, a running topology's throughput
in the terminal.

Every ``--interval`` seconds (4 by default, as Storm's) it reads the run's figures from its
control server (``/api/stats``, as ``ps`` and ``kill`` find it: ``control.py``) and prints one
tab-separated line per component watched, with Storm's columns: the topology, the component, its
parallelism (executors), the time since the figures before in ms, how many tuples it emitted
(or, ``--watch transferred``, delivered to tasks) in that time, and the throughput in thousands
of tuples a second (Storm's "Kt/s": the count over the milliseconds). The time is the figures'
own (when the run took them), not the poll's, so a late answer does not skew the rate; a run
computes its figures at most every 0.5 s (``ui/server.py``), so a round that would see the
figures of the round before asks again until they are newer. Storm watches one component
(``-m``) and one stream; brokerless counts a component's tuples over all its streams, so there
is no stream column, and without ``-m`` every spout and bolt gets a line. It runs until Ctrl-C,
``--count`` rounds, or the end of the run (the last round then says so, and the status is 0).
"""

from __future__ import annotations

import time
from typing import Any

import click

from brokerless.stream.registry import find

from .control import NAME_ARGUMENT, ask, entry_named

HEADER = "topology\tcomponent\tparallelism\ttime-diff ms\t{watch}\tthroughput (Kt/s)"
_WATCHED_KINDS = ("spout", "bolt")  # (the ackers are the system's, as in Storm)
_EXIT_SECS = 10.0  # how long a run that stopped answering may take to leave the registry


def _figures(name: str) -> dict[str, Any] | None:
    """The run's figures; None if it has ended since (a run closes its control server a moment
    before it leaves the registry: a run that stays there is stuck, and that is an error)."""
    try:
        return ask(entry_named(name), "api/stats")
    except click.ClickException:
        deadline = time.monotonic() + _EXIT_SECS
        while find(name) is not None:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
        return None


def _components(stats: dict[str, Any], wanted: str | None) -> list[str]:
    shown = [c for c, s in stats["components"].items() if s["kind"] in _WATCHED_KINDS]
    if wanted is None:
        return shown
    if wanted not in shown:
        raise click.ClickException(
            f"the topology has no component {wanted!r} (its components: {', '.join(shown)})"
        )
    return [wanted]


@click.command(
    epilog="""\b
Examples:
  brokerless stream monitor word-count                 # every spout and bolt, every 4 s
  brokerless stream monitor word-count -m split -i 1
  brokerless stream monitor word-count -w transferred -n 10 > rates.tsv"""
)
@NAME_ARGUMENT
@click.option("-m", "--component", help="The component to watch (default: every spout and bolt).")
@click.option(
    "-i",
    "--interval",
    type=click.FloatRange(min=0.5),
    default=4.0,
    show_default=True,
    help="Seconds between two lines of figures (a run's figures are at most 0.5 s old).",
)
@click.option(
    "-w",
    "--watch",
    type=click.Choice(["emitted", "transferred"]),
    default="emitted",
    show_default=True,
    help="Tuples emitted, or transferred (delivered to tasks: an emit to 3 tasks counts 3).",
)
@click.option(
    "-n", "--count", type=click.IntRange(min=1), help="Stop after this many rounds of figures."
)
def monitor(
    name: str, component: str | None, interval: float, watch: str, count: int | None
) -> None:
    """Print the throughput of the running topology NAME every --interval seconds, as
    `storm monitor` does: a tab-separated line per component, until Ctrl-C, --count rounds or
    the end of the run."""
    before = ask(entry_named(name), "api/stats")
    watched = _components(before, component)
    click.echo(HEADER.format(watch=watch))
    start = time.monotonic()
    rounds = 0
    ended = bool(before["stopped"])
    while not ended and (count is None or rounds < count):
        rounds += 1
        time.sleep(max(0.0, start + rounds * interval - time.monotonic()))  # (Storm's cadence)
        now = _figures(name)
        while now is not None and now["time"] <= before["time"]:  # (the same figures again)
            time.sleep(0.05)
            now = _figures(name)
        if now is None:
            ended = True
            break
        elapsed_ms = round((now["time"] - before["time"]) * 1000)
        for c in watched:
            figures, earlier = now["components"][c], before["components"][c]
            delta = figures[watch] - earlier[watch]
            click.echo(
                f"{name}\t{c}\t{figures['executors']}\t{elapsed_ms}\t{delta}\t"
                f"{delta / elapsed_ms:.3f}"
            )
        before, ended = now, bool(now["stopped"])
    if ended:
        click.echo(f"topology {name!r} has stopped")
