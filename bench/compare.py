"""Side-by-side benchmark runner: brokerless against pyzmq, in the same run, interleaved.

For every selected case (see ``--list``) it runs R rounds; each round runs the case once per
implementation, every trial in a fresh subprocess of the same interpreter (so no trial inherits
another's heap, threads or caches), alternating which goes first: round 1 the reference (pyzmq)
then the subject (brokerless), round 2 the subject then the reference, and so on.  A trial is
one of the tools in this folder run with ``--json``; its last stdout line is its result.

Per case and metric it reports the median of each implementation's trials and the median (with
min-max) of the per-round ratios subject / reference -- higher is better for throughput, lower
for latency -- as a Markdown table ready to paste into BENCHMARKS.md, headed by the exact command
line, the date, the Python, pyzmq and libzmq versions and the machine.  Progress goes to stderr,
the report to stdout.

    python bench/compare.py                       # every case, 5 rounds (a few minutes)
    python bench/compare.py --quick --rounds 2    # smoke run
    python bench/compare.py --impls zmq,zmq       # A/A run: the ratios show the noise floor
    python bench/compare.py --cases 'inproc-lat-*' --rounds 9
    python bench/compare.py --quick --plot ratios.png   # also draw the ratios (matplotlib)
    python bench/compare.py --busy 1              # "one CPU busy": a CPU-bound process beside it
    python bench/compare.py --replot run.json --plot ratios.png  # draw a run saved with --save

The header records the condition: the load average at the start and at the end of the run, the
CPU count, and the CPU-bound processes ``--busy N`` added (``_load.py``: started before the
first trial, stopped after the last, so both implementations share the CPUs with them alike).

The case table is data: a case names its tool(s), transport, count and extra arguments.  Cases
over tcp or ipc run two processes per trial, started together (like libzmq's perf tools: a
receiver that reports, local_thr, and a sender, remote_thr; for latency remote_lat reports and
local_lat echoes), with an ``--endpoint`` filled in per trial; the fan-out case runs one
publisher process that starts its own subscriber processes.  Both processes of a trial use the
same implementation.  A fresh tcp port (and the port after it, for the tools' control channel,
see _control.py) or a fresh ipc path is picked for every trial.  If any process of a trial
fails, the others are killed at once (with everything they started) and the case is marked as
failed, with the failing tool's stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fnmatch
import itertools
import json
import os
import platform
import random
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _harness import ImplError, cpu_model, describe, interrupts_held, load_impl
from _load import BusyProcessDied, Condition, busy, cpu_count, load_average

BENCH = Path(__file__).resolve().parent
DISPLAY = {"zmq": "pyzmq"}


@dataclass(frozen=True)
class Metric:
    key: str  # field of a trial's JSON result
    label: str
    unit: str
    higher_is_better: bool
    ratio: bool = True  # False: report the values only (e.g. a loss that should be 0)


@dataclass(frozen=True)
class Target:
    """The design target for the ratio subject / reference of a case's first metric."""

    op: str  # ">=" or "<="
    value: float

    def met(self, ratio: float) -> bool:
        return ratio >= self.value if self.op == ">=" else ratio <= self.value

    def __str__(self) -> str:
        return f"{'≥' if self.op == '>=' else '≤'} {self.value:.1f}"


METRICS: dict[str, tuple[Metric, ...]] = {
    "thr": (Metric("msg_per_s", "throughput", "msg/s", True),),
    "lat": (
        Metric("latency_us", "one-way latency, mean", "µs", False),
        Metric("rtt_p50_us", "round trip, p50", "µs", False),
        Metric("rtt_p99_us", "round trip, p99", "µs", False),
    ),
    "fanout": (
        Metric("msg_per_s", "per-subscriber rate, median subscriber", "msg/s", True),
        Metric("min_msg_per_s", "per-subscriber rate, slowest subscriber", "msg/s", True),
        Metric("loss", "messages lost, worst subscriber", "%", False, ratio=False),
    ),
}


