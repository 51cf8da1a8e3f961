"""``brokerless stream ps|activate|deactivate|rebalance|kill``: Storm's ``storm list``,
``activate``, ``deactivate``, ``rebalance`` and ``kill`` for the topologies that ``brokerless
stream run`` and ``stream ui`` run, and those started from Python (``stream/registration.py``),
found by name in the registry (``stream/registry.py``) and told over their control server (the
topology UI's HTTP server, on 127.0.0.1: ``stream/ui/server.py``).

``ps`` is ``storm list`` (``stream list`` already lists the topologies a module defines): one
line per running topology with its status -- active, inactive, rebalancing, killed (stopping
after a kill's wait) -- mode, workers (as they are now: a rebalance changes them), uptime and
pid.  ``rebalance NAME [-w SECS] [-n WORKERS] [-e COMPONENT=N ...]`` is Storm's: checked at
once (a bad argument is an error and nothing changes), then the run deactivates its spouts,
waits up to SECS (default: its ``message_timeout_secs``) for the tuples in flight, and starts
its new layout (``TopologyRun.rebalance``); the command returns at once, as ``storm
rebalance`` does.  ``kill NAME -w SECS`` deactivates the spouts at once; the run stops SECS
later (default: its ``message_timeout_secs``), so that the tuples in flight can finish, and
prints its report as at any other end, with status 0.  ``kill`` returns at once, as ``storm
kill`` does.  A name that is not running is an error listing those that are.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlencode

import click
from click.shell_completion import CompletionItem

from brokerless.stream.registry import Entry, RegistryError, find, running

_TIMEOUT = 10.0  # seconds to wait for a run's control server to answer


def _running() -> list[Entry]:
    try:
        return running()
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from None


def _complete_name(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    try:
        entries = running()
    except RegistryError:
        return []
    return [CompletionItem(e.name) for e in entries if e.name.startswith(incomplete)]


NAME_ARGUMENT = click.argument("name", shell_complete=_complete_name)


def entry_named(name: str) -> Entry:
    """The run named ``name``: an error listing the running ones if there is none."""
    try:
        entry = find(name)
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from None
    if entry is not None and entry.url is not None:
        return entry
    if entry is not None:
        raise click.ClickException(f"topology {name!r} is starting: try again in a moment")
    names = ", ".join(e.name for e in _running()) or "none"
    raise click.ClickException(f"no topology named {name!r} is running (running: {names})")


def ask(entry: Entry, path: str, post: bool = False) -> dict[str, Any]:
    """The JSON answer of ``entry``'s control server to a GET (or a POST) of ``path``."""
    from brokerless.stream.ui.server import ACTION_HEADER  # (http.server: only when used)

    assert entry.url is not None
    request = urllib.request.Request(
        entry.url + path,
        method="POST" if post else "GET",
        headers={ACTION_HEADER: "1"} if post else {},
    )
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT) as answer:
            said: dict[str, Any] = json.load(answer)
            return said
    except urllib.error.HTTPError as exc:  # 409: it has stopped, 400: refused (it says why)
        try:
            why = str(json.load(exc)["error"])
        except (ValueError, KeyError, TypeError, OSError):  # not the server's own refusal
            why = str(exc.reason)
        raise click.ClickException(why) from None
    except OSError as exc:  # (URLError is one) it is ending, or stuck
        raise click.ClickException(
            f"topology {entry.name!r} (pid {entry.pid}) does not answer at {entry.url}: "
            f"{getattr(exc, 'reason', exc)}"
        ) from None


def _status(entry: Entry) -> tuple[str, int]:
    """The status of ``entry``'s run and its workers now (a rebalance changes them)."""
    if entry.url is None:
        return "starting", entry.workers
    try:
        said = ask(entry, "api/status")
    except click.ClickException:
        return "unreachable", entry.workers
    return str(said["status"]), int(said.get("workers", entry.workers))


