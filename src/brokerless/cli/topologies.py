"""``brokerless stream``: run topologies from the command line (``brokerless-stream`` and
``python -m brokerless.stream`` are the same commands).

    brokerless stream run brokerless.stream.examples:word_count --workers 3
    brokerless stream run mytopologies:pipeline --workers 2 --transport tcp --duration 30
    brokerless stream ui mytopologies:pipeline --port 8080
    brokerless stream list mytopologies
    brokerless stream ps                                  # in another shell: what runs
    brokerless stream kill word-count -w 5

``run`` starts the topology in worker processes (``--local``: in this process; ``--spark``:
as Spark tasks) and runs it until every spout is exhausted and every tuple processed -- when
all its spouts can say so (``exhausted()``) -- or for ``--duration`` seconds, or until Ctrl-C.
It prints one JSON object: the statistics, each task's latest errors and, for each ``--emitted
COMPONENT[:STREAM]``, the tuples that component emitted; with ``--ui`` it serves the live
topology UI meanwhile.  ``ui`` runs it the same way but keeps the page up after the end, until
Ctrl-C.  Both take SIGTERM (``kill``, ``timeout``) as Ctrl-C: the run stops and cleans up
(``run`` prints its report), and the status is 143.  A run that fails (a worker process lost,
or not done after ``--timeout``) is an error (status 1, saying why); ``ui`` keeps its page up
then too, showing how far it got.  While it runs, a run is findable by name (the topology's, or
``--name``; a name already running is refused, as Storm refuses it) in the registry
(``stream/registry.py``) and controlled over its UI's HTTP server, which every run serves on
127.0.0.1 (a free port) for this even without ``--ui``: ``ps``, ``activate``, ``deactivate``,
``rebalance``, ``kill`` (``control.py``) and ``monitor`` (``throughput.py``) do it from another
shell.  A killed run stops after the kill's wait and ends as a finished one does (``run``
prints its report, ``"killed": true``; status 0; ``ui`` keeps its page).  ``list`` shows the
topologies a module defines (``listing.py``).  A module is looked up in the current directory
first, as ``python -m`` does.  ``worker`` (hidden) is what ``run`` starts: one worker process,
its job read from stdin.
"""

from __future__ import annotations

import errno
import functools
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import click

from brokerless.error import ZMQError
from brokerless.stream.component import DEFAULT_STREAM, ComponentKind
from brokerless.stream.local import run_local
from brokerless.stream.multiprocess import run_multiprocess
from brokerless.stream.plan import TopologyPlan
from brokerless.stream.registry import Registration, RegistryError, register
from brokerless.stream.run import TopologyRun
from brokerless.stream.topology import Topology, TopologyError, load_topology
from brokerless.stream.worker_process import worker_main

from .control import COMMANDS as CONTROL_COMMANDS
from .listing import from_current_directory, list_
from .runner import Program, Terminated, run_command, sigterm_interrupts
from .status import INTERRUPTED, TERMINATED
from .throughput import monitor

if TYPE_CHECKING:
    from brokerless.stream.ui import UIAddress  # (the UI, and http.server, load only when used)


_PROGRESS_EVERY = 0.5  # seconds between progress lines on a terminal
#: The longest a wait for Ctrl-C sleeps at a time (seconds): the kernel may hand SIGINT to any
#: thread, and Python runs the handler in the main thread only when that thread next wakes.
_WAKE_EVERY = 0.2


def _load(reference: str) -> tuple[Topology, TopologyPlan]:
    """The topology ``reference`` names, and its plan (a topology that cannot be built, a
    checkpointed one without replayable spouts say, is an error saying why)."""
    from_current_directory()
    try:
        topology = load_topology(reference)
        return topology, topology.build()
    except (ImportError, AttributeError, TopologyError) as exc:
        raise click.ClickException(f"cannot load {reference!r}: {exc}") from None