@dataclass(frozen=True)
class Case:
    name: str
    label: str
    kind: str  # a key of METRICS
    transport: str  # "inproc"; "tcp" and "ipc" get an --endpoint per trial
    count: int  # messages or round trips per trial: 0.5-1 s or so with pyzmq on a 2 vCPU VM
    args: tuple[str, ...] = ()
    # Tools run at once for one trial, all with the same arguments; the first prints the result.
    # Two for tcp/ipc: ("local_thr.py", "remote_thr.py"), the receiver (binds, times, reports)
    # and the sender; ("remote_lat.py", "local_lat.py"), the requester (connects, times,
    # reports) and the echo (binds).
    scripts: tuple[str, ...] = ()
    target: Target | None = None  # applies to METRICS[kind][0]
    sizes: tuple[int, ...] = field(default=())  # payload bytes per frame, for MB/s

    def commands(self, impl: str, count: int, endpoint: str | None) -> list[list[str]]:
        extra = ["--endpoint", endpoint] if endpoint else []
        return [
            [
                sys.executable,
                str(BENCH / script),
                *("--impl", impl, "--count", str(count)),
                *self.args,
                *extra,
                "--json",
            ]
            for script in self.scripts
        ]


def thr_case(transport: str, size: int, count: int, frames: int = 1, curve: bool = False) -> Case:
    shape = f"{frames}x{size}" if frames > 1 else str(size)
    scripts = ("inproc_thr.py",) if transport == "inproc" else ("local_thr.py", "remote_thr.py")
    # CURVE: both sides are bound by libsodium's crypto_box, so parity is the aim.
    target = Target(">=", 1.0 if transport == "inproc" or curve else 1.5)
    return Case(
        name=f"{transport}{'-curve' if curve else ''}-thr-{shape}",
        label=f"{transport}{' CURVE' if curve else ''} PUSH→PULL, "
        f"{f'{frames} x {size}' if frames > 1 else size} B",
        kind="thr",
        transport=transport,
        count=count,
        args=("--size", str(size))
        + (("--multipart",) if frames == 2 else ())
        + (("--curve",) if curve else ()),
        scripts=scripts,
        target=target,
        sizes=(size,) * frames,
    )


def lat_case(transport: str, size: int, count: int, curve: bool = False) -> Case:
    # Over tcp/ipc the requester, remote_lat, measures and reports, so it comes first.
    scripts = ("inproc_lat.py",) if transport == "inproc" else ("remote_lat.py", "local_lat.py")
    return Case(
        name=f"{transport}{'-curve' if curve else ''}-lat-{size}",
        label=f"{transport}{' CURVE' if curve else ''} REQ/REP, {size} B",
        kind="lat",
        transport=transport,
        count=count,
        args=("--size", str(size)) + (("--curve",) if curve else ()),
        scripts=scripts,
        target=Target("<=", 0.8),
        sizes=(size,),
    )


def fanout_case(transport: str, subscribers: int, size: int, count: int) -> Case:
    return Case(
        name=f"{transport}-fanout-{subscribers}x{size}",
        label=f"{transport} PUB→{subscribers} SUB, {size} B, HWM 0 (lossless)",
        kind="fanout",
        transport=transport,
        count=count,
        args=("--size", str(size), "--subscribers", str(subscribers), "--hwm", "0"),
        scripts=("pubsub_fanout.py",),  # the publisher; it starts the subscriber processes
        target=Target(">=", 1.0),
        sizes=(size,),
    )


def asyncio_case(transport: str, mode: str, size: int, count: int, loop: str) -> Case:
    """Both ends in one event loop (bench/asyncio_bench.py): zmq.asyncio against
    brokerless.asyncio; no design target."""
    shape = "REQ/REP" if mode == "lat" else "PUSH→PULL"
    return Case(
        name=f"{loop}-{transport}-{mode}-{size}",
        label=f"{loop} loop, {transport} {shape}, {size} B, awaited one by one",
        kind=mode,
        transport=transport,
        count=count,
        args=("--mode", mode, "--size", str(size), "--loop", loop),
        scripts=("asyncio_bench.py",),
        sizes=(size,),
    )


