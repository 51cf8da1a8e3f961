"""The command line.

    python -m brokerless.stream run brokerless.stream.examples:word_count --workers 3
    python -m brokerless.stream run mypkg.topologies:pipeline --workers 2 --transport tcp \\
        --emitted count --duration 30

``run`` starts the topology in worker processes (``--local``: in this process) and runs it
until every spout is exhausted and every tuple processed -- when all its spouts can say so
(``exhausted()``) -- or for ``--duration`` seconds, or until Ctrl-C.  It prints one JSON
object: the statistics, the errors and, for each ``--emitted COMPONENT[:STREAM]``, the tuples
that component emitted.  ``worker`` is what ``run`` starts: one worker process, its job read
from stdin.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from .component import DEFAULT_STREAM
from .local import run_local
from .multiprocess import load_topology, run_multiprocess, worker_main
from .run import TopologyRun


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m brokerless.stream",
                                     description="Run Storm-style topologies over brokerless.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a topology")
    run.add_argument("topology", help="module:name of a Topology (or of a function making one)")
    run.add_argument("--workers", type=int, default=None, help="worker processes")
    run.add_argument("--transport", choices=["ipc", "tcp"], default="ipc")
    run.add_argument("--local", action="store_true", help="run in this process instead")
    run.add_argument("--duration", type=float, default=None,
                     help="stop after this many seconds (default: when done)")
    run.add_argument("--timeout", type=float, default=600.0,
                     help="give up when not done after this many seconds")
    run.add_argument("--emitted", action="append", default=[], metavar="COMPONENT[:STREAM]",
                     help="print the tuples this component emitted (repeatable)")
    commands.add_parser("worker", help="(internal) one worker process; job on stdin")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "worker":
        return worker_main()
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    topology = load_topology(args.topology)
    finite = all(c.finite for c in topology.build().components.values() if c.kind == "spout")
    if args.duration is None and not finite:
        print("the topology's spouts never say they are exhausted: pass --duration SECONDS "
              "(or stop it with Ctrl-C)", file=sys.stderr)
    capture = bool(args.emitted)
    started = time.monotonic()
    if args.local:
        run: TopologyRun = run_local(topology, workers=args.workers, capture=capture)
    else:
        run = run_multiprocess(args.topology, workers=args.workers, transport=args.transport,
                               capture=capture)
    interrupted = False
    with run:
        try:
            if args.duration is None and finite:
                run.wait_until_done(args.timeout)
            else:
                _run_for(run, args.duration)
        except KeyboardInterrupt:
            interrupted = True
        run.stop()
        elapsed = time.monotonic() - started
        report: dict[str, Any] = {
            "topology": run.plan.name,
            "workers": run.plan.config.num_workers,
            "mode": "local" if args.local else f"multiprocess/{args.transport}",
            "seconds": round(elapsed, 3),
            "interrupted": interrupted,
            "statistics": run.statistics().as_dict(),
            "errors": [str(e) for e in run.errors()],
        }
        if capture:
            report["emitted"] = _emitted(run, args.emitted)
    json.dump(report, sys.stdout, indent=1, default=repr)
    print()
    return 130 if interrupted else 0


def _run_for(run: TopologyRun, duration: float | None) -> None:
    """Keep ``run`` going for ``duration`` seconds (None: until Ctrl-C)."""
    deadline = None if duration is None else time.monotonic() + duration
    idle = threading.Event()
    while deadline is None or time.monotonic() < deadline:
        run.errors()  # lets a multi-process run take in its workers' reports
        idle.wait(0.2 if deadline is None else min(0.2, max(0.0, deadline - time.monotonic())))


def _emitted(run: TopologyRun, wanted: list[str]) -> dict[str, list[list[Any]]]:
    streams = {}
    for item in wanted:
        component, _, stream = item.partition(":")
        streams[item] = (component, stream or DEFAULT_STREAM)
    out: dict[str, list[list[Any]]] = {item: [] for item in wanted}
    for component, stream, values in run.captured():
        for item, key in streams.items():
            if key == (component, stream):
                out[item].append(list(values))
    return out
