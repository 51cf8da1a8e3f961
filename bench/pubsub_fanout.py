"""PUB fan-out: one publisher process, N subscriber processes, per-subscriber rate and loss.

The publisher (this process) binds a PUB socket on ``--endpoint`` (tcp:// or ipc://) and starts
``--subscribers`` copies of this script with ``--role sub``, each of which connects a SUB socket
subscribed to everything.  Once every subscriber is receiving (the publisher sends 1-byte probe
messages until each has reported one on the control channel, ``bench/_control.py``, so no
subscription is still in flight: the "slow joiner"), the publisher sends ``--count`` messages of
``--size`` zero bytes, then a 1-byte end marker (repeated every 0.1 s until every subscriber has
reported, in case a finite HWM dropped it).  With ``--hwm 0`` (SNDHWM on PUB and RCVHWM on SUB;
what compare.py runs) nothing may be dropped, so the run measures lossless fan-out.

Each subscriber times its stream from the first data message to the end marker, so its rate is
``received / elapsed``, and sends its result back on the control channel; its loss is
``(count - received) / count``.  The publisher reports the median subscriber's rate
(``msg_per_s``, what compare.py compares), the slowest and fastest subscribers' rates, the
largest loss, and its own sending rate.  The publisher keeps its socket open until every
subscriber has reported.

    python bench/pubsub_fanout.py --impl zmq --endpoint tcp://127.0.0.1:5555 --hwm 0
    python bench/pubsub_fanout.py --impl brokerless --subscribers 4 --count 100000 --json

``--role sub`` runs one subscriber by hand (e.g. on another machine, with ``--endpoint`` and
``--control`` naming the publisher); ``--role pub --spawn 0`` then waits for such subscribers
instead of starting its own.
"""

from __future__ import annotations

import argparse
import select
import statistics
import subprocess
import sys
import time
from types import ModuleType
from typing import Any

import _control
from _harness import describe, emit, load_impl_or_exit

PROBE = b"\x01"  # data messages start with a zero byte; these don't
END = b"\x02"
READY_TIMEOUT = 60.0  # s for every subscriber to start, connect and receive a probe


def publish(
    impl: ModuleType,
    endpoint: str,
    size: int,
    count: int,
    subscribers: int,
    hwm: int | None,
    control: str | None,
    spawn: list[str] | None,
) -> dict[str, Any]:
    """Run the publisher; ``spawn`` is the command line of one subscriber (None: don't)."""
    listener = _control.Listener(endpoint, control)
    ctx = impl.Context()
    pub = ctx.socket(impl.PUB)
    if hwm is not None:
        pub.setsockopt(impl.SNDHWM, hwm)
    pub.bind(endpoint)
    children = [
        subprocess.Popen(spawn, stdin=subprocess.DEVNULL)
        for _ in range(subscribers if spawn else 0)
    ]
    try:
        channels = [listener.accept(READY_TIMEOUT) for _ in range(subscribers)]

        # Probe until every subscriber has received something: then its subscription is in place.
        waiting = set(channels)
        deadline = time.monotonic() + READY_TIMEOUT
        while waiting:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"error: {len(waiting)} of {subscribers} subscribers received nothing "
                    f"within {READY_TIMEOUT:g} s"
                )
            pub.send(PROBE)
            readable, _, _ = select.select(list(waiting), [], [], 0.01)
            for channel in readable:
                _control.expect(channel, "ready", "subscriber", timeout=10)
                waiting.discard(channel)

        payload = b"\0" * size
        send = pub.send
        clock = time.perf_counter_ns
        start = clock()
        for _ in range(count):
            send(payload)
        send(END)
        stop = clock()

        results: dict[_control.Channel, dict[str, Any]] = {}
        while len(results) < subscribers:
            pending = [c for c in channels if c not in results]
            readable, _, _ = select.select(pending, [], [], 0.1)
            for channel in readable:
                results[channel] = _control.expect(channel, "received", "subscriber", timeout=10)
            if not readable:
                send(END)  # in case a finite HWM dropped the first one
        for channel in channels:
            channel.close()
        for child in children:
            if child.wait(30) != 0:
                raise SystemExit(f"error: a subscriber exited with status {child.returncode}")
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
        listener.close()
    pub.close()
    ctx.term()

    rates = sorted(r["msg_per_s"] for r in results.values())
    losses = [(count - r["received"]) / count for r in results.values()]
    median = statistics.median(rates)
    send_elapsed = (stop - start) / 1e9
    return {
        "tool": "fanout",
        "transport": endpoint.partition("://")[0],
        "endpoint": endpoint,
        "size": size,
        "count": count,
        "subscribers": subscribers,
        "hwm": hwm,
        "msg_per_s": median,
        "mb_per_s": median * size / 1e6,
        "min_msg_per_s": rates[0],
        "max_msg_per_s": rates[-1],
        "sub_msg_per_s": rates,
        "loss": max(losses),
        "mean_loss": statistics.fmean(losses),
        "pub_send_s": send_elapsed,
        "pub_msg_per_s": count / send_elapsed if send_elapsed > 0 else float("inf"),
    }


