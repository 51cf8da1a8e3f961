"""Run pyzmq's own test suite, unmodified, on pyzmq and on brokerless (``make pyzmq-suite``).

Each test file of pyzmq 27.3.0's ``tests/`` runs twice, each time in a fresh pytest process:
once against the installed pyzmq (the baseline) and once through ``python -m
brokerless.compat.as_zmq``, where ``import zmq`` is brokerless. A per-test timeout (pytest-timeout;
pyzmq's unittest-style classes keep their own 60 s alarm) and a per-file timeout (the process
group is killed) bound what a hang costs. The ``pyzmq_suite_recorder`` plugin streams every
outcome to a file, so a killed run still tells what finished and which test hung.

Counting: a test counts for brokerless when it passes on both sides; skipped, xfailed, failed,
errored, hung and not-run all count as not passed, on both sides. A collection or conftest
failure loses every test that pyzmq collected in that file. The report (markdown and JSON)
gives per file brokerless's passes over pyzmq's, the total, what pyzmq skips here, and why
brokerless loses tests, grouped by the failure's first line.

    python tools/pyzmq_suite.py [--files test_x.py ...] [--reuse-baseline] [--jobs N]
    python tools/pyzmq_suite.py --readme   # README's section, from the last reports
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyzmq_readme
import pyzmq_sdist

TOOLS = Path(__file__).resolve().parent
PASSED = "passed"


@dataclass
class FileRun:
    """One test file run on one side: how the process ended and each test's outcome."""

    returncode: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    #: Why the whole file was lost (collection or conftest failure, crash before collecting).
    error: str | None = None
    #: nodeid → {"outcome": passed/failed/error/skipped/hung/crashed/not run, "reason": ...}
    tests: dict[str, dict[str, str]] = field(default_factory=dict)


def _command(side: str, test_file: str, args: argparse.Namespace) -> list[str]:
    launcher = ["-m", "brokerless.compat.as_zmq"] if side == "brokerless" else []
    stand_ins = ["-p", "pyzmq_suite_standins"] if side == "brokerless" and args.stand_ins else []
    return [
        sys.executable,
        *launcher,
        "-m",
        "pytest",
        f"tests/{test_file}",
        "-p",
        "pyzmq_suite_recorder",
        *stand_ins,
        "-p",
        "no:cacheprovider",
        f"--timeout={args.per_test_timeout}",
        "-q",
        "--color=no",
    ]


def _environment(side: str, record: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TOOLS), env.get("PYTHONPATH")]))
    env["PYZMQ_SUITE_RECORD"] = str(record)
    env.pop("ZMQ_TEST_TIMEOUT", None)  # pyzmq's conftest would pass it to signal.alarm as str
    if side == "brokerless":
        env["MYPYPATH"] = str(pyzmq_sdist.mypy_alias_dir())
    return env


def _last_error_line(output: str) -> str:
    """The line pytest marks with ``E`` last (the exception), else the last line printed."""
    lines = output.strip().splitlines()
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return errors[-1] if errors else (lines[-1] if lines else "no output")


def _outcomes(events: list[dict], run: FileRun) -> None:
    """Fill ``run.tests`` from the recorder's events."""
    collected = next((e["nodeids"] for e in events if e["event"] == "collected"), None)
    collect_errors = [e for e in events if e["event"] == "collect_error"]
    if collect_errors:
        run.error = f"collection error: {collect_errors[0]['reason']}"
    tests = run.tests
    for nodeid in collected or []:
        tests[nodeid] = {"outcome": "not run", "reason": "an earlier test hung or crashed"}
    for event in events:
        nodeid = event.get("nodeid")
        if event["event"] == "start":
            tests[nodeid] = {"outcome": "hung" if run.timed_out else "crashed", "reason": ""}
        elif event["event"] == "report":
            _merge_report(tests[nodeid], event)
    for outcome in tests.values():
        if outcome["outcome"] in ("hung", "crashed") and not outcome["reason"]:
            outcome["reason"] = (
                "the file hit its timeout while this test ran"
                if run.timed_out
                else f"pytest exited ({run.returncode}) while this test ran"
            )


def _merge_report(outcome: dict[str, str], event: dict) -> None:
    """Fold one phase's report in; a test passes when its teardown ends a clean run."""
    if outcome["outcome"] in ("failed", "error", "skipped"):
        return  # the first failure or skip decides
    when, result = event["when"], event["outcome"]
    if result == "failed":
        outcome["outcome"] = "failed" if when == "call" else "error"
        outcome["reason"] = event["reason"] if when == "call" else f"{when}: {event['reason']}"
    elif result == "skipped":
        outcome["outcome"], outcome["reason"] = "skipped", event["reason"]
    elif when == "teardown":
        outcome["outcome"], outcome["reason"] = PASSED, ""


