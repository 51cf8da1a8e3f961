"""Run pyzmq 27.3.0's ``examples/`` against pyzmq and against brokerless (``make pyzmq-examples``).

Every example program is listed: either ``RECIPES`` says how to drive it non-interactively, or
``NOT_DRIVEN`` says why it is not (Cython, MongoDB, draft API, not a program).
A recipe starts the example (and the peers it needs, such as a publisher for a subscriber),
on one implementation at a time — through ``python -m brokerless.compat.as_zmq`` for
brokerless — and passes when the example's output shows the recipe's pattern (and, for one that
ends by itself, when it exits with status 0 within the timeout). Servers that print nothing
useful get a ``driver``: a few lines on the real pyzmq that talk to them and must exit 0, so
only the example itself runs on the implementation under test. Examples that need files made
by another (the security examples' certificates) run it first as ``setup``; the few whose own
code races libzmq's timing (they fail now and then on pyzmq too) get more than one attempt.

The examples bind fixed ports (5555, 5556, 8888, ...), so in one network namespace they run
one at a time; when ``unshare -n`` is allowed (root), the run moves into a private network
namespace where those ports clash with nothing else on the machine, and ``--jobs N`` runs N
examples at once, each in a namespace of its own (examples sharing a set-up, which writes files
next to them, run one after another in one namespace).

``FAILS_ON_PYZMQ`` and ``NEEDS_BUFFER_PROTOCOL`` name the driven examples that cannot pass on
brokerless here for a reason outside it (tests/test_pyzmq_examples.py does not collect them).

    python tools/pyzmq_examples.py [--only asyncio/coroutines.py ...] [--sides brokerless]
                                   [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyzmq_sdist
from pyzmq_suite import normalise

#: A DEALER on the real pyzmq that sends to the ROUTER echo servers and checks the echo.
ECHO_CLIENT = """
import zmq
s = zmq.Context().socket(zmq.DEALER)
s.connect("tcp://127.0.0.1:5555")
s.rcvtimeo = 20000
s.send_multipart([b"hello", b"echo"])
assert s.recv_multipart() == [b"hello", b"echo"]
"""

#: An HTTP request to eventloop/asyncweb.py, which answers it with its ZMQ worker's reply.
WEB_CLIENT = """
import time, urllib.request
deadline = time.monotonic() + 25
while True:
    try:
        body = urllib.request.urlopen("http://127.0.0.1:8888/", timeout=20).read()
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)  # the server is not listening yet
assert b"to you too" in body, body
"""


@dataclass(frozen=True)
class Recipe:
    """How to drive one example program."""

    #: The example's file and arguments, relative to ``examples/``.
    argv: tuple[str, ...]
    #: A pattern (re.search) its output shows once it worked.
    expect: str
    #: It ends by itself (status 0 required); otherwise it is stopped once ``expect`` shows.
    ends: bool = True
    #: Other examples started with it, on the same implementation.
    peers: tuple[tuple[str, ...], ...] = ()
    #: Python code run on the real pyzmq beside it; must exit 0.
    driver: str | None = None
    #: Examples run to completion (status 0) before it, on the same implementation.
    setup: tuple[tuple[str, ...], ...] = ()
    timeout: float = 40.0
    #: Runs allowed for an example whose outcome rests on a race in its own code, which it
    #: also loses on pyzmq; it passes when one run passes.
    attempts: int = 1


#: stonehouse and the ironhouses read the certificates generate_certificates.py writes.
_CERTIFICATES = (("security/generate_certificates.py",),)


RECIPES: list[Recipe] = [
    Recipe(("asyncio/coroutines.py",), r"recvd \[b'", ends=False),
    Recipe(
        ("asyncio/helloworld_pubsub_dealerrouter.py",),
        r"(?s)(?=.*message received world)(?=.*Changed language)",
        ends=False,
    ),
    Recipe(("asyncio/router_router.py",), r"(?s)romeo received.*|sierra received"),
    Recipe(("asyncio/tornado_asyncio.py",), r"b'Hello'", ends=False),
    Recipe(("device/device.py",), r"Consumer done"),
    Recipe(("eventloop/asyncweb.py",), r"finishing with", ends=False, driver=WEB_CLIENT),
    Recipe(("eventloop/coroutines.py",), r"recvd \[b'", ends=False),
    Recipe(("eventloop/echo.py",), r"hello", ends=False, driver=ECHO_CLIENT),
    Recipe(("eventloop/echofuture.py",), r"", ends=False, driver=ECHO_CLIENT),
    Recipe(("eventloop/echostream.py",), r"hello", ends=False, driver=ECHO_CLIENT),
    Recipe(("gevent/poll.py",), r"10 messages received"),
    Recipe(("gevent/reqrep.py",), r"Received reply\s+9"),
    Recipe(("gevent/simple.py",), r"exiting\."),
    Recipe(
        ("heartbeat/heartbeater.py",),
        r"got new heart",
        ends=False,
        peers=(("heartbeat/heart.py",),),
    ),
    Recipe(("heartbeat/ping.py",), r"ping 4: ", ends=False, peers=(("heartbeat/pong.py",),)),
    Recipe(("logger/zmqlogger.py",), r"Hello from \d+!", ends=False),
    Recipe(("monitoring/simple_monitor.py",), r"event monitor thread done!"),
    Recipe(("poll/pair.py",), r"Finished\."),
    Recipe(("poll/pubsub.py",), r"Finished\."),
    Recipe(("poll/reqrep.py",), r"Finished\."),
    Recipe(("pubsub/subscriber.py",), r"mean throughput", peers=(("pubsub/publisher.py",),)),
    Recipe(
        ("pubsub/topics_sub.py", "tcp://127.0.0.1:5556", "sports", "weather"),
        r"Topic: (sports|weather)",
        ends=False,
        peers=(("pubsub/topics_pub.py", "tcp://127.0.0.1:5556"),),
    ),
    Recipe(("recv_into/discard.py",), r"Exiting\.\.\."),
    Recipe(("recv_into/recv_into_array.py",), r"received \d+ bytes"),
    Recipe(("serialization/serialsocket.py",), r"(?s)\A(?!.*Failed).*Okay.*Okay.*Okay"),
    Recipe(("security/grasslands.py",), r"Grasslands test OK"),
    # strawhouse binds inproc://zeromq.zap.01 again just after closing the first handler's
    # socket, and libzmq frees an inproc name asynchronously: EADDRINUSE in 10 of 40 runs on
    # pyzmq here (none of 40 on brokerless).
    Recipe(("security/strawhouse.py",), r"Strawhouse test OK", attempts=5),
    # woodhouse sends its second message on a PUSH whose only peer has just closed, towards a
    # client that is refused: when the server sees the close first, the send blocks for ever
    # (13 of 100 runs on pyzmq here, 12 of 100 on brokerless).
    Recipe(("security/woodhouse.py",), r"Woodhouse test OK", timeout=10.0, attempts=5),
    Recipe(("security/stonehouse.py",), r"Stonehouse test OK", setup=_CERTIFICATES),
    Recipe(("security/ironhouse.py",), r"Ironhouse test OK", setup=_CERTIFICATES),
    Recipe(("security/asyncio-ironhouse.py",), r"Ironhouse test OK", setup=_CERTIFICATES),
    Recipe(("security/ioloop-ironhouse.py",), r"Ironhouse test OK", setup=_CERTIFICATES),
]

#: The security examples (pyzmq's examples/security/, one program each).
SECURITY_RECIPES = [r for r in RECIPES if r.argv[0].startswith("security/")]

#: Driven examples that fail on pyzmq 27.3.0 itself (measured by this tool): their own code
#: is out of date with the libraries they use.
FAILS_ON_PYZMQ: dict[str, str] = {
    "asyncio/helloworld_pubsub_dealerrouter.py": "asyncio.wait() given coroutines (Python 3.11 "
    "refuses them: TypeError)",
    "asyncio/router_router.py": "aiowire raises UnhandledException (Wire with no exception "
    "handler)",
    "gevent/poll.py": "sends a str with send() (TypeError: unicode not allowed) and hangs",
    "gevent/reqrep.py": "exits 0 without printing its replies",
    "heartbeat/heartbeater.py": "sends a str with send_multipart() (TypeError) and hangs",
}

#: Driven examples that need a Frame to export the buffer protocol (``numpy.frombuffer(frame)``),
#: which a pure-Python class can only do from Python 3.12 (``__buffer__``, PEP 688).
NEEDS_BUFFER_PROTOCOL: dict[str, str] = {
    "serialization/serialsocket.py": "numpy.frombuffer(frame) needs Frame.__buffer__ "
    "(Python >= 3.12, PEP 688)",
}

#: Example files not driven, by category: why.
NOT_DRIVEN: dict[str, tuple[str, str]] = {
    "cython/example.py": ("cython", "needs Cython and pyzmq's C API (libzmq's zmq.h)"),
    "cython/setup.py": ("cython", "builds the Cython example"),
    "mongodb/client.py": ("mongodb", "needs a MongoDB server"),
    "mongodb/controller.py": ("mongodb", "needs a MongoDB server"),
    "draft/client-server.py": (
        "draft",
        "libzmq's draft API (CLIENT/SERVER); pyzmq's wheel lacks it",
    ),
    "draft/radio-dish.py": (
        "draft",
        "libzmq's draft API (RADIO/DISH, udp); pyzmq's wheel lacks it",
    ),
    "monitoring/zmq_monitor_class.py": ("not a program", "a module of helpers with no main"),
    "win32-interrupt/display.py": ("windows", "Ctrl-C on Windows; half of a chat with no peer"),
}


def _error_line(output: str) -> str:
    """The exception line of the last traceback printed, else the last line."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Exit)\b", line)]
    return errors[-1] if errors else (lines[-1] if lines else "no output")