def subscribe(
    impl: ModuleType, endpoint: str, size: int, count: int, hwm: int | None, control: str | None
) -> dict[str, Any]:
    """Run one subscriber: report readiness, then receive and time the stream."""
    channel = _control.connect(endpoint, control)
    ctx = impl.Context()
    sub = ctx.socket(impl.SUB)
    if hwm is not None:
        sub.setsockopt(impl.RCVHWM, hwm)
    sub.setsockopt(impl.SUBSCRIBE, b"")
    sub.connect(endpoint)
    recv = sub.recv
    clock = time.perf_counter_ns

    message = recv()
    channel.send({"ready": True})
    while message[0] == PROBE[0]:
        message = recv()
    received = 0
    start = stop = clock()
    if message[0] == 0:  # the first data message (unless every one was dropped)
        received = 1
        while True:
            message = recv()
            if message[0]:  # the end marker
                break
            received += 1
        stop = clock()
    if message != END:
        raise SystemExit(f"error: unexpected message {message[:16]!r}... instead of the end")
    elapsed = (stop - start) / 1e9
    result = {
        "received": received,
        "elapsed_s": elapsed,
        "msg_per_s": received / elapsed if elapsed > 0 else 0.0,
    }
    channel.send(result)
    channel.close()
    sub.close()
    ctx.term()
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", default="zmq", help="module to benchmark: zmq or brokerless")
    parser.add_argument(
        "--endpoint",
        default="tcp://127.0.0.1:5555",
        help="tcp:// or ipc:// endpoint (default tcp://127.0.0.1:5555)",
    )
    parser.add_argument(
        "--control", help="control channel address (default: derived from --endpoint)"
    )
    parser.add_argument("--size", type=int, default=100, help="bytes per message (default 100)")
    parser.add_argument("--count", type=int, default=200_000, help="messages (default 200000)")
    parser.add_argument(
        "--subscribers", type=int, default=4, help="subscriber processes (default 4)"
    )
    parser.add_argument(
        "--hwm", type=int, help="SNDHWM on PUB, RCVHWM on SUB; 0 = lossless (default: as is)"
    )
    parser.add_argument(
        "--role", choices=("pub", "sub"), default="pub", help="internal: run as a subscriber"
    )
    parser.add_argument(
        "--spawn",
        type=int,
        choices=(0, 1),
        default=1,
        help="1 (default): the publisher starts the subscribers itself; 0: wait for them",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line (for compare.py)")
    args = parser.parse_args(argv)
    if args.size < 1 or args.count < 1 or args.subscribers < 1:
        parser.error("--size, --count and --subscribers must be at least 1")

    if args.role == "sub":
        impl = load_impl_or_exit(args.impl, ("Context", "SUB", "SUBSCRIBE", "RCVHWM"))
        subscribe(impl, args.endpoint, args.size, args.count, args.hwm, args.control)
        return

    impl = load_impl_or_exit(args.impl, ("Context", "PUB", "SNDHWM"))
    spawn = None
    if args.spawn:
        spawn = [
            sys.executable,
            __file__,
            "--role=sub",
            f"--impl={args.impl}",
            f"--endpoint={args.endpoint}",
            f"--size={args.size}",
            f"--count={args.count}",
        ]
        spawn += [f"--control={args.control}"] if args.control else []
        spawn += [f"--hwm={args.hwm}"] if args.hwm is not None else []
    result = describe(impl) | publish(
        impl,
        args.endpoint,
        args.size,
        args.count,
        args.subscribers,
        args.hwm,
        args.control,
        spawn,
    )
    emit(
        result,
        args.json,
        f"{result['impl']} {result['version']}: {args.endpoint} PUB -> {args.subscribers} SUB, "
        f"{args.count} messages of {args.size} B, HWM {args.hwm if args.hwm is not None else '-'}"
        f": per subscriber {result['msg_per_s']:,.0f} msg/s (median; "
        f"{result['min_msg_per_s']:,.0f}-{result['max_msg_per_s']:,.0f}), loss "
        f"{result['loss']:.2%} (worst); publisher sent at {result['pub_msg_per_s']:,.0f} msg/s",
    )


if __name__ == "__main__":
    main()
