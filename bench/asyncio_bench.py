"""asyncio round trip and throughput, both ends in one event loop (``zmq.asyncio`` /
``brokerless.asyncio``), over tcp or ipc.

``--mode lat``: an echo task with a REP socket and a requester task with a REQ socket, both
``await``-ing every send and recv; ``--warmup`` untimed round trips, then ``--count`` timed
ones.  Reported like ``inproc_lat.py``: mean one-way latency (loop time / count / 2) and the
p50 / p99 of individually timed round trips.

``--mode thr``: a sender task ``await``-ing ``send`` on PUSH and a receiver task ``await``-ing
``recv`` on PULL; the receiver times from the first message to the last, like ``local_thr``.

The PULL/REP side binds ``--endpoint`` (default: a free tcp port on 127.0.0.1), the other
connects.  ``--loop uvloop`` runs on uvloop instead of asyncio's default loop.

    python bench/asyncio_bench.py --impl zmq --mode lat --count 5000
    python bench/asyncio_bench.py --impl brokerless --mode thr --size 100 --loop uvloop --json
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import time
from types import ModuleType
from typing import Any

from _harness import describe, emit, load_impl_or_exit
from inproc_lat import percentile

REQUIRED = ("Context", "REQ", "REP", "PUSH", "PULL")


def _bind(sock: Any, endpoint: str | None) -> str:
    if endpoint is None:
        port = sock.bind_to_random_port("tcp://127.0.0.1")
        return f"tcp://127.0.0.1:{port}"
    sock.bind(endpoint)
    return endpoint


async def latency(
    aio: ModuleType, impl: ModuleType, size: int, count: int, warmup: int, endpoint: str | None
) -> dict[str, Any]:
    ctx = aio.Context()
    rep, req = ctx.socket(impl.REP), ctx.socket(impl.REQ)
    req.connect(_bind(rep, endpoint))
    total = warmup + count

    async def echo() -> None:
        for _ in range(total):
            await rep.send(await rep.recv())

    echoer = asyncio.ensure_future(echo())
    payload = b"\0" * size
    for _ in range(warmup):
        await req.send(payload)
        await req.recv()
    clock = time.perf_counter_ns
    rtts = [0] * count
    start = clock()
    for i in range(count):
        t0 = clock()
        await req.send(payload)
        reply = await req.recv()
        rtts[i] = clock() - t0
    stop = clock()
    await echoer
    if len(reply) != size:
        raise SystemExit(f"error: the last reply had {len(reply)} bytes, not {size}")
    ctx.destroy(linger=0)
    rtts.sort()
    elapsed = (stop - start) / 1e9
    return {
        "tool": "lat",
        "elapsed_s": elapsed,
        "latency_us": elapsed / count / 2 * 1e6,
        "rtt_p50_us": percentile(rtts, 50) / 1e3,
        "rtt_p99_us": percentile(rtts, 99) / 1e3,
        "rtt_mean_us": statistics.fmean(rtts) / 1e3,
    }


async def throughput(
    aio: ModuleType, impl: ModuleType, size: int, count: int, endpoint: str | None
) -> dict[str, Any]:
    ctx = aio.Context()
    pull, push = ctx.socket(impl.PULL), ctx.socket(impl.PUSH)
    push.connect(_bind(pull, endpoint))

    async def send_all() -> None:
        payload = b"\0" * size
        for _ in range(count):
            await push.send(payload)

    sender = asyncio.ensure_future(send_all())
    clock = time.perf_counter_ns
    last = await pull.recv()
    start = clock()
    for _ in range(count - 1):
        last = await pull.recv()
    stop = clock()
    await sender
    if len(last) != size:
        raise SystemExit(f"error: the last message had {len(last)} bytes, not {size}")
    ctx.destroy(linger=0)
    elapsed = (stop - start) / 1e9
    return {
        "tool": "thr",
        "elapsed_s": elapsed,
        "msg_per_s": (count - 1) / elapsed,
        "mb_per_s": (count - 1) * size / elapsed / 1e6,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", default="zmq", help="module to benchmark: zmq or brokerless")
    parser.add_argument("--mode", choices=("lat", "thr"), default="lat")
    parser.add_argument("--size", type=int, default=1, help="bytes per message (default 1)")
    parser.add_argument("--count", type=int, default=5000, help="round trips or messages")
    parser.add_argument("--warmup", type=int, default=500, help="untimed round trips (lat)")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--endpoint", help="where PULL/REP binds (default: a free tcp port)")
    parser.add_argument("--json", action="store_true", help="print one JSON line (for compare.py)")
    args = parser.parse_args(argv)
    if args.count < 2:
        parser.error("--count must be at least 2")

    impl = load_impl_or_exit(args.impl, REQUIRED)
    aio = importlib.import_module(f"{impl.__name__}.asyncio")
    if args.mode == "lat":
        work = latency(aio, impl, args.size, args.count, args.warmup, args.endpoint)
    else:
        work = throughput(aio, impl, args.size, args.count, args.endpoint)
    factory = None
    if args.loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        measured = runner.run(work)
    transport = args.endpoint.partition(":")[0] if args.endpoint else "tcp"
    result = (
        describe(impl)
        | measured
        | {
            "transport": transport,
            "mode": args.mode,
            "loop": args.loop,
            "size": args.size,
            "count": args.count,
        }
    )
    if args.mode == "lat":
        human = (
            f"one-way latency {result['latency_us']:.1f} us (mean), RTT p50 "
            f"{result['rtt_p50_us']:.1f} us, p99 {result['rtt_p99_us']:.1f} us"
        )
    else:
        human = f"{result['msg_per_s']:,.0f} msg/s"
    emit(
        result,
        args.json,
        f"{result['impl']} {result['version']}: {args.loop}, {transport}, {args.mode}, "
        f"{args.count} x {args.size} B: {human}",
    )


if __name__ == "__main__":
    main()
