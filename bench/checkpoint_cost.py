"""What checkpoints cost: a keyed count over ``--keys`` distinct keys, with stateful bolts.

The spout (a ``SequenceSpout``) emits ``--count`` tuples ``[i % keys]``; the count bolt
(``--parallelism`` tasks, fields grouping) keeps a count per key -- in its checkpointed
``KeyValueState``, or with ``--plain`` in a dict of a plain bolt (the same work without
checkpoints: the baseline).  Checkpoints are taken every ``--interval`` seconds into a
temporary directory.

The clock runs from "every worker running" to "complete" (every tuple processed).  Reported:
tuples per second; checkpoints completed and the interval achieved; per checkpoint (means and
maxima over the run) its size, its duration from trigger to commit, the longest *pause* a task
spent making its snapshot (serializing its state, in its own thread: the time it processes
nothing) and the longest alignment (a task holding input back while barriers arrive).

    PYTHONPATH=src python bench/checkpoint_cost.py --mode local --keys 100000
    PYTHONPATH=src python bench/checkpoint_cost.py --mode local --keys 100000 --plain
    PYTHONPATH=src python bench/checkpoint_cost.py --mode multiprocess --workers 2
    PYTHONPATH=src python bench/checkpoint_cost.py --mode spark --workers 2

``--mode spark`` runs the workers as tasks of a Spark ``local[workers]`` session (the clock
starts once they all run, so Spark's start-up is not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from functools import partial
from typing import Any

from brokerless.stream import Bolt, Config, SequenceSpout, StatefulBolt, Topology, fields
from brokerless.stream.local import run_local
from brokerless.stream.multiprocess import run_multiprocess


class StatefulKeyCount(StatefulBolt):
    def init_state(self, state: Any) -> None:
        self.counts = state

    def process(self, tup: Any) -> None:
        key = tup[0]
        self.counts[key] = self.counts.get(key, 0) + 1


class PlainKeyCount(Bolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.counts: dict[Any, int] = {}

    def process(self, tup: Any) -> None:
        key = tup[0]
        self.counts[key] = self.counts.get(key, 0) + 1


def topology(count: int, keys: int, interval: float, parallelism: int, plain: bool) -> Topology:
    config = Config(num_ackers=0, checkpoint_interval_secs=interval)
    tuples = [[i % keys] for i in range(count)]
    return (
        Topology("keyed-count", config)
        .spout("keys", partial(SequenceSpout, tuples, ["key"]))
        .bolt(
            "count",
            PlainKeyCount if plain else StatefulKeyCount,
            parallelism=parallelism,
            inputs={"keys": fields("key")},
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["local", "multiprocess", "spark"], default="local")
    parser.add_argument("--workers", type=int, default=2, help="multiprocess, spark: workers")
    parser.add_argument("--count", type=int, default=300_000, help="spout tuples")
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys (state size)")
    parser.add_argument("--interval", type=float, default=0.5, help="checkpoint interval (s)")
    parser.add_argument("--parallelism", type=int, default=2, help="count tasks")
    parser.add_argument("--plain", action="store_true", help="a plain bolt: no checkpoints")
    args = parser.parse_args(argv)
    topo = topology(args.count, args.keys, args.interval, args.parallelism, args.plain)
    if args.mode == "local":
        run = run_local(topo)
    elif args.mode == "multiprocess":
        run = run_multiprocess(topo, workers=args.workers, transport="ipc")
    else:
        from brokerless.spark import run_on_spark  # pyspark only for this mode

        scratch = tempfile.TemporaryDirectory(prefix="checkpoint-cost-")  # removed on return
        config = topo.config.replace(checkpoint_dir=scratch.name)  # Spark needs one named
        run = run_on_spark(topo, workers=args.workers, config=config)
    with run:
        started = time.perf_counter()
        run.wait_until_done(timeout=600)
        elapsed = time.perf_counter() - started
        checkpoints = run.checkpoint_statistics()
        run.stop()
        stats = run.statistics()
    if run.errors():
        print(run.errors()[0].traceback, file=sys.stderr)
        return 1
    if stats["count"].processed != args.count:
        print(f"counted {stats['count'].processed}, expected {args.count}", file=sys.stderr)
        return 1
    history = checkpoints.history
    result: dict[str, Any] = {
        "case": "checkpoint-cost",
        "mode": args.mode if args.mode == "local" else f"{args.mode}/{args.workers}",
        "stateful": not args.plain,
        "count": args.count,
        "keys": args.keys,
        "interval_s": args.interval,
        "seconds": round(elapsed, 3),
        "tuples_per_s": round(args.count / elapsed),
        "checkpoints": checkpoints.completed,
        "aborted": checkpoints.aborted,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
    }
    if history:
        result.update(
            achieved_interval_s=round(elapsed / len(history), 3),
            bytes_mean=round(statistics.mean(r.bytes for r in history)),
            duration_ms_mean=round(statistics.mean(r.duration_s for r in history) * 1e3, 2),
            duration_ms_max=round(max(r.duration_s for r in history) * 1e3, 2),
            pause_ms_mean=round(statistics.mean(r.pause_ms_max for r in history), 3),
            pause_ms_max=round(max(r.pause_ms_max for r in history), 3),
            alignment_ms_max=round(max(r.alignment_ms_max for r in history), 3),
        )
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    # worker processes unpickle the components by module name, which cannot be __main__
    import checkpoint_cost

    raise SystemExit(checkpoint_cost.main())