def _uptime(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


@click.command(
    epilog="""\b
Examples:
  brokerless stream ps
  brokerless stream ps | grep inactive"""
)
def ps() -> None:
    """Show the topologies running (by `stream run`, `stream ui`, or a program's run_local,
    run_multiprocess or run_on_spark), as `storm list` does: name, status, mode, workers,
    uptime and pid."""
    entries = _running()
    if not entries:
        click.echo("No topologies running.")
        return
    rows = [("NAME", "STATUS", "MODE", "WORKERS", "UPTIME", "PID")]
    now = time.time()
    for e in entries:
        status, workers = _status(e)
        rows.append((e.name, status, e.mode, str(workers), _uptime(now - e.started), str(e.pid)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        click.echo("  ".join(cells).rstrip())


@click.command(
    epilog="""\b
Examples:
  brokerless stream deactivate word-count
  brokerless stream activate word-count"""
)
@NAME_ARGUMENT
def deactivate(name: str) -> None:
    """Stop the spouts of the running topology NAME emitting, as `storm deactivate` does (the
    tuples in flight are still processed)."""
    ask(entry_named(name), "api/deactivate", post=True)
    click.echo(f"deactivated topology {name!r}")


@click.command(
    epilog="""\b
Examples:
  brokerless stream activate word-count"""
)
@NAME_ARGUMENT
def activate(name: str) -> None:
    """Let the spouts of the running topology NAME emit again, as `storm activate` does."""
    ask(entry_named(name), "api/activate", post=True)
    click.echo(f"activated topology {name!r}")


@click.command(
    epilog="""\b
Examples:
  brokerless stream kill word-count            # stops after its message timeout
  brokerless stream kill word-count -w 0       # stops now"""
)
@NAME_ARGUMENT
@click.option(
    "-w",
    "--wait",
    type=click.FloatRange(min=0),
    help="Seconds between deactivating the spouts and stopping, for the tuples in flight to "
    "finish (default: the topology's message_timeout_secs).",
)
def kill(name: str, wait: float | None) -> None:
    """Kill the running topology NAME, as `storm kill` does: deactivate its spouts now, stop
    it after --wait seconds.  The run then prints its report and exits with status 0."""
    entry = entry_named(name)
    said = ask(entry, "api/kill" if wait is None else f"api/kill?wait={wait}", post=True)
    click.echo(
        f"killed topology {name!r}: its spouts are deactivated; it stops in "
        f"{said['wait_s']:g} s (pid {entry.pid})"
    )


def _executors(ctx: click.Context, param: click.Parameter, given: tuple[str, ...]) -> list[str]:
    """``-e COMPONENT=N`` options, checked for their form (the run checks the rest)."""
    for option in given:
        component, _, count = option.rpartition("=")
        if not component or not count.isdigit():
            raise click.BadParameter(f"{option!r}: give COMPONENT=N, N the number of executors")
    return list(given)


@click.command(
    epilog="""\b
Examples:
  brokerless stream rebalance word-count -n 3                 # on 3 workers
  brokerless stream rebalance word-count -e count=4 -w 10     # 'count' on 4 executors
  brokerless stream rebalance word-count -n 2 -e split=1 -e count=2"""
)
@NAME_ARGUMENT
@click.option(
    "-w",
    "--wait",
    type=click.FloatRange(min=0),
    help="Seconds at most between deactivating the spouts and the new layout, for the tuples "
    "in flight to finish (default: the topology's message_timeout_secs; less once none is).",
)
@click.option(
    "-n",
    "--num-workers",
    "workers",
    type=click.IntRange(min=1),
    help="The workers to run on.",
)
@click.option(
    "-e",
    "--executors",
    multiple=True,
    metavar="COMPONENT=N",
    callback=_executors,
    help="Run COMPONENT on N executors (at most its tasks, which never change); repeatable.",
)
def rebalance(name: str, wait: float | None, workers: int | None, executors: list[str]) -> None:
    """Rebalance the running topology NAME, as `storm rebalance` does: deactivate its spouts,
    wait for the tuples in flight, stop its workers and start them in the new layout -- a
    checkpointed topology from a checkpoint taken then, so its state stays exact -- then
    activate them again.  Returns at once; `stream ps` shows it rebalancing, then the new
    number of workers."""
    if workers is None and not executors:
        raise click.UsageError("give the new layout: -n WORKERS and/or -e COMPONENT=N")
    query = [("executors", e) for e in executors]
    if workers is not None:
        query.append(("workers", str(workers)))
    if wait is not None:
        query.append(("wait", f"{wait:g}"))
    entry = entry_named(name)
    said = ask(entry, f"api/rebalance?{urlencode(query)}", post=True)
    click.echo(
        f"rebalancing topology {name!r}: {said['rebalancing']}; its spouts are deactivated for "
        f"up to {said['wait_s']:g} s while the tuples in flight finish (pid {entry.pid})"
    )


COMMANDS = [ps, activate, deactivate, rebalance, kill]