CASES: tuple[Case, ...] = (
    thr_case("inproc", 1, 800_000),
    thr_case("inproc", 100, 700_000),
    thr_case("inproc", 1024, 500_000),
    thr_case("inproc", 65536, 40_000),
    thr_case("inproc", 100, 100_000, frames=2),
    lat_case("inproc", 1, 40_000),
    lat_case("inproc", 1024, 40_000),
    # Two processes per trial; counts: about half a second to a second with pyzmq.
    thr_case("tcp", 1, 700_000),
    thr_case("tcp", 100, 600_000),
    thr_case("tcp", 1024, 300_000),
    thr_case("tcp", 65536, 15_000),
    thr_case("tcp", 131072, 10_000),  # larger than a PULL's own reads lend below (engine_lent)
    thr_case("tcp", 200_000, 8_000),
    thr_case("tcp", 4 << 20, 800),  # a body larger than one direct read (zmtp.frames)
    thr_case("tcp", 100, 120_000, frames=2),
    thr_case("ipc", 1, 800_000),
    thr_case("ipc", 100, 700_000),
    thr_case("ipc", 1024, 300_000),
    thr_case("ipc", 65536, 15_000),
    thr_case("ipc", 100, 120_000, frames=2),
    lat_case("tcp", 1, 8_000),
    lat_case("tcp", 1024, 8_000),
    lat_case("ipc", 1, 8_000),
    lat_case("ipc", 1024, 8_000),
    fanout_case("tcp", 4, 100, 300_000),
    *(
        asyncio_case(transport, mode, size, count, loop)
        for loop in ("asyncio", "uvloop")
        for transport in ("tcp", "ipc")
        for mode, size, count in (("lat", 1, 5_000), ("thr", 100, 30_000))
    ),
    # CURVE (bench/_harness.py: fixed keys, no ZAP handler).
    thr_case("tcp", 100, 150_000, curve=True),
    thr_case("tcp", 65536, 5_000, curve=True),
    lat_case("tcp", 1, 8_000, curve=True),
)
QUICK_DIVISOR = 10


class TrialError(Exception):
    pass


_endpoints = itertools.count()