class _Progress:
    """A line on stderr, redrawn every half second while the run goes: how far it got."""

    def __init__(self, run: TopologyRun) -> None:
        self.run = run
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(_PROGRESS_EVERY):
            try:
                stats = self.run.statistics()
            except Exception:  # stopping: the final report says it all
                return
            spouts = [c for c in stats.components.values() if c.kind is ComponentKind.SPOUT]
            bolts = [c for c in stats.components.values() if c.kind is ComponentKind.BOLT]
            click.echo(
                f"\r{time.monotonic() - self.started:6.1f} s  spout tuples acked "
                f"{sum(c.acked for c in spouts):,}, failed {sum(c.failed for c in spouts):,}; "
                f"bolts executed {sum(c.processed for c in bolts):,}  ",
                nl=False,
                err=True,
            )

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        click.echo("", err=True)


@dataclass(frozen=True)
class RunOptions:
    """What ``run`` and ``ui`` both take: which topology, where and how long to run it."""

    topology: str
    name: str | None  # what it runs under (default: the topology's name)
    workers: int | None
    mode: str | None  # "local", "spark", or None: worker processes
    master: str | None
    transport: str
    duration: float | None
    timeout: float
    progress: bool | None

    @contextmanager
    def start(
        self, capture: bool, ui: UIAddress | None, emitted: Sequence[str] = ()
    ) -> Iterator[tuple[TopologyRun, Registration]]:
        """Start the run (after saying if it cannot end by itself), findable by name in the
        registry (itself: the run is not registered again) and killable while within, and stop
        it on the way out; ``emitted`` must name
        components of the topology (and streams they declare).  ``ui`` None: the UI serves
        only as the control server, on a free port of 127.0.0.1."""
        topology, plan = _load(self.topology)
        if emitted:
            _check_emitted(plan, emitted)
        workers = plan.config.num_workers if self.workers is None else self.workers
        try:
            registration = register(self.name or plan.name, self.mode_name, workers)
        except RegistryError as exc:  # the name is taken; the registry cannot be used
            raise click.ClickException(str(exc)) from None
        with registration:
            if self.duration is None and not _finite(plan):
                click.echo(
                    "the topology's spouts never say they are exhausted: pass --duration "
                    "SECONDS (or stop it with Ctrl-C)",
                    err=True,
                )
            with self._started(topology, capture, True if ui is None else ui) as handle:
                assert handle.ui is not None
                handle.ui.killable = True
                registration.publish(handle.ui.url)
                yield handle, registration

    @contextmanager
    def _started(self, topology: Topology, capture: bool, ui: UIAddress) -> Iterator[TopologyRun]:
        try:
            handle = self._start(topology, capture, ui)
        except (OSError, RuntimeError) as exc:  # the UI's port taken; a worker that failed
            raise click.ClickException(str(exc)) from None  # to start (WorkerProcessError)
        except ZMQError as exc:  # an endpoint the workers cannot use
            hint = ""
            if exc.errno == errno.ENAMETOOLONG:
                hint = " (pass --transport tcp, or point TMPDIR at a shorter path)"
            raise click.ClickException(f"{exc}{hint}") from None
        with handle:
            yield handle

    def _start(self, topology: Topology, capture: bool, ui: UIAddress) -> TopologyRun:
        if self.mode == "local":
            return run_local(topology, workers=self.workers, capture=capture, ui=ui, register=False)
        if self.mode == "spark":
            try:
                from brokerless.spark import run_on_spark
            except ImportError as exc:
                raise click.ClickException(
                    f"--spark needs PySpark ({exc}): install the spark extra "
                    "(in a brokerless clone: pip install -e '.[spark]')"
                ) from None
            return run_on_spark(
                self.topology,
                workers=self.workers,
                master=self.master,
                capture=capture,
                ui=ui,
                register=False,
            )
        return run_multiprocess(
            self.topology,
            workers=self.workers,
            transport=self.transport,
            capture=capture,
            ui=ui,
            register=False,
        )

    def wait(self, run: TopologyRun) -> bool:
        """Until the run is done (finite spouts), ``duration`` is over, Ctrl-C, or the end of
        the wait of a kill (then True); with progress on stderr when wanted.  A run that fails
        (it lost a worker, or is not done after ``timeout``) is a ClickException saying why."""
        ui = run.ui
        assert ui is not None  # (every run serves it: the control server)
        shown = _Progress(run) if _show_progress(self.progress) else None
        try:
            if self.duration is None and _finite(run.plan):
                run.wait_until_done(self.timeout, until=ui.killed)
            else:
                deadline = None if self.duration is None else time.monotonic() + self.duration
                _watch(run, lambda: deadline, ui.killed)
            if not ui.killed.is_set():
                return False
            if shown is not None:
                shown.close()
                shown = None
            left = 0.0 if ui.kill_at is None else max(0.0, ui.kill_at - time.monotonic())
            click.echo(f"killed: the spouts are deactivated; stopping in {left:.3g} s", err=True)
            _watch(run, lambda: ui.kill_at, threading.Event())  # (a new kill moves kill_at)
            return True
        except (RuntimeError, TimeoutError) as exc:  # WorkerProcessError is a RuntimeError
            raise click.ClickException(str(exc)) from None
        finally:
            if shown is not None:
                shown.close()

    @property
    def mode_name(self) -> str:
        return self.mode or f"multiprocess/{self.transport}"


