"""Two checkouts of brokerless against each other on ``stream_thr.py``, interleaved.

    python bench/stream_ab.py --before ../main --pairs 5 -- --mode local
    python bench/stream_ab.py --before ../main --pairs 5 -- --mode multiprocess --workers 2
    python bench/stream_ab.py --before . --after-args="--worker-cpus spread" -- --mode multiprocess

Each pair runs this folder's ``stream_thr.py --json ARGS`` (it uses only the public API) once
on each checkout's ``src/``, the order alternating from pair to pair, each in a fresh process.
Printed: one line per run (spout tuples/s, CPU µs per spout tuple, the load average at its
start and end), then min, median and max of each side, the ratios of the medians and the
median of the pairs' ratios.  The default ``--after`` is this checkout; ``--after-args`` adds
arguments to the after side's runs only, to compare two settings of one checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def run_once(checkout: Path, args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "stream_thr.py", "--json", *args],
        cwd=HERE,
        env={**os.environ, "PYTHONPATH": str(checkout / "src")},
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def summary(name: str, values: list[float]) -> str:
    low, middle, high = min(values), statistics.median(values), max(values)
    return f"{name} min {low:,.1f} median {middle:,.1f} max {high:,.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the other checkout")
    parser.add_argument("--after", type=Path, default=HERE.parent, help="default: this one")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument(
        "--after-args", default="", help="stream_thr.py arguments for the after side only"
    )
    parser.add_argument("args", nargs="*", help="stream_thr.py's arguments (after --)")
    options = parser.parse_args()
    sides = {"before": options.before.resolve(), "after": options.after.resolve()}
    results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for pair in range(options.pairs):
        order = ["before", "after"] if pair % 2 == 0 else ["after", "before"]
        for side in order:
            extra = shlex.split(options.after_args) if side == "after" else []
            result = run_once(sides[side], [*options.args, *extra])
            results[side].append(result)
            print(
                f"{side:6} {result['tuples_per_s']:>8,} tuples/s  "
                f"cpu {result['cpu_us_per_tuple']} us/tuple  "
                f"load {result['load_at_start'][0]:.2f} -> {result['load_at_end'][0]:.2f}",
                flush=True,
            )
    medians = {}
    for side, runs in results.items():
        rates = [float(r["tuples_per_s"]) for r in runs]
        cpus = [float(r["cpu_us_per_tuple"]) for r in runs]
        medians[side] = (statistics.median(rates), statistics.median(cpus))
        print(f"{side}: {summary('tuples/s', rates)}; {summary('cpu us/tuple', cpus)}")
    (rate_b, cpu_b), (rate_a, cpu_a) = medians["before"], medians["after"]
    ratios = [
        float(after["tuples_per_s"]) / float(before["tuples_per_s"])
        for before, after in zip(results["before"], results["after"], strict=True)
    ]
    faster = sum(ratio > 1 for ratio in ratios)
    print(
        f"after / before: rate {rate_a / rate_b:.2f}, cpu per tuple {cpu_a / cpu_b:.2f}; "
        f"per pair {', '.join(f'{r:.2f}' for r in ratios)} (median "
        f"{statistics.median(ratios):.2f}, {faster} of {len(ratios)} faster)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
