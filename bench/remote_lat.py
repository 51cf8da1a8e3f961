"""REQ/REP latency between two processes, measuring side: like libzmq's perf/remote_lat.

Connects a REQ socket to ``--endpoint``, where ``bench/local_lat.py`` (run with the same
arguments) echoes, and does ``--warmup`` untimed round trips, then ``--count`` timed ones with
messages of ``--size`` bytes.  Every round trip is timed on its own (``time.perf_counter_ns``
around ``send`` + ``recv``) for the percentiles, and the whole timed loop once for the mean.
Then it tells the echoing side, on the control channel (``bench/_control.py``), that it is done.

Reported: mean one-way latency = loop time / count / 2 (what libzmq's perf tools call latency),
and the p50 / p99 of the individually timed round trips (full RTT, not halved).  Messages are
sent and received with ``copy=True`` (pyzmq's default).

    python bench/local_lat.py --impl brokerless --endpoint ipc:///tmp/lat --size 1024 &
    python bench/remote_lat.py --impl brokerless --endpoint ipc:///tmp/lat --size 1024
"""

from __future__ import annotations

import argparse
import statistics
from types import ModuleType
from typing import Any

import _control
from _harness import describe, emit, load_impl_or_exit, ping_pong, use_curve
from inproc_lat import percentile
from local_lat import add_common_arguments

REQUIRED = ("Context", "REQ")


def run(
    impl: ModuleType,
    endpoint: str,
    size: int,
    count: int,
    warmup: int = 1000,
    control: str | None = None,
    curve: bool = False,
) -> dict[str, Any]:
    if count < 1:
        raise ValueError("--count must be at least 1")
    channel = _control.connect(endpoint, control)
    ctx = impl.Context()
    req = ctx.socket(impl.REQ)
    if curve:
        use_curve(impl, req, server=False)
    req.connect(endpoint)

    start, stop, rtts, reply = ping_pong(req, size, count, warmup)

    channel.send({"done": True})
    channel.close()
    if len(reply) != size:
        raise SystemExit(f"error: the last reply had {len(reply)} bytes, not {size}")
    req.close()
    ctx.term()

    rtts.sort()
    elapsed = (stop - start) / 1e9
    return {
        "tool": "lat",
        "transport": endpoint.partition("://")[0],
        "endpoint": endpoint,
        "size": size,
        "count": count,
        "warmup": warmup,
        "elapsed_s": elapsed,
        "latency_us": elapsed / count / 2 * 1e6,
        "rtt_p50_us": percentile(rtts, 50) / 1e3,
        "rtt_p99_us": percentile(rtts, 99) / 1e3,
        "rtt_mean_us": statistics.fmean(rtts) / 1e3,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    args = parser.parse_args(argv)

    impl = load_impl_or_exit(args.impl, REQUIRED)
    result = describe(impl) | run(
        impl, args.endpoint, args.size, args.count, args.warmup, args.control, args.curve
    )
    emit(
        result,
        args.json,
        f"{result['impl']} {result['version']}: {args.endpoint} REQ/REP, {args.count} round "
        f"trips of {args.size} B: one-way latency {result['latency_us']:.2f} us (mean), "
        f"RTT p50 {result['rtt_p50_us']:.2f} us, p99 {result['rtt_p99_us']:.2f} us",
    )


if __name__ == "__main__":
    main()