def _ephemeral_ports() -> range:
    """The kernel's ephemeral ports (Linux's default range where it cannot be read)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def endpoint_for(transport: str, workdir: str) -> str | None:
    """A fresh endpoint for a multi-process trial; inproc tools choose their own.

    ipc: a new path in this run's private temporary directory (the control channel adds
    ``.ctl``).  tcp: a port free now whose successor is free too (the tools' control channel
    listens on port + 1), both outside the ephemeral range; the receiver binds it right away.
    """
    if transport == "inproc":
        return None
    if transport == "ipc":
        return f"ipc://{workdir}/bench-{next(_endpoints)}"
    if transport == "tcp":
        # Both ports outside the kernel's ephemeral range: a port-0 bind and every connection's
        # source port are drawn from it, so after a burst of connections (a test suite's)
        # its free neighbours can be rare -- 100 port-0 binds once found no port whose
        # successor was free (CI, 2026-11-30).
        ephemeral = _ephemeral_ports()
        ports = [p for p in range(10000, 65535) if p not in ephemeral and p + 1 not in ephemeral]
        for port in random.sample(ports, 200):
            with socket.socket() as probe, socket.socket() as control:
                # As the tools bind (libzmq, brokerless and the control channel all set
                # SO_REUSEADDR): a port whose last connection is in TIME-WAIT is free for them.
                for sock in (probe, control):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind(("127.0.0.1", port))
                    control.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return f"tcp://127.0.0.1:{port}"
        raise TrialError("found no two consecutive free tcp ports on 127.0.0.1")
    raise ValueError(f"unknown transport {transport!r}")


POLL_S = 0.05  # how often run_trial looks at a trial's processes


def run_trial(commands: list[list[str]], timeout: float) -> dict[str, Any]:
    """Start every command of one trial, wait for all, return the first one's JSON result.

    Each command runs in a session of its own (so it and any process it starts can be killed
    together) with its output in temporary files.  If one exits with an error the others are
    killed at once: they would otherwise wait for their dead peer until the timeout.
    """
    procs: list[subprocess.Popen[bytes]] = []
    with contextlib.ExitStack() as stack:
        files = [
            (
                stack.enter_context(tempfile.TemporaryFile()),
                stack.enter_context(tempfile.TemporaryFile()),
            )
            for _ in commands
        ]
        failed: list[int] = []
        running: list[int] = []  # still running at the timeout
        try:
            with interrupts_held():  # a Ctrl-C mid-Popen would lose its process
                for command, (out, err) in zip(commands, files, strict=True):
                    procs.append(
                        subprocess.Popen(
                            command,
                            stdin=subprocess.DEVNULL,
                            stdout=out,
                            stderr=err,
                            start_new_session=True,
                        )
                    )
            deadline = time.monotonic() + timeout
            while True:
                codes = [proc.poll() for proc in procs]
                failed = [i for i, code in enumerate(codes) if code not in (None, 0)]
                if failed or all(code == 0 for code in codes):
                    break
                if time.monotonic() > deadline:
                    running = [i for i, code in enumerate(codes) if code is None]
                    break
                time.sleep(POLL_S)
        finally:
            for proc in procs:
                kill_session(proc)
        outputs = []
        for out, err in files:
            out.seek(0)
            err.seek(0)
            outputs.append(
                (out.read().decode(errors="replace"), err.read().decode(errors="replace"))
            )

    def tails(indices: list[int]) -> str:
        parts = []
        for i in indices:
            tail = "\n".join(outputs[i][1].strip().splitlines()[-15:])
            status = procs[i].returncode
            parts.append(f"[exit status {status}] {shlex.join(commands[i])}\n{tail}".rstrip())
        return "\n".join(parts)

    if running:
        raise TrialError(
            f"timed out after {timeout:g} s; killed, with their stderr:\n" + tails(running)
        )
    if failed:
        raise TrialError("a process failed, the others were killed:\n" + tails(failed))
    lines = outputs[0][0].strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise TrialError(f"no JSON result from {shlex.join(commands[0])}") from None


def kill_session(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc`` and everything it started (its session) if it is still running; reap it."""
    if proc.poll() is None:  # not reaped yet, so its pid (the session's id) is still its own
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


@dataclass
class CaseResult:
    case: Case
    trials: dict[str, list[dict[str, Any]]]  # "subject" and "reference", in round order
    ratios: dict[str, list[float]]  # by metric key, one per complete round
    error: str | None = None


def run_case(
    case: Case, subject: str, reference: str, rounds: int, count: int, timeout: float, tmp: str
) -> CaseResult:
    trials: dict[str, list[dict[str, Any]]] = {"subject": [], "reference": []}
    result = CaseResult(case, trials, {m.key: [] for m in METRICS[case.kind]})
    labels = impl_labels(subject, reference)
    for rnd in range(rounds):
        order = (reference, subject) if rnd % 2 == 0 else (subject, reference)
        order_labels = (labels[1], labels[0]) if rnd % 2 == 0 else labels
        got: dict[str, dict[str, Any]] = {}
        for impl, label in zip(order, order_labels, strict=True):
            try:
                endpoint = endpoint_for(case.transport, tmp)
                got[label] = run_trial(case.commands(impl, count, endpoint), timeout)
            except TrialError as exc:
                result.error = f"{label}: {exc}"
                log(f"[{case.name} {rnd + 1}/{rounds}] {label} FAILED: {exc}")
                return result
            log(f"[{case.name} {rnd + 1}/{rounds}] {label:>14}: {summary(case, got[label])}")
        result.trials["subject"].append(got[labels[0]])
        result.trials["reference"].append(got[labels[1]])
        for metric in METRICS[case.kind]:
            if metric.ratio:
                s, r = got[labels[0]][metric.key], got[labels[1]][metric.key]
                result.ratios[metric.key].append(s / r if r else float("nan"))
    return result


