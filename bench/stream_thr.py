"""Tuples per second through a three-stage topology: spout -> bolt -> bolt.

The spout emits ``--count`` tuples ``[i, payload]`` (``--size`` bytes of payload), reliably
(with message ids, acked through the XOR acker) unless ``--no-acking``; the first bolt
re-emits each tuple anchored to it, the second consumes it.  Each component has
``--parallelism`` executors, wired by shuffle groupings.  ``--mode local`` runs it in this
process (one worker); ``--mode multiprocess`` in ``--workers`` processes over ``--transport``.

The clock starts once every worker is running (process start-up is not timed) and stops when
the run is complete: every spout tuple acked (or, without acking, emitted) and every queue
empty, which the completion detector notices within about 10 ms.  The rate is spout tuples
divided by that time; each spout tuple is delivered twice (to each bolt) and, with acking,
makes three acker messages.

The two cases of the project's targets (BENCHMARKS.md), both acking:

    PYTHONPATH=src python bench/stream_thr.py --mode local
    PYTHONPATH=src python bench/stream_thr.py --mode multiprocess --workers 2 --transport ipc

``--executor-threads per_executor`` gives each executor its own thread instead of the default
(one shared thread per worker: ``Config.executor_threads``).  ``--worker-cpus spread`` keeps
worker i to CPU i mod n of this machine's n (``Config.worker_cpus``; by default the scheduler
places them; multi-process mode only); ``--worker-switch-interval 0.005`` (or ``none``) runs
the workers with another GIL switch interval than the default 2 ms
(``Config.worker_switch_interval``).

``--json`` prints the result as one JSON line (``tuples_per_s`` is the spout's rate), with the
load average at the start and the end of the run, and ``cpu_us_per_tuple``: the CPU time the
run cost (this process from the topology's start to its stop, and the worker processes' whole
lives, start-up included) per spout tuple.  On a loaded machine the rate depends on the CPU
share the run gets, the CPU time much less: compare both.  In multi-process mode (where
``/proc`` is) ``worker_cpu`` gives each worker process's CPU while the clock ran, in CPUs (1.0:
one CPU all the time): a worker near 1.0 is what limits the run.  ``stream_ab.py`` runs two
checkouts against each other, interleaved.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
from functools import partial
from typing import Any

from _harness import emit, process_cpu_seconds
from _load import format_load, load_average
from brokerless.stream import Bolt, Config, Spout, Topology, shuffle
from brokerless.stream.local import run_local
from brokerless.stream.multiprocess import run_multiprocess


class NumberSpout(Spout):
    """Emits this task's share of ``count`` tuples, then says it is exhausted."""

    outputs = ["n", "payload"]

    def __init__(self, count: int, size: int, acking: bool) -> None:
        self.count = count
        self.payload = "x" * size
        self.acking = acking

    def open(self, conf: Any, context: Any) -> None:
        n = len(context.get_component_tasks(context.component_id))
        self.next = context.task_index
        self.step = n
        self.in_flight = 0

    def next_tuple(self) -> None:
        if self.next < self.count:
            i = self.next
            self.next += self.step
            if self.acking:
                self.in_flight += 1
                self.emit([i, self.payload], msg_id=i)
            else:
                self.emit([i, self.payload])

    def ack(self, msg_id: Any) -> None:
        self.in_flight -= 1

    def fail(self, msg_id: Any) -> None:
        raise RuntimeError(f"tuple {msg_id} failed: the benchmark expects none to")

    def exhausted(self) -> bool:
        return self.next >= self.count and not self.in_flight


class Transform(Bolt):
    outputs = ["n", "payload"]

    def process(self, tup: Any) -> None:
        self.emit([tup[0] + 1, tup[1]])


