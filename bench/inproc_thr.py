"""inproc PUSH->PULL throughput, in the manner of libzmq's perf/local_thr + remote_thr.

One Context; a sender thread creates a PUSH socket, binds it on an inproc endpoint and sends
``--count`` messages of ``--size`` bytes (or, with ``--multipart``, messages of 2 frames of
``--size`` bytes each, through ``send_multipart``); the main thread connects a PULL socket and
receives them.  The clock runs at the receiver from the arrival of the first message to that of
the last, so socket setup and connection are not timed; the rate is ``(count - 1) / elapsed``.
MB/s counts payload bytes (all frames), 1 MB = 10**6 bytes.

Each socket is only ever used by the thread that created it.  By default messages are sent and
received with ``copy=True`` (pyzmq's default); ``--no-copy`` passes ``copy=False`` to both.

    python bench/inproc_thr.py --impl zmq --size 100 --count 1000000
    python bench/inproc_thr.py --impl brokerless --size 100 --multipart --json
"""

from __future__ import annotations

import argparse
import os
import threading
import traceback
from types import ModuleType
from typing import Any

from _harness import describe, emit, load_impl_or_exit, receive_timed

REQUIRED = ("Context", "PUSH", "PULL")


def run(
    impl: ModuleType,
    size: int,
    count: int,
    frames: int = 1,
    copy: bool = True,
    hwm: int | None = None,
) -> dict[str, Any]:
    """Send ``count`` messages of ``frames`` x ``size`` bytes over inproc and time the receiver."""
    if count < 2:
        raise ValueError("--count must be at least 2 (timing runs from the first message)")
    endpoint = f"inproc://bench-thr-{os.getpid()}"
    ctx = impl.Context()
    bound = threading.Event()
    done = threading.Event()

    def sender() -> None:
        try:
            push = ctx.socket(impl.PUSH)
            if hwm is not None:
                push.setsockopt(impl.SNDHWM, hwm)
            push.bind(endpoint)
            bound.set()
            if frames == 1:
                payload = b"\0" * size
                send = push.send
                for _ in range(count):
                    send(payload, copy=copy)
            else:
                parts = [b"\0" * size] * frames
                send_multipart = push.send_multipart
                for _ in range(count):
                    send_multipart(parts, copy=copy)
            # Keep the socket open until everything is received: closing it early could drop
            # queued messages under some linger settings and leave the receiver waiting.
            done.wait()
            push.close()
        except BaseException:
            traceback.print_exc()
            os._exit(1)  # the receiver would otherwise wait forever

    thread = threading.Thread(target=sender, name="bench-sender", daemon=True)
    thread.start()
    if not bound.wait(30):
        raise SystemExit("error: the sender thread did not bind within 30 s")
    pull = ctx.socket(impl.PULL)
    if hwm is not None:
        pull.setsockopt(impl.RCVHWM, hwm)
    pull.connect(endpoint)

    start, stop, received = receive_timed(pull, count, frames, copy)

    lengths = [len(memoryview(frame)) for frame in received]
    if lengths != [size] * frames:
        raise SystemExit(f"error: the last message had frames of {lengths} bytes, not {size}")
    done.set()
    thread.join()
    pull.close()
    ctx.term()

    elapsed = (stop - start) / 1e9
    msg_per_s = (count - 1) / elapsed if elapsed > 0 else float("inf")
    return {
        "tool": "thr",
        "transport": "inproc",
        "size": size,
        "frames": frames,
        "count": count,
        "copy": copy,
        "hwm": hwm,
        "elapsed_s": elapsed,
        "msg_per_s": msg_per_s,
        "mb_per_s": msg_per_s * size * frames / 1e6,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", default="zmq", help="module to benchmark: zmq or brokerless")
    parser.add_argument("--size", type=int, default=100, help="bytes per frame (default 100)")
    parser.add_argument("--count", type=int, default=200_000, help="messages (default 200000)")
    parser.add_argument(
        "--multipart", action="store_true", help="send 2-frame messages (send_multipart)"
    )
    parser.add_argument(
        "--no-copy", dest="copy", action="store_false", help="pass copy=False to send and recv"
    )
    parser.add_argument("--hwm", type=int, help="set SNDHWM/RCVHWM (default: leave as is)")
    parser.add_argument("--json", action="store_true", help="print one JSON line (for compare.py)")
    args = parser.parse_args(argv)

    required = REQUIRED + (("SNDHWM", "RCVHWM") if args.hwm is not None else ())
    impl = load_impl_or_exit(args.impl, required)
    frames = 2 if args.multipart else 1
    result = describe(impl) | run(impl, args.size, args.count, frames, args.copy, args.hwm)
    shape = f"{frames} x {args.size} B" if frames > 1 else f"{args.size} B"
    emit(
        result,
        args.json,
        f"{result['impl']} {result['version']}: inproc PUSH->PULL, {args.count} messages of "
        f"{shape}: {result['msg_per_s']:,.0f} msg/s, {result['mb_per_s']:,.1f} MB/s "
        f"({result['elapsed_s']:.3f} s)",
    )


if __name__ == "__main__":
    main()
