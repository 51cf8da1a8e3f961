"""PUSH->PULL throughput between two processes, sending side: like libzmq's perf/remote_thr.

Connects a PUSH socket to ``--endpoint`` and sends ``--count`` messages of ``--size`` bytes
(with ``--multipart``, 2 frames of ``--size`` bytes each, through ``send_multipart``) to
``bench/local_thr.py``, which times and reports them; then keeps the socket open until the
receiver says, on the control channel (``bench/_control.py``), that it has every message.
Closing right after the last send could lose the tail of the stream.

It prints its own sending rate (send loop only), for information; ``compare.py`` uses the
receiver's figure.

    python bench/remote_thr.py --impl brokerless --endpoint ipc:///tmp/thr --size 1024
"""

from __future__ import annotations

import argparse
import time
from types import ModuleType
from typing import Any

import _control
from _harness import describe, emit, load_impl_or_exit, use_curve
from local_thr import add_common_arguments

REQUIRED = ("Context", "PUSH")


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
    channel = _control.connect(endpoint, control)
    ctx = impl.Context()
    push = ctx.socket(impl.PUSH)
    if hwm is not None:
        push.setsockopt(impl.SNDHWM, hwm)
    if curve:
        use_curve(impl, push, server=False)
    push.connect(endpoint)

    clock = time.perf_counter_ns
    start = clock()
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
    stop = clock()

    _control.expect(channel, "done", "receiver")  # no timeout: the receiver may be slow
    channel.close()
    push.close()
    ctx.term()

    elapsed = (stop - start) / 1e9
    return {
        "tool": "remote_thr",
        "endpoint": endpoint,
        "size": size,
        "frames": frames,
        "count": count,
        "send_elapsed_s": elapsed,
        "send_msg_per_s": count / elapsed if elapsed > 0 else float("inf"),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    args = parser.parse_args(argv)

    impl = load_impl_or_exit(args.impl, REQUIRED + (("SNDHWM",) if args.hwm is not None else ()))
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
    emit(
        result,
        args.json,
        f"{result['impl']} {result['version']}: sent {args.count} messages to {args.endpoint} "
        f"in {result['send_elapsed_s']:.3f} s ({result['send_msg_per_s']:,.0f} msg/s)",
    )


if __name__ == "__main__":
    main()