class Consume(Bolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.total = 0

    def process(self, tup: Any) -> None:
        self.total += tup[0]


def topology(count: int, size: int, acking: bool, parallelism: int) -> Topology:
    return (
        Topology("three-stage", Config(num_ackers=None if acking else 0))
        .spout("spout", partial(NumberSpout, count, size, acking), parallelism=parallelism)
        .bolt("transform", Transform, parallelism=parallelism, inputs={"spout": shuffle()})
        .bolt("consume", Consume, parallelism=parallelism, inputs={"transform": shuffle()})
    )


def _switch_interval(text: str) -> float | str:
    """``--worker-switch-interval``: seconds, or "none" (Python's own)."""
    if text == "none":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seconds or none, not {text!r}") from None


def _cpu_seconds() -> float:
    """CPU time (user + system) of this process and of its children that have ended."""
    mine = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def _process_cpu(pid: int) -> float | None:
    """CPU seconds process ``pid`` has used so far; None without ``/proc``."""
    try:
        return process_cpu_seconds(pid)
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["local", "multiprocess"], default="local")
    parser.add_argument("--workers", type=int, default=2, help="multiprocess: processes")
    parser.add_argument("--transport", choices=["ipc", "tcp"], default="ipc")
    parser.add_argument("--count", type=int, default=200_000, help="spout tuples")
    parser.add_argument("--size", type=int, default=16, help="payload bytes per tuple")
    parser.add_argument("--parallelism", type=int, default=1, help="executors per component")
    parser.add_argument("--no-acking", dest="acking", action="store_false")
    parser.add_argument("--security", choices=["curve", "none"], default="curve")
    parser.add_argument(
        "--executor-threads",
        choices=["shared", "per_executor"],
        default=None,
        help="how a worker runs its executors (Config.executor_threads; default: its default)",
    )
    parser.add_argument(
        "--worker-cpus",
        choices=["spread"],
        default=None,
        help="multiprocess: keep each worker to one CPU (Config.worker_cpus; default: the "
        "scheduler's choice)",
    )
    parser.add_argument(
        "--worker-switch-interval",
        type=_switch_interval,
        default=None,
        metavar="SECONDS|none",
        help="multiprocess: the GIL's switch interval in each worker (Config."
        "worker_switch_interval; none: Python's own; default: the Config's default)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args(argv)
    load_at_start = load_average()
    cpu_at_start = _cpu_seconds()
    topo = topology(args.count, args.size, args.acking, args.parallelism)
    if args.executor_threads is not None:
        topo = topo.with_config(executor_threads=args.executor_threads)
    if args.mode == "local":
        run = run_local(topo)
    else:
        config = topo.config.replace(security=args.security)
        if args.worker_cpus is not None:  # (stream_ab.py may run this on older checkouts)
            config = config.replace(worker_cpus=args.worker_cpus)
        if args.worker_switch_interval is not None:
            interval = args.worker_switch_interval
            config = config.replace(worker_switch_interval=None if interval == "none" else interval)
        run = run_multiprocess(topo, workers=args.workers, transport=args.transport, config=config)
    with run:
        # (none in local mode; stream_ab.py runs this file on checkouts older than worker_info)
        pids = [info["pid"] for info in getattr(run, "worker_info", [])]
        worker_cpu = [_process_cpu(pid) for pid in pids]
        started = time.perf_counter()
        run.wait_until_done(timeout=600)
        elapsed = time.perf_counter() - started
        worker_cpu = [
            None if before is None or after is None else round((after - before) / elapsed, 2)
            for before, after in zip(worker_cpu, map(_process_cpu, pids), strict=True)
        ]
        run.stop()
        stats = run.statistics()
    cpu = _cpu_seconds() - cpu_at_start
    errors = run.errors()
    if errors:
        print(errors[0].traceback, file=sys.stderr)
        return 1
    consumed = stats["consume"].processed
    if consumed != args.count:
        print(f"consumed {consumed} tuples, expected {args.count}", file=sys.stderr)
        return 1
    mode = args.mode if args.mode == "local" else f"multiprocess/{args.transport}"
    result = {
        "case": "stream-thr-3stage",
        "mode": mode,
        "workers": 1 if args.mode == "local" else args.workers,
        "parallelism": args.parallelism,
        "acking": args.acking,
        "security": args.security,
        "worker_cpus": args.worker_cpus if args.mode == "multiprocess" else None,
        # (what the workers ran with: None is Python's own; absent on checkouts before it)
        "worker_switch_interval": (
            getattr(config, "worker_switch_interval", None) if args.mode == "multiprocess" else None
        ),
        # (stream_ab.py runs this file on older checkouts too: before the option, a thread each)
        "executor_threads": getattr(topo.config, "executor_threads", "per_executor"),
        "count": args.count,
        "size": args.size,
        "seconds": round(elapsed, 4),
        "tuples_per_s": round(args.count / elapsed),
        "deliveries_per_s": round(2 * args.count / elapsed),
        "spout_complete_latency_ms_mean": round(stats["spout"].latency_ms_mean, 3),
        "transform_execute_latency_ms_mean": round(stats["transform"].latency_ms_mean, 4),
        "cpu_seconds": round(cpu, 3),
        "cpu_us_per_tuple": round(cpu / args.count * 1e6, 2),
        "worker_cpu": worker_cpu,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_at_start": load_at_start,
        "load_at_end": load_average(),
    }
    workers = f", {args.workers} workers" if args.mode == "multiprocess" else ""
    if args.worker_cpus is not None and args.mode == "multiprocess":
        workers += f" (CPUs: {args.worker_cpus})"
    shares = [f"{c:.0%}" for c in worker_cpu if c is not None]
    busy = f"; the workers used {', '.join(shares)} of a CPU" if shares else ""
    latency = (
        f", mean complete latency {result['spout_complete_latency_ms_mean']:.1f} ms"
        if args.acking
        else ""
    )
    emit(
        result,
        args.json,
        f"{mode}{workers}, {'acking' if args.acking else 'no acking'}: {args.count} spout tuples "
        f"in {elapsed:.2f} s: {result['tuples_per_s']:,} spout tuples/s "
        f"({result['deliveries_per_s']:,} deliveries/s){latency}; "
        f"{result['cpu_us_per_tuple']} us of CPU per spout tuple{busy}; load average "
        f"{format_load(load_at_start)} at start, {format_load(result['load_at_end'])} at end",
    )
    return 0


if __name__ == "__main__":
    # worker processes unpickle the components by module name, which cannot be __main__
    import stream_thr

    raise SystemExit(stream_thr.main())