def _watch(run: TopologyRun, deadline: Callable[[], float | None], until: threading.Event) -> None:
    """Watch ``run`` until ``deadline()`` (``time.monotonic()``; None: no end) or ``until`` is
    set, waking every ``_WAKE_EVERY``; raises the run's failure if it stops by itself."""
    while not until.is_set():
        end = deadline()
        if end is not None and time.monotonic() >= end:
            return
        run.errors()  # lets a multi-process run take in its workers' reports
        if run.failure is not None:  # (out of attempts: it stopped by itself)
            raise run.failure
        left = _WAKE_EVERY if end is None else max(0.0, end - time.monotonic())
        until.wait(min(_WAKE_EVERY, left))


_RUN_OPTIONS = [
    click.argument("topology"),
    click.option(
        "--name",
        help="The name it runs under, for `stream ps`/`kill` (default: the topology's; a name "
        "already running is refused).",
    ),
    click.option(
        "--workers",
        type=click.IntRange(min=1),
        help="Workers (default: the topology's num_workers).",
    ),
    click.option("--local", "mode", flag_value="local", help="Run in this process."),
    click.option(
        "--spark",
        "mode",
        flag_value="spark",
        help="Run the workers as Spark tasks (the spark extra).",
    ),
    click.option("--master", help="Spark master URL (with --spark; default local[WORKERS])."),
    click.option(
        "--transport",
        type=click.Choice(["ipc", "tcp"]),
        default="ipc",
        show_default=True,
        help="Between worker processes.",
    ),
    click.option(
        "--duration",
        type=click.FloatRange(min=0, min_open=True),
        help="Stop after this many seconds (default: when done).",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=600.0,
        show_default=True,
        help="Give up when not done after this many seconds.",
    ),
    click.option(
        "--progress/--no-progress",
        default=None,
        help="Show progress on stderr (default: when it is a terminal).",
    ),
]


def _run_options(function: Callable[..., int]) -> Callable[..., int]:
    """Give a command the options of :class:`RunOptions`, passed to it as one object."""

    @functools.wraps(function)
    def command(**values: Any) -> int:
        shared = {f.name: values.pop(f.name) for f in fields(RunOptions)}
        _check_mode(click.get_current_context(), shared["mode"])
        with sigterm_interrupts():  # stopped by kill or timeout, the run cleans up as on Ctrl-C
            return function(RunOptions(**shared), **values)

    for option in reversed(_RUN_OPTIONS):
        command = option(command)
    return command