def impl_labels(subject: str, reference: str) -> tuple[str, str]:
    a, b = DISPLAY.get(subject, subject), DISPLAY.get(reference, reference)
    return (f"{a} (A)", f"{b} (B)") if a == b else (a, b)


def summary(case: Case, trial: dict[str, Any]) -> str:
    return ", ".join(fmt(trial[m.key], m, case) for m in METRICS[case.kind])


def fmt(value: float, metric: Metric, case: Case) -> str:
    if metric.unit == "msg/s":
        mb = value * sum(case.sizes) / 1e6
        return f"{value:,.0f} msg/s ({mb:,.1f} MB/s)"
    if metric.unit == "%":
        return f"{value:.2%}"
    return f"{value:,.1f} {metric.unit}"


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def environment(impls: dict[str, dict[str, str]]) -> list[str]:
    """Lines saying how and where the figures were produced."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    versions = []
    for info in impls.values():
        text = f"{DISPLAY.get(info['impl'], info['impl'])} {info['version']}"
        if "libzmq" in info:
            text += f" (libzmq {info['libzmq']})"
        if text not in versions:
            versions.append(text)
    tuning = [f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("MALLOC_")]
    if "PYTHONMALLOC" in os.environ:
        tuning.append(f"PYTHONMALLOC={os.environ['PYTHONMALLOC']}")
    return [
        f"- Command: `{shlex.join(sys.orig_argv)}`",
        f"- Date: {now}",
        f"- Python {platform.python_version()} ({platform.python_implementation()}); "
        + "; ".join(versions),
        f"- Machine: {cpu_model()}, {cpu_count()}, {platform.platform()}",
        f"- Allocator environment: {', '.join(tuning) or 'defaults (no MALLOC_* set)'}",
    ]


def report(results: list[CaseResult], subject: str, reference: str, rounds: int) -> list[str]:
    """The Markdown table: one row per case and metric."""
    sub, ref = impl_labels(subject, reference)
    lines = [
        f"| Case | Metric | {sub} | {ref} | {sub} ÷ {ref}: median (min-max) | Target |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for res in results:
        case = res.case
        for i, metric in enumerate(METRICS[case.kind]):
            better = "higher" if metric.higher_is_better else "lower"
            values = [
                [trial[metric.key] for trial in res.trials[role]]
                for role in ("subject", "reference")
            ]
            cells = [fmt(statistics.median(v), metric, case) if v else "—" for v in values]
            ratios = res.ratios[metric.key]
            if ratios:
                ratio = (
                    f"**{statistics.median(ratios):.2f}** "
                    f"({min(ratios):.2f}-{max(ratios):.2f}), {better} is better"
                )
            else:
                ratio = "—"
            target = ""
            if i == 0 and case.target is not None:
                target = str(case.target)
                if ratios:
                    target += " met" if case.target.met(statistics.median(ratios)) else " NOT met"
            if res.error and i == 0:
                target += f" (failed after {len(ratios)} of {rounds} rounds, see below)"
            lines.append(
                f"| {case.label} | {metric.label} | {cells[0]} | {cells[1]} | {ratio} | {target} |"
            )
    failed = [res for res in results if res.error]
    if failed:
        lines += ["", "Failed (full output on stderr):", ""]
        for res in failed:
            first, *rest = str(res.error).splitlines()
            lines.append(f"- {res.case.name}: {first}" + (f" -- `{rest[-1]}`" if rest else ""))
    return lines


def plot(results: list[CaseResult], path: str, subject: str, reference: str, title: str) -> None:
    """Draw the median ratio subject / reference of each case's first metric, with its
    min-max over the rounds and the design target: throughput cases on the left (higher is
    better), latency on the right (lower is better), one bar per case and size, on a log
    scale from 1.0."""
    import matplotlib

    matplotlib.use("Agg")  # a file, no display
    import matplotlib.ticker
    from matplotlib import pyplot

    sub, ref = impl_labels(subject, reference)
    panels = [
        (
            f"throughput: {sub} ÷ {ref} (higher is better)",
            [r for r in results if METRICS[r.case.kind][0].higher_is_better],
        ),
        (
            f"latency: {sub} ÷ {ref} (lower is better)",
            [r for r in results if not METRICS[r.case.kind][0].higher_is_better],
        ),
    ]
    panels = [
        (label, [r for r in rows if r.ratios[METRICS[r.case.kind][0].key]])
        for label, rows in panels
    ]
    panels = [(label, rows) for label, rows in panels if rows]
    if not panels:
        raise TrialError("no case finished a round: nothing to plot")
    tallest = max(len(rows) for _, rows in panels)
    figure, axes = pyplot.subplots(
        1, len(panels), figsize=(6.5 * len(panels), 1.2 + 0.32 * tallest), squeeze=False
    )
    for ax, (label, rows) in zip(axes[0], panels, strict=True):
        names = [r.case.label for r in rows]
        ratios = [r.ratios[METRICS[r.case.kind][0].key] for r in rows]
        medians = [statistics.median(v) for v in ratios]
        spans = [
            [m - min(v) for m, v in zip(medians, ratios, strict=True)],
            [max(v) - m for m, v in zip(medians, ratios, strict=True)],
        ]
        met = [
            r.case.target is None or r.case.target.met(m)
            for r, m in zip(rows, medians, strict=True)
        ]
        ax.barh(  # from 1.0 (parity) to the median, on a log scale: 0.5 is as far as 2
            range(len(rows)),
            [m - 1.0 for m in medians],
            left=1.0,
            xerr=spans,
            capsize=2,
            color=["#4c72b0" if ok else "#dd8452" for ok in met],
        )
        for i, r in enumerate(rows):
            if r.case.target is not None:
                ax.plot([r.case.target.value] * 2, [i - 0.4, i + 0.4], color="black", lw=1)
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
        ax.set_yticks(range(len(rows)), names, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(label, fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    figure.suptitle(
        f"{title}\n(bars: median of rounds, whiskers: min-max; black: target; "
        "orange: target not met)",
        fontsize=8,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)


def heading(subject: str, reference: str, rounds: int, quick: bool) -> str:
    sub, ref = impl_labels(subject, reference)
    note = " — **quick run: smoke test only, not figures**" if quick else ""
    return f"### {sub} vs {ref}: {rounds} interleaved round{'s' * (rounds > 1)}{note}"


def replot(saved: str, path: str) -> None:
    """Draw a run saved with ``--save`` again, without measuring anything."""
    data = json.loads(Path(saved).read_text())
    by_name = {case.name: case for case in CASES}
    results = [
        CaseResult(by_name[c["case"]], c["trials"], c["ratios"], c["error"]) for c in data["cases"]
    ]
    names = list(data["impls"])  # one name for an A/A run
    subject, reference = data.get("impls_order", [names[0], names[-1]])
    rounds = max(len(r.trials["subject"]) for r in results)
    quick = "--quick" in data["command"]
    condition = Condition.from_dict(data["condition"])
    title = heading(subject, reference, rounds, quick).removeprefix("### ").replace("**", "")
    plot(results, path, subject, reference, f"{title}\n{condition.summary()}")


def select(patterns: str | None) -> list[Case]:
    if not patterns:
        return list(CASES)
    chosen = []
    for pattern in (p.strip() for p in patterns.split(",") if p.strip()):
        matched = [c for c in CASES if fnmatch.fnmatchcase(c.name, pattern)]
        if not matched:
            names = ", ".join(c.name for c in CASES)
            raise SystemExit(f"error: no case matches {pattern!r}; cases: {names}")
        chosen += [c for c in matched if c not in chosen]
    return [c for c in CASES if c in chosen]  # in table order


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="cases: " + ", ".join(c.name for c in CASES),
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds per case (default 5)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"1/{QUICK_DIVISOR} of the messages per trial: a smoke run, not for figures",
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiply every case's count (default 1)"
    )
    parser.add_argument(
        "--cases", help="comma-separated case names or glob patterns (default: all)"
    )
    parser.add_argument(
        "--impls",
        default="brokerless,zmq",
        help="subject,reference modules (default brokerless,zmq); ratios are subject/reference",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds before a trial is killed (120)"
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="run N CPU-bound processes beside the benchmark for its whole length, the same "
        "for both implementations (default 0: no load added; --busy 1 is the 'one CPU busy' "
        "condition)",
    )
    parser.add_argument("--save", metavar="FILE", help="also write every trial's result as JSON")
    parser.add_argument(
        "--plot", metavar="FILE.png", help="also draw the ratios per case (needs matplotlib)"
    )
    parser.add_argument(
        "--replot",
        metavar="SAVED.json",
        help="measure nothing: draw a run saved with --save into --plot's file",
    )
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)

    if args.list:
        for case in CASES:
            print(f"{case.name:22} {case.label} ({case.count:,} per trial)")
        return 0
    impls = [name.strip() for name in args.impls.split(",")]
    if len(impls) != 2 or not all(impls):
        parser.error("--impls takes two module names, subject,reference")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.busy < 0:
        parser.error("--busy must be 0 or more")
    subject, reference = impls
    cases = select(args.cases)
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (checked now, not after minutes of trials)
        except ImportError:
            parser.error("--plot needs matplotlib: pip install matplotlib (or '.[bench]')")
    if args.replot:
        if not args.plot:
            parser.error("--replot needs --plot FILE.png")
        replot(args.replot, args.plot)
        return 0

    described: dict[str, dict[str, str]] = {}
    for name in dict.fromkeys(impls):
        try:
            described[name] = describe(load_impl(name))
        except ImplError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    header = environment(described)
    condition = Condition(args.busy, load_average())
    for line in header + condition.lines():
        log(line)

    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-") as tmp, busy(args.busy):
            for number, case in enumerate(cases, 1):
                log(f"case {number}/{len(cases)}: {case.name} ({case.label})")
                scale = args.scale / (QUICK_DIVISOR if args.quick else 1)
                count = max(2, round(case.count * scale))
                results.append(
                    run_case(case, subject, reference, args.rounds, count, args.timeout, tmp)
                )
            condition.load_at_end = load_average()  # with the busy processes still running
    except BusyProcessDied as exc:
        log(f"error: {exc}")
        return 2
    header += condition.lines()

    lines = [
        heading(subject, reference, args.rounds, args.quick),
        "",
        *header,
        "",
        *report(results, subject, reference, args.rounds),
    ]
    print("\n".join(lines), flush=True)

    if args.save:
        data = {
            "command": sys.orig_argv,
            "environment": header,
            "condition": condition.as_dict(),
            "impls": described,
            "impls_order": [subject, reference],
            "cases": [
                {"case": r.case.name, "error": r.error, "trials": r.trials, "ratios": r.ratios}
                for r in results
            ],
        }
        Path(args.save).write_text(json.dumps(data, indent=1) + "\n")
    if args.plot:
        title = lines[0].removeprefix("### ").replace("**", "")
        plot(results, args.plot, subject, reference, f"{title}\n{condition.summary()}")
        log(f"plot: {args.plot}")
    return 1 if any(r.error for r in results) else 0


#: The exit status when the reader of stdout went away (``| head``): 128 + SIGPIPE, as a shell
#: reports a program that SIGPIPE ended, and as the ``brokerless`` command's own exit.
BROKEN_PIPE = 141

if __name__ == "__main__":
    try:
        status = main()
        sys.stdout.flush()  # (a reader gone away shows here, not as the interpreter exits)
    except KeyboardInterrupt:  # the running trial's processes were killed (run_trial)
        log("interrupted")
        sys.exit(130)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush to fail
        sys.exit(BROKEN_PIPE)
    sys.exit(status)