def _start(argv: tuple[str, ...], side: str, examples: Path, log: Path) -> subprocess.Popen:
    launcher = ["-m", "brokerless.compat.as_zmq"] if side == "brokerless" else []
    script = examples / argv[0]
    with log.open("w") as output:
        return subprocess.Popen(
            [sys.executable, *launcher, script.name, *argv[1:]],
            cwd=script.parent,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _run_setup(recipe: Recipe, side: str, root: Path, logs: Path, stem: str) -> str | None:
    """Run the recipe's set-up examples one after another; why one failed, or None."""
    for i, argv in enumerate(recipe.setup):
        log = logs / f"{stem}.setup{i}.log"
        proc = _start(argv, side, root / "examples", log)
        try:
            status = proc.wait(timeout=recipe.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return f"setup {argv[0]} timed out after {recipe.timeout:.0f} s"
        if status != 0:
            return (
                f"setup {argv[0]} exited {status}: {_error_line(log.read_text(errors='replace'))}"
            )
    return None


def run_recipe(recipe: Recipe, side: str, root: Path) -> dict:
    """Drive one example on one side, up to ``recipe.attempts`` times until it passes;
    {"passed": bool, "reason": str, "seconds": float, "attempts": int}, of the last run."""
    attempt = 0
    while True:
        attempt += 1
        result = _run_once(recipe, side, root)
        if result["passed"] or attempt == recipe.attempts:
            return {**result, "attempts": attempt}


def _run_once(recipe: Recipe, side: str, root: Path) -> dict:
    """Drive one example on one side once; {"passed": bool, "reason": str, "seconds": float}."""
    logs = root / "logs" / "examples"
    logs.mkdir(parents=True, exist_ok=True)
    stem = recipe.argv[0].replace("/", "__")
    log = logs / f"{stem}.log"
    failed_setup = _run_setup(recipe, side, root, logs, stem)
    if failed_setup:
        return {"passed": False, "reason": failed_setup, "seconds": 0.0}
    procs = [
        _start(peer, side, root / "examples", logs / f"{stem}.peer{i}.log")
        for i, peer in enumerate(recipe.peers)
    ]
    example = _start(recipe.argv, side, root / "examples", log)
    procs.append(example)
    driver = None
    if recipe.driver:
        driver = subprocess.Popen(
            [sys.executable, "-c", recipe.driver],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        procs.append(driver)
    started = time.monotonic()
    reason = f"timed out after {recipe.timeout:.0f} s"
    passed = False
    try:
        while time.monotonic() - started < recipe.timeout:
            output = log.read_text(errors="replace")
            shown = re.search(recipe.expect, output) is not None
            status = example.poll()
            if driver is not None and driver.poll() not in (None, 0):
                reason = f"driver failed: {_error_line(driver.communicate()[0])}"
                break
            if status is not None and (status != 0 or not recipe.ends or not shown):
                why = _error_line(output) if status != 0 else "exited without the expected output"
                reason = f"exited {status}: {why}"
                break
            driver_done = driver is None or driver.poll() == 0
            if shown and driver_done and (status == 0 or not recipe.ends):
                passed, reason = True, ""
                break
            time.sleep(0.2)  # polling child processes' output; nothing to wait on
    finally:
        peer_status = [proc.poll() for proc in procs[: len(recipe.peers)]]
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    if not passed and reason.startswith("timed out"):
        reason += f"; last output: {_error_line(log.read_text(errors='replace'))}"
        for i, (peer, status) in enumerate(zip(recipe.peers, peer_status, strict=True)):
            if status not in (None, 0):
                peer_log = (logs / f"{stem}.peer{i}.log").read_text(errors="replace")
                reason += f"; peer {peer[0]} exited {status}: {_error_line(peer_log)}"
    return {"passed": passed, "reason": reason, "seconds": round(time.monotonic() - started, 1)}


def _private_network() -> None:
    """Re-run this program inside a new network namespace, when the system allows it."""
    if os.environ.get("PYZMQ_EXAMPLES_NETNS"):
        return
    if not _private_network_allowed():
        print("unshare -n is not allowed here: the examples use the machine's own ports")
        return
    os.environ["PYZMQ_EXAMPLES_NETNS"] = "1"
    script = 'ip link set lo up && exec "$0" "$@"'
    os.execvp("unshare", ["unshare", "-n", "sh", "-c", script, sys.executable, *sys.argv])


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.py"))


def markdown(results: dict[str, dict[str, dict]], undriven: dict[str, tuple[str, str]]) -> str:
    out = [
        f"# pyzmq {pyzmq_sdist.PYZMQ_VERSION}'s examples on brokerless",
        "",
        "| example | pyzmq | brokerless | why brokerless fails |",
        "|---|---|---|---|",
    ]
    for name, sides in results.items():
        mark = {True: "pass", False: "FAIL"}
        out.append(
            f"| {name} | {mark[sides['pyzmq']['passed']]} | {mark[sides['brokerless']['passed']]}"
            f" | {sides['brokerless']['reason'].replace('|', '/')[:160]} |"
        )
    runs_on_pyzmq = [n for n, s in results.items() if s["pyzmq"]["passed"]]
    on_both = [n for n in runs_on_pyzmq if results[n]["brokerless"]["passed"]]
    out += [
        "",
        f"brokerless runs {len(on_both)} of the {len(runs_on_pyzmq)} driven examples "
        "that run on pyzmq.",
        "",
        "## Why examples fail on brokerless",
        "",
    ]
    causes: dict[str, list[str]] = defaultdict(list)
    for name in runs_on_pyzmq:
        if not results[name]["brokerless"]["passed"]:
            causes[normalise(results[name]["brokerless"]["reason"])].append(name)
    for why, names in sorted(causes.items(), key=lambda item: (-len(item[1]), item[0])):
        out.append(f"- {len(names)} x {why.replace('|', '/')}: {', '.join(names)}")
    failing_on_pyzmq = [n for n, s in results.items() if not s["pyzmq"]["passed"]]
    if failing_on_pyzmq:
        out += ["", "## Failing on pyzmq itself here (not counted)", ""]
        out += [f"- {n}: {results[n]['pyzmq']['reason']}" for n in failing_on_pyzmq]
    out += ["", "## Not driven", ""]
    out += [f"- {name} ({category}): {why}" for name, (category, why) in undriven.items()]
    return "\n".join(out) + "\n"


def _private_network_allowed() -> bool:
    if os.environ.get("PYZMQ_EXAMPLES_NETNS") or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    return probe.returncode == 0


def _print_result(name: str, side: str, result: dict) -> None:
    print(
        f"{name:44} {side:10} {'pass' if result['passed'] else 'FAIL'}"
        f" {result['seconds']:5.1f} s  {result['reason']}"
        + (f" (run {result['attempts']})" if result["attempts"] > 1 else ""),
        flush=True,
    )


def _run_here(recipes: list[Recipe], sides: list[str], roots: dict[str, Path]) -> dict:
    """Run ``recipes`` one after another in this process's network namespace."""
    results: dict[str, dict[str, dict]] = {}
    for recipe in recipes:
        results[recipe.argv[0]] = {}
        for side in sides:
            result = results[recipe.argv[0]][side] = run_recipe(recipe, side, roots[side])
            _print_result(recipe.argv[0], side, result)
    return results


def _run_in_namespaces(recipes: list[Recipe], sides: list[str], jobs: int, out: Path) -> dict:
    """Run ``recipes`` ``jobs`` at a time, each group (the recipes sharing a set-up) in a child
    run of this tool, which moves into a network namespace of its own."""
    groups: dict[tuple, list[Recipe]] = defaultdict(list)
    for recipe in recipes:
        groups[recipe.setup or recipe.argv].append(recipe)

    def child(group: list[Recipe]) -> dict:
        part = out / "parts" / group[0].argv[0].replace("/", "__")
        argv = ["--only", *(r.argv[0] for r in group), "--sides", *sides, "--out", str(part)]
        proc = subprocess.run(
            [sys.executable, __file__, *argv], capture_output=True, text=True, check=False
        )
        print(proc.stdout, end="", flush=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr}")
        return json.loads((part / "pyzmq_examples.json").read_text())["results"]

    results: dict[str, dict[str, dict]] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for part in pool.map(child, groups.values()):
            results.update(part)
    return {r.argv[0]: results[r.argv[0]] for r in recipes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="example files to run (default: all driven)")
    parser.add_argument(
        "--sides", nargs="+", choices=pyzmq_sdist.SIDES, default=list(pyzmq_sdist.SIDES)
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="examples at once (each in a network namespace)"
    )
    parser.add_argument("--out", type=Path, default=pyzmq_sdist.CACHE / "report")
    args = parser.parse_args(argv)
    roots = pyzmq_sdist.prepare()
    parallel = args.jobs > 1 and _private_network_allowed()
    if not parallel:
        _private_network()

    examples = listing(roots["pyzmq"] / "examples")
    driven = {recipe.argv[0] for recipe in RECIPES}
    driven |= {other[0] for recipe in RECIPES for other in (*recipe.peers, *recipe.setup)}
    undriven = {name: NOT_DRIVEN.get(name, ("no recipe", "not driven yet")) for name in examples}
    undriven = {name: why for name, why in undriven.items() if name not in driven}
    recipes = [r for r in RECIPES if not args.only or r.argv[0] in args.only]

    if parallel:
        results = _run_in_namespaces(recipes, args.sides, args.jobs, args.out)
    else:
        results = _run_here(recipes, args.sides, roots)

    args.out.mkdir(parents=True, exist_ok=True)
    if set(args.sides) == set(pyzmq_sdist.SIDES):  # the comparison needs both
        (args.out / "pyzmq_examples.md").write_text(markdown(results, undriven))
    data = {"results": results, "not_driven": undriven}
    (args.out / "pyzmq_examples.json").write_text(json.dumps(data, indent=1))
    print(f"\nreport: {args.out / 'pyzmq_examples.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