def run_file(side: str, root: Path, test_file: str, args: argparse.Namespace) -> FileRun:
    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    name = f"{test_file}{'.stand-ins' if side == 'brokerless' and args.stand_ins else ''}"
    record, log = logs / f"{name}.jsonl", logs / f"{name}.log"
    record.unlink(missing_ok=True)
    run = FileRun()
    started = time.monotonic()
    with log.open("w") as output:
        proc = subprocess.Popen(
            _command(side, test_file, args),
            cwd=root,
            env=_environment(side, record),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            run.returncode = proc.wait(timeout=args.per_file_timeout)
        except subprocess.TimeoutExpired:
            run.timed_out = True
        finally:  # the file's process group, including anything it left running
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    run.seconds = round(time.monotonic() - started, 1)
    events = (
        [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    )
    _outcomes(events, run)
    if not any(e["event"] == "collected" for e in events) and run.error is None:
        run.error = f"nothing collected: {_last_error_line(log.read_text(errors='replace'))}"
    return run


def normalise(reason: str) -> str:
    """A failure's first line with what varies between tests (addresses, ports) blurred."""
    reason = re.sub(r"0x[0-9a-fA-F]+", "0x…", reason)
    reason = re.sub(r"(tcp://[\w.*]+):\d+", r"\1:…", reason)
    reason = re.sub(r"ipc://\S+", "ipc://…", reason)
    return reason[:200]


def _test_family(nodeid: str) -> str:
    """The class (``TestSocketGreen``) or parametrized function (``test_event_reprs[…]``) of a
    test: what a module defines only on pyzmq (classes for zmq.green, enum members)."""
    parts = nodeid.split("::")
    return parts[1] if len(parts) > 2 else parts[-1].split("[")[0] + "[…]"


def compare(test_file: str, pyzmq: FileRun, brokerless: FileRun) -> dict:
    """brokerless's outcome for each test pyzmq collected, with the reason it did not pass."""
    lost: dict[str, str] = {}
    passes = 0
    baseline = [n for n, o in pyzmq.tests.items() if o["outcome"] == PASSED]
    for nodeid in baseline:
        mine = brokerless.tests.get(nodeid)
        if mine is not None and mine["outcome"] == PASSED:
            passes += 1
        elif mine is not None:
            lost[nodeid] = f"{mine['outcome']}: {normalise(mine['reason'])}"
        elif brokerless.error:
            lost[nodeid] = f"file lost: {normalise(brokerless.error)}"
        elif brokerless.timed_out or brokerless.returncode not in (0, 1):
            lost[nodeid] = "not run: the file hung or crashed before this test"
        else:
            lost[nodeid] = f"not collected on brokerless: {_test_family(nodeid)}"
    extra = [n for n, o in brokerless.tests.items() if o["outcome"] == PASSED and n not in baseline]
    return {
        "file": test_file,
        "tests": len(pyzmq.tests),
        "pyzmq_passes": len(baseline),
        "brokerless_passes": passes,
        "brokerless_only_passes": extra,
        "lost": lost,
    }


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def markdown(rows: list[dict], runs: dict[str, dict[str, FileRun]], meta: dict) -> str:
    total_pyzmq = sum(r["pyzmq_passes"] for r in rows)
    total_mine = sum(r["brokerless_passes"] for r in rows)
    out = [
        f"# pyzmq {meta['pyzmq_version']}'s test suite on brokerless",
        "",
        f"brokerless {meta['brokerless_commit']}, {meta['date']}; per-test timeout "
        f"{meta['per_test_timeout']} s, per-file {meta['per_file_timeout']} s. A test counts "
        "for brokerless when it passes on both sides."
        + (
            " **Diagnostic run: stand-ins for the zmq modules pyzmq's test helpers import "
            "(tools/pyzmq_suite_standins.py); not the yardstick's figure.**"
            if meta["stand_ins"]
            else ""
        ),
        "",
        "| test file | tests | pyzmq passes | brokerless passes | % | brokerless |",
        "|---|--:|--:|--:|--:|---|",
    ]
    for row in rows:
        run = runs[row["file"]]["brokerless"]
        note = run.error or ("hung (file timeout)" if run.timed_out else "")
        mine, theirs = row["brokerless_passes"], row["pyzmq_passes"]
        out.append(
            f"| {row['file']} | {row['tests']} | {theirs} | {mine} | {_percent(mine, theirs)}"
            f" | {note.replace('|', '/')[:120]} |"
        )
    out.append(
        f"| **total** | {sum(r['tests'] for r in rows)} | {total_pyzmq} | {total_mine} | "
        f"**{_percent(total_mine, total_pyzmq)}** | |"
    )
    out += ["", "## Not passed on pyzmq itself here (not counted on either side)", ""]
    not_passed = Counter()
    for test_file, sides in runs.items():
        for outcome in sides["pyzmq"].tests.values():
            if outcome["outcome"] != PASSED:
                not_passed[f"{test_file}: {outcome['outcome']}: {outcome['reason'][:150]}"] += 1
        if sides["pyzmq"].error:
            not_passed[f"{test_file}: file lost: {sides['pyzmq'].error}"] += 1
    out += [f"- {count} x {why}" for why, count in sorted(not_passed.items())] or ["- none"]
    out += ["", "## Why brokerless loses pyzmq's passes (by first line of the failure)", ""]
    causes: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        for nodeid, why in row["lost"].items():
            causes[why].append(nodeid)
    for why, nodeids in sorted(causes.items(), key=lambda item: (-len(item[1]), item[0])):
        out.append(f"- {len(nodeids)} x {why.replace('|', '/')} (e.g. `{nodeids[0]}`)")
    extra = [n for row in rows for n in row["brokerless_only_passes"]]
    if extra:
        out += ["", f"Passing on brokerless but not on pyzmq here ({len(extra)}, not counted):"]
        out += [f"- `{nodeid}`" for nodeid in extra]
    return "\n".join(out) + "\n"


def _git_commit() -> str:
    result = subprocess.run(
        ["git", "describe", "--always", "--dirty"],
        cwd=pyzmq_sdist.REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", nargs="*", help="test files to run (default: all)")
    parser.add_argument("--per-test-timeout", type=float, default=30.0)
    parser.add_argument("--per-file-timeout", type=float, default=300.0)
    parser.add_argument("--jobs", type=int, default=1, help="test processes at once")
    parser.add_argument(
        "--reuse-baseline",
        action="store_true",
        help="take pyzmq's results from the last run instead of running pyzmq again",
    )
    parser.add_argument(
        "--stand-ins",
        action="store_true",
        help="diagnosis: stand in for the zmq modules pyzmq's test helpers import that "
        "brokerless lacks (tools/pyzmq_suite_standins.py), to see the failures behind them",
    )
    parser.add_argument("--out", type=Path, default=pyzmq_sdist.CACHE / "report")
    parser.add_argument(
        "--readme",
        action="store_true",
        help="print README's pyzmq compatibility section from the reports in --out; run nothing",
    )
    args = parser.parse_args(argv)
    if args.readme:
        print(pyzmq_readme.section(args.out), end="")
        return 0

    roots = pyzmq_sdist.prepare()
    available = sorted(p.name for p in (roots["pyzmq"] / "tests").glob("test_*.py"))
    files = args.files or available
    unknown = sorted(set(files) - set(available))
    if unknown:
        parser.error(f"not among pyzmq's test files: {', '.join(unknown)}")

    baseline_file = args.out / "pyzmq_baseline.json"
    baseline: dict[str, FileRun] = {}
    if args.reuse_baseline and baseline_file.exists():
        for name, run in json.loads(baseline_file.read_text()).items():
            baseline[name] = FileRun(**run)
    jobs = [
        (f, side)
        for f in files
        for side in pyzmq_sdist.SIDES
        if not (side == "pyzmq" and f in baseline)
    ]

    runs: dict[str, dict[str, FileRun]] = {f: {} for f in files}
    for f in files:
        if f in baseline:
            runs[f]["pyzmq"] = baseline[f]

    def one(job: tuple[str, str]) -> None:
        test_file, side = job
        run = runs[test_file][side] = run_file(side, roots[side], test_file, args)
        passes = sum(o["outcome"] == PASSED for o in run.tests.values())
        print(
            f"{test_file:28} {side:10} {passes:4} passed  {run.seconds:6.1f} s"
            f"{'  TIMED OUT' if run.timed_out else ''}  {run.error or ''}",
            flush=True,
        )

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(one, jobs))

    rows = [compare(f, runs[f]["pyzmq"], runs[f]["brokerless"]) for f in files]
    meta = {
        "pyzmq_version": pyzmq_sdist.PYZMQ_VERSION,
        "brokerless_commit": _git_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "per_test_timeout": args.per_test_timeout,
        "per_file_timeout": args.per_file_timeout,
        "stand_ins": args.stand_ins,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "pyzmq_suite_stand_ins" if args.stand_ins else "pyzmq_suite"
    report = args.out / f"{stem}.md"
    report.write_text(markdown(rows, runs, meta))
    data = {
        **meta,
        "rows": rows,
        "files": {
            f: {side: asdict(run) for side, run in sides.items()} for f, sides in runs.items()
        },
    }
    (args.out / f"{stem}.json").write_text(json.dumps(data, indent=1))
    known = json.loads(baseline_file.read_text()) if baseline_file.exists() else {}
    known.update({f: asdict(runs[f]["pyzmq"]) for f in files})
    baseline_file.write_text(json.dumps(known, indent=1))
    total_pyzmq = sum(r["pyzmq_passes"] for r in rows)
    total_mine = sum(r["brokerless_passes"] for r in rows)
    print(
        f"\nbrokerless passes {total_mine} of pyzmq's {total_pyzmq} passes "
        f"({_percent(total_mine, total_pyzmq)}); report: {report}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
