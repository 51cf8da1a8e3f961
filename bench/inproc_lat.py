"""inproc REQ/REP round-trip latency between two threads of one process, in the manner of
libzmq's perf/local_lat + remote_lat.

One Context; an echo thread creates a REP socket, binds it on an inproc endpoint and sends back
every message it receives; the main thread connects a REQ socket and does ``--warmup`` untimed
round trips, then ``--count`` timed ones with messages of ``--size`` bytes.  Every round trip is
timed on its own (``time.perf_counter_ns`` around ``send`` + ``recv``) for the percentiles, and
the whole timed loop once for the mean.

Reported: mean one-way latency = loop time / count / 2 (what libzmq's perf tools call latency),
and the p50 / p99 of the individually timed round trips (full RTT, not halved).

Each socket is only ever used by the thread that created it; messages are sent and received with
``copy=True`` (pyzmq's default).

    python bench/inproc_lat.py --impl zmq --size 1 --count 40000
    python bench/inproc_lat.py --impl brokerless --size 1024 --json
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import traceback
from types import ModuleType
from typing import Any

from _harness import describe, emit, load_impl_or_exit, ping_pong

REQUIRED = ("Context", "REQ", "REP")


def run(impl: ModuleType, size: int, count: int, warmup: int = 1000) -> dict[str, Any]:
    """Do ``warmup`` + ``count`` REQ/REP round trips of ``size`` bytes between two threads."""
    if count < 1:
        raise ValueError("--count must be at least 1")
    endpoint = f"inproc://bench-lat-{os.getpid()}"
    ctx = impl.Context()
    bound = threading.Event()
    total = warmup + count

    def echo() -> None:
        try:
            rep = ctx.socket(impl.REP)
            rep.bind(endpoint)
            bound.set()
            recv, send = rep.recv, rep.send
            for _ in range(total):
                send(recv())
            rep.close()
        except BaseException:
            traceback.print_exc()
            os._exit(1)  # the requester would otherwise wait forever

    thread = threading.Thread(target=echo, name="bench-echo", daemon=True)
    thread.start()
    if not bound.wait(30):
        raise SystemExit("error: the echo thread did not bind within 30 s")
    req = ctx.socket(impl.REQ)
    req.connect(endpoint)

    start, stop, rtts, reply = ping_pong(req, size, count, warmup)

    if len(reply) != size:
        raise SystemExit(f"error: the last reply had {len(reply)} bytes, not {size}")
    thread.join()
    req.close()
    ctx.term()

    rtts.sort()
    elapsed = (stop - start) / 1e9
    return {
        "tool": "lat",
        "transport": "inproc",
        "size": size,
        "count": count,
        "warmup": warmup,
        "elapsed_s": elapsed,
        "latency_us": elapsed / count / 2 * 1e6,
        "rtt_p50_us": percentile(rtts, 50) / 1e3,
        "rtt_p99_us": percentile(rtts, 99) / 1e3,
        "rtt_mean_us": statistics.fmean(rtts) / 1e3,
    }


def percentile(ordered: list[int], pct: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    rank = max(1, -(-len(ordered) * pct // 100))  # ceil(n * pct / 100), at least 1
    return float(ordered[int(rank) - 1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", default="zmq", help="module to benchmark: zmq or brokerless")
    parser.add_argument("--size", type=int, default=1, help="bytes per message (default 1)")
    parser.add_argument("--count", type=int, default=40_000, help="round trips (default 40000)")
    parser.add_argument(
        "--warmup", type=int, default=1000, help="untimed round trips first (default 1000)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line (for compare.py)")
    args = parser.parse_args(argv)

    impl = load_impl_or_exit(args.impl, REQUIRED)
    result = describe(impl) | run(impl, args.size, args.count, args.warmup)
    emit(
        result,
        args.json,
        f"{result['impl']} {result['version']}: inproc REQ/REP, {args.count} round trips of "
        f"{args.size} B: one-way latency {result['latency_us']:.2f} us (mean), "
        f"RTT p50 {result['rtt_p50_us']:.2f} us, p99 {result['rtt_p99_us']:.2f} us",
    )


if __name__ == "__main__":
    main()
