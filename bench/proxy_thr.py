"""PUSH -> proxy -> PULL throughput: brokerless's ``proxy`` against pyzmq's (libzmq's C proxy).

Three processes per trial, each a fresh interpreter: the *proxy* binds a PULL frontend and a
PUSH backend on tcp and runs ``proxy(frontend, backend)`` of the implementation under test; the
*receiver* connects a PULL to the backend and times ``--count`` messages from the first to the
last (rate = (count - 1) / elapsed, like libzmq's perf/local_thr); the *sender* connects a PUSH
to the frontend and sends them.  Sender and receiver use ``--peers`` (pyzmq by default), the
same in every trial, so the proxy is the only thing that changes.  The sender keeps its socket
open until the receiver has everything (no tail lost to an early close); then the proxy is
stopped.

Trials alternate the order of the implementations round by round (round 1: pyzmq then
brokerless, round 2 the other way, ...), and the report gives each implementation's msg/s per
trial, median and min-max, and the CPU time the proxy process used per message (all its threads,
from /proc, start-up excluded): a figure less at the mercy of the machine's load than the rate,
since a busy proxy competes with the sender and receiver for the same CPUs.  The load average
before and after is printed too.

    python bench/proxy_thr.py                          # 5 rounds, 100 B, 200k messages
    python bench/proxy_thr.py --rounds 3 --size 1024 --count 100000
    python bench/proxy_thr.py --peers brokerless       # brokerless sender and receiver too
    python bench/proxy_thr.py --multipart              # 2-frame messages (2 x size)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from _harness import load_impl_or_exit, process_cpu_seconds, receive_timed

HERE = Path(__file__).resolve()
DISPLAY = {"zmq": "pyzmq"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- the three roles (each runs in its own process) ---------------------------------------------


def role_proxy(impl_name: str, front: str, back: str) -> None:
    impl = load_impl_or_exit(impl_name, ("Context", "PULL", "PUSH", "proxy"))
    ctx = impl.Context()
    frontend = ctx.socket(impl.PULL)
    frontend.bind(front)
    backend = ctx.socket(impl.PUSH)
    backend.bind(back)
    print("ready", flush=True)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started in background
    try:
        impl.proxy(frontend, backend)
    except KeyboardInterrupt:
        pass


def role_sender(impl_name: str, front: str, size: int, count: int, frames: int) -> None:
    impl = load_impl_or_exit(impl_name, ("Context", "PUSH"))
    ctx = impl.Context()
    push = ctx.socket(impl.PUSH)
    push.connect(front)
    if frames == 1:
        send, payload = push.send, b"\0" * size
        for _ in range(count):
            send(payload)
    else:
        send_multipart, parts = push.send_multipart, [b"\0" * size] * frames
        for _ in range(count):
            send_multipart(parts)
    sys.stdin.read()  # the orchestrator closes our stdin once the receiver has everything
    push.close(linger=0)
    ctx.term()


def role_receiver(impl_name: str, back: str, size: int, count: int, frames: int) -> None:
    impl = load_impl_or_exit(impl_name, ("Context", "PULL"))
    ctx = impl.Context()
    pull = ctx.socket(impl.PULL)
    pull.connect(back)
    start, stop, last = receive_timed(pull, count, frames, copy=True)
    if [len(part) for part in last] != [size] * frames:
        raise SystemExit(f"the last message has parts of {[len(p) for p in last]} bytes")
    elapsed = (stop - start) / 1e9
    print(json.dumps({"msg_per_s": (count - 1) / elapsed, "elapsed_s": elapsed}), flush=True)
    pull.close(linger=0)
    ctx.term()


# -- the orchestrator ---------------------------------------------------------------------------


def _spawn(*args: str, stdin: Any = subprocess.DEVNULL) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(HERE), *args], stdin=stdin, stdout=subprocess.PIPE, text=True
    )


def trial(proxy_impl: str, peers: str, size: int, count: int, frames: int) -> tuple[float, float]:
    """One run of the pipeline with ``proxy_impl``'s proxy: the receiver's msg/s, and the proxy
    process's CPU time per message (µs, every thread of it, start-up excluded)."""
    front = f"tcp://127.0.0.1:{_free_port()}"
    back = f"tcp://127.0.0.1:{_free_port()}"
    shape = ["--size", str(size), "--count", str(count), "--frames", str(frames)]
    proxy = _spawn("--role", "proxy", "--impl", proxy_impl, "--front", front, "--back", back)
    procs = [proxy]
    try:
        if proxy.stdout.readline() != "ready\n":
            raise SystemExit(f"the {proxy_impl} proxy did not start")
        cpu_at_start = process_cpu_seconds(proxy.pid)
        receiver = _spawn("--role", "receiver", "--impl", peers, "--back", back, *shape)
        sender = _spawn(
            "--role", "sender", "--impl", peers, "--front", front, *shape, stdin=subprocess.PIPE
        )
        procs += [receiver, sender]
        out, _ = receiver.communicate(timeout=600)
        if receiver.returncode != 0:
            raise SystemExit(f"the receiver failed (exit {receiver.returncode})")
        cpu_us = (process_cpu_seconds(proxy.pid) - cpu_at_start) / count * 1e6
        sender.stdin.close()
        sender.wait(timeout=60)
        return json.loads(out.splitlines()[-1])["msg_per_s"], cpu_us
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT if proc is proxy else signal.SIGKILL)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=["proxy", "sender", "receiver"])
    parser.add_argument("--impl", default="brokerless", help="(roles) the implementation")
    parser.add_argument("--front")
    parser.add_argument("--back")
    parser.add_argument("--frames", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=100, help="bytes per frame (default 100)")
    parser.add_argument("--count", type=int, default=200_000, help="messages per trial")
    parser.add_argument("--multipart", action="store_true", help="2-frame messages")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--impls", default="zmq,brokerless", help="proxies compared")
    parser.add_argument("--peers", default="zmq", help="sender and receiver implementation")
    args = parser.parse_args()
    frames = 2 if args.multipart else args.frames

    if args.role == "proxy":
        return role_proxy(args.impl, args.front, args.back)
    if args.role == "sender":
        return role_sender(args.impl, args.front, args.size, args.count, frames)
    if args.role == "receiver":
        return role_receiver(args.impl, args.back, args.size, args.count, frames)

    impls = args.impls.split(",")
    rates: dict[str, list[float]] = {impl: [] for impl in impls}
    cpu: dict[str, list[float]] = {impl: [] for impl in impls}
    load_before = os.getloadavg()
    for round_no in range(args.rounds):
        order = impls if round_no % 2 == 0 else impls[::-1]
        for impl in order:
            rate, cpu_us = trial(impl, args.peers, args.size, args.count, frames)
            rates[impl].append(rate)
            cpu[impl].append(cpu_us)
            print(
                f"round {round_no + 1}: {DISPLAY.get(impl, impl)} proxy {rate:,.0f} msg/s, "
                f"{cpu_us:.2f} µs CPU per message",
                file=sys.stderr,
                flush=True,
            )
    load_after = os.getloadavg()

    shape = f"{frames} x {args.size} B" if frames > 1 else f"{args.size} B"
    print(f"`python bench/proxy_thr.py {' '.join(sys.argv[1:])}`".replace(" `", "`"))
    print()
    print(
        f"PUSH -> proxy -> PULL over tcp, {shape}, {args.count:,} messages, "
        f"{DISPLAY.get(args.peers, args.peers)} sender and receiver, {args.rounds} rounds; "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )
    print()
    print(
        "| proxy | msg/s, median | msg/s, min-max | proxy CPU µs/msg (min-max) | msg/s by trial |"
    )
    print("| --- | ---: | ---: | ---: | --- |")
    for impl, values in rates.items():
        used = cpu[impl]
        print(
            f"| {DISPLAY.get(impl, impl)} | {statistics.median(values):,.0f} | "
            f"{min(values):,.0f}-{max(values):,.0f} | "
            f"{statistics.median(used):.2f} ({min(used):.2f}-{max(used):.2f}) | "
            + ", ".join(f"{v:,.0f}" for v in values)
            + " |"
        )
    if len(impls) == 2:
        ratios = [b / a for a, b in zip(rates[impls[0]], rates[impls[1]], strict=True)]
        print()
        print(
            f"{DISPLAY.get(impls[1], impls[1])} / {DISPLAY.get(impls[0], impls[0])}: "
            f"median {statistics.median(ratios):.2f}, min-max {min(ratios):.2f}-{max(ratios):.2f}"
        )


if __name__ == "__main__":
    main()