def _check_mode(ctx: click.Context, mode: str | None) -> None:
    """A usage error for an option the chosen mode does not use (it would be ignored)."""
    given = click.core.ParameterSource.COMMANDLINE
    if ctx.get_parameter_source("master") is given and mode != "spark":
        raise click.UsageError("--master is the Spark master's URL: it goes with --spark", ctx)
    if ctx.get_parameter_source("transport") is given and mode is not None:
        raise click.UsageError(
            f"--transport is how worker processes talk: it does not go with --{mode}", ctx
        )


def _finite(plan: TopologyPlan) -> bool:
    return all(c.finite for c in plan.components.values() if c.kind is ComponentKind.SPOUT)


@click.group(
    cls=Program,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  brokerless stream list                                   # the built-in examples
  brokerless stream run brokerless.stream.examples:word_count --workers 3 --emitted count
  brokerless stream run mymodule:topology --local --duration 10 --ui 8080
  brokerless stream ui brokerless.stream.examples:word_count
  brokerless stream ps                                     # the running ones (another shell)
  brokerless stream kill word-count -w 10""",
)
def stream() -> None:
    """Storm-style topologies over brokerless: run them, list them, watch them live."""


@stream.command(
    epilog="""\b
TOPOLOGY is module:name of a Topology (or of a function making one).
Examples:
  brokerless stream run brokerless.stream.examples:word_count --workers 3 --emitted count
  brokerless stream run mymodule:topology --local --duration 30 --ui 8080
  brokerless stream run mymodule:topology --spark --master local[4] --workers 4"""
)
@_run_options
@click.option(
    "--emitted",
    multiple=True,
    metavar="COMPONENT[:STREAM]",
    help="Print the tuples this component emitted (repeatable).",
)
@click.option(
    "--ui",
    "ui",
    metavar="[HOST:]PORT",
    callback=lambda ctx, param, value: _ui_address(ctx, value),
    help="Serve the live topology UI while it runs (0: a free port).",
)
def run(options: RunOptions, emitted: tuple[str, ...], ui: UIAddress | None) -> int:
    """Run TOPOLOGY to completion (or --duration, Ctrl-C, or `brokerless stream kill NAME`)
    and print a JSON report."""
    capture = bool(emitted)
    started = time.monotonic()
    interrupted: KeyboardInterrupt | None = None
    killed = False
    with options.start(capture, ui, emitted) as (handle, _):
        try:  # (a Ctrl-C as soon as the URL is out gets the report too)
            if ui is not None and handle.ui is not None:
                click.echo(f"topology UI: {handle.ui.url}", err=True)
            killed = options.wait(handle)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
            interrupted = exc
        handle.stop()
        errors = handle.errors()
        report: dict[str, Any] = {
            "topology": handle.plan.name,
            "workers": handle.plan.config.num_workers,
            "mode": options.mode_name,
            "seconds": round(time.monotonic() - started, 3),
            "interrupted": interrupted is not None,
            "killed": killed,
            "statistics": handle.statistics().as_dict(),
            "errors": [str(e) for e in errors],  # each task's latest
            "errors_total": errors.total,
        }
        if capture:
            report["emitted"] = _emitted(handle, emitted)
    click.echo(json.dumps(report, indent=1, default=repr))
    if interrupted is None:
        return 0
    return TERMINATED if isinstance(interrupted, Terminated) else INTERRUPTED


@stream.command(
    epilog="""\b
TOPOLOGY is module:name of a Topology (or of a function making one).
Examples:
  brokerless stream ui brokerless.stream.examples:word_count       # then open the URL
  brokerless stream ui mymodule:topology --workers 4 --port 8080
  brokerless stream ui mymodule:topology --spark --host 0.0.0.0 --port 8080"""
)
@_run_options
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="The UI's port (0: a free one).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The UI's address (it shows errors with tracebacks and can deactivate the topology: "
    "keep it local).",
)
def ui(options: RunOptions, port: int, host: str) -> int:
    """Run TOPOLOGY with its live web UI; the page stays up after the run ends (or fails),
    until Ctrl-C."""
    with options.start(False, f"{host}:{port}") as (handle, registration):
        assert handle.ui is not None
        click.echo(f"topology UI: {handle.ui.url}  (Ctrl-C to stop)", err=True)
        try:
            killed = options.wait(handle)
        except click.ClickException as failure:  # the page shows how far it got, until Ctrl-C
            try:  # (from here on, however early Ctrl-C comes, the status says it failed)
                handle.stop()
                registration.close()
                failure.show()
                click.echo(
                    f"failed: the last figures stay at {handle.ui.url} until Ctrl-C", err=True
                )
                _until_ctrl_c()
            except KeyboardInterrupt:
                return failure.exit_code
        handle.stop()
        registration.close()  # (no longer running: no longer listed, its name free)
        said = "killed" if killed else "done"
        click.echo(f"{said}: the final figures stay at {handle.ui.url} until Ctrl-C", err=True)
        _until_ctrl_c()
    return 0


def _until_ctrl_c() -> None:
    """Wait for Ctrl-C (KeyboardInterrupt), waking every ``_WAKE_EVERY``: an untimed wait would
    sleep through a SIGINT another thread took for ever."""
    idle = threading.Event()
    while True:
        idle.wait(_WAKE_EVERY)


@stream.command(hidden=True)
def worker() -> int:
    """(internal) One worker process of a multi-process run; its job on stdin."""
    return worker_main()


for _command in [*CONTROL_COMMANDS, monitor, list_]:
    stream.add_command(_command)


def _ui_address(ctx: click.Context, value: str | None) -> UIAddress | None:
    """``--ui``'s value as ``run_*(ui=...)`` takes it: a port number, or "host:port"."""
    if value is None:
        return None
    from brokerless.stream.ui.server import parse_address

    address: UIAddress = int(value) if value.isdigit() else value
    try:
        parse_address(address)
    except ValueError:
        raise click.UsageError(
            f"--ui takes PORT or HOST:PORT (PORT from 0 to 65535; 0: a free one), not {value!r}",
            ctx,
        ) from None
    return address


def _show_progress(wanted: bool | None) -> bool:
    return sys.stderr.isatty() if wanted is None else wanted


def _check_emitted(plan: TopologyPlan, wanted: Sequence[str]) -> None:
    """A usage error unless each of ``wanted`` (COMPONENT[:STREAM]) names one of ``plan``'s
    components, and a stream it declares."""
    components = {name: c for name, c in plan.components.items() if not name.startswith("__")}
    for item in wanted:
        component, _, stream = item.partition(":")
        if component not in components:
            raise click.BadParameter(
                f"{component!r} is not a component of {plan.name!r}; its components: "
                f"{', '.join(components)}",
                param_hint="'--emitted'",
            )
        if stream and stream not in components[component].streams:
            raise click.BadParameter(
                f"{component!r} has no stream {stream!r}; its streams: "
                f"{', '.join(components[component].streams)}",
                param_hint="'--emitted'",
            )


def _emitted(run: TopologyRun, wanted: Sequence[str]) -> dict[str, list[list[Any]]]:
    streams = {}
    for item in wanted:
        component, _, name = item.partition(":")
        streams[item] = (component, name or DEFAULT_STREAM)
    out: dict[str, list[list[Any]]] = {item: [] for item in wanted}
    for component, name, values in run.captured():
        for item, key in streams.items():
            if key == (component, name):
                out[item].append(list(values))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``brokerless-stream`` and ``python -m brokerless.stream``: ``brokerless stream``."""
    return run_command(stream, argv, "brokerless-stream")
