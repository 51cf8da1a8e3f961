"""PUSH->PULL throughput between two processes, receiving side: like libzmq's perf/local_thr.

Binds a PULL socket on ``--endpoint`` (tcp:// or ipc://) and receives ``--count`` messages of
``--size`` bytes (2 frames of ``--size`` bytes each with ``--multipart``) sent by
``bench/remote_thr.py`` with the same arguments.  The clock runs from the arrival of the first
message to that of the last, so start-up and connection are not timed; the rate is
``(count - 1) / elapsed``.  MB/s counts payload bytes (all frames), 1 MB = 10**6 bytes.

When the last message is in, it tells the sender so on the control channel (see
``bench/_control.py``: TCP port + 1, or ``PATH.ctl`` for ipc), and only then does the sender
close its socket, so no tail of the stream can be lost to an early close.

    python bench/local_thr.py --impl zmq --endpoint tcp://127.0.0.1:5555 --size 100 &
    python bench/remote_thr.py --impl zmq --endpoint tcp://127.0.0.1:5555 --size 100
"""

from __future__ import annotations

import argparse
from types import ModuleType
from typing import Any

import _control
from _harness import describe, emit, load_impl_or_exit, receive_timed, use_curve

REQUIRED = ("Context", "PULL")


def run(
    impl: ModuleType,
    endpoint: str,
    size: int,
    count: int,
    frames: int = 1,
    copy: bool = True,
    hwm: int | None = None,
    control: str | None = None,
    curve: bool = False,
) -> dict[str, Any]:
    if count < 2:
        raise ValueError("--count must be at least 2 (timing runs from the first message)")
    listener = _control.Listener(endpoint, control)
    ctx = impl.Context()
    pull = ctx.socket(impl.PULL)
    if hwm is not None:
        pull.setsockopt(impl.RCVHWM, hwm)
    if curve:
        use_curve(impl, pull, server=True)
    pull.bind(endpoint)

    start, stop, received = receive_timed(pull, count, frames, copy)

    lengths = [len(memoryview(frame)) for frame in received]
    # Release the sender (it keeps its socket open until now), then shut down.
    channel = listener.accept()
    channel.send({"done": True})
    channel.close()
    listener.close()
    if lengths != [size] * frames:
        raise SystemExit(f"error: the last message had frames of {lengths} bytes, not {size}")
    pull.close()
    ctx.term()

    elapsed = (stop - start) / 1e9
    msg_per_s = (count - 1) / elapsed if elapsed > 0 else float("inf")
    return {
        "tool": "thr",
        "transport": endpoint.partition("://")[0],
        "endpoint": endpoint,
        "size": size,
        "frames": frames,
        "count": count,
        "copy": copy,
        "hwm": hwm,
        "curve": curve,
        "elapsed_s": elapsed,
        "msg_per_s": msg_per_s,
        "mb_per_s": msg_per_s * size * frames / 1e6,
    }


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments local_thr.py and remote_thr.py share (compare.py passes both the same)."""
    parser.add_argument("--impl", default="zmq", help="module to benchmark: zmq or brokerless")
    parser.add_argument(
        "--endpoint",
        default="tcp://127.0.0.1:5555",
        help="tcp:// or ipc:// endpoint (default tcp://127.0.0.1:5555)",
    )
    parser.add_argument(
        "--control", help="control channel address (default: derived from --endpoint)"
    )
    parser.add_argument("--size", type=int, default=100, help="bytes per frame (default 100)")
    parser.add_argument("--count", type=int, default=200_000, help="messages (default 200000)")
    parser.add_argument(
        "--multipart", action="store_true", help="send 2-frame messages (send_multipart)"
    )
    parser.add_argument(
        "--no-copy", dest="copy", action="store_false", help="pass copy=False to send and recv"
    )
    parser.add_argument("--hwm", type=int, help="set SNDHWM/RCVHWM (default: leave as is)")
    parser.add_argument(
        "--curve", action="store_true", help="CURVE security (the receiver is the server)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line (for compare.py)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    args = parser.parse_args(argv)

    impl = load_impl_or_exit(args.impl, REQUIRED + (("RCVHWM",) if args.hwm is not None else ()))
    frames = 2 if args.multipart else 1
    result = describe(impl) | run(
        impl,
        args.endpoint,
        args.size,
        args.count,
        frames,
        args.copy,
        args.hwm,
        args.control,
        args.curve,
    )
    shape = f"{frames} x {args.size} B" if frames > 1 else f"{args.size} B"
    emit(
        result,
        args.json,
        f"{result['impl']} {result['version']}: {args.endpoint} PUSH->PULL, {args.count} "
        f"messages of {shape}: {result['msg_per_s']:,.0f} msg/s, {result['mb_per_s']:,.1f} MB/s "
        f"({result['elapsed_s']:.3f} s)",
    )


if __name__ == "__main__":
    main()
