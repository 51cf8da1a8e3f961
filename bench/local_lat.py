"""REQ/REP latency between two processes, echoing side: like libzmq's perf/local_lat.

Binds a REP socket on ``--endpoint`` (tcp:// or ipc://) and sends back each of the
``--warmup`` + ``--count`` messages it receives from ``bench/remote_lat.py`` (run with the same
arguments), which times the round trips and reports them.  After its last reply it keeps the
socket open until the requester says, on the control channel (``bench/_control.py``), that the
reply arrived: closing right after the last send could lose it.

    python bench/local_lat.py --impl zmq --endpoint tcp://127.0.0.1:5555 &
    python bench/remote_lat.py --impl zmq --endpoint tcp://127.0.0.1:5555
"""

from __future__ import annotations

import argparse
from types import ModuleType
from typing import Any

import _control
from _harness import describe, emit, load_impl_or_exit, use_curve

REQUIRED = ("Context", "REP")


def run(
    impl: ModuleType,
    endpoint: str,
    count: int,
    warmup: int = 1000,
    control: str | None = None,
    curve: bool = False,
) -> dict[str, Any]:
    listener = _control.Listener(endpoint, control)
    ctx = impl.Context()
    rep = ctx.socket(impl.REP)
    if curve:
        use_curve(impl, rep, server=True)
    rep.bind(endpoint)
    recv, send = rep.recv, rep.send
    for _ in range(warmup + count):
        send(recv())
    channel = listener.accept()
    _control.expect(channel, "done", "requester")
    channel.close()
    listener.close()
    rep.close()
    ctx.term()
    return {"tool": "local_lat", "endpoint": endpoint, "count": count, "warmup": warmup}


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments local_lat.py and remote_lat.py share (compare.py passes both the same)."""
    parser.add_argument("--impl", default="zmq", help="module to benchmark: zmq or brokerless")
    parser.add_argument(
        "--endpoint",
        default="tcp://127.0.0.1:5555",
        help="tcp:// or ipc:// endpoint (default tcp://127.0.0.1:5555)",
    )
    parser.add_argument(
        "--control", help="control channel address (default: derived from --endpoint)"
    )
    parser.add_argument("--size", type=int, default=1, help="bytes per message (default 1)")
    parser.add_argument("--count", type=int, default=10_000, help="round trips (default 10000)")
    parser.add_argument(
        "--warmup", type=int, default=1000, help="untimed round trips first (default 1000)"
    )
    parser.add_argument(
        "--curve", action="store_true", help="CURVE security (the echoing side is the server)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line (for compare.py)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    args = parser.parse_args(argv)

    impl = load_impl_or_exit(args.impl, REQUIRED)
    result = describe(impl) | run(
        impl, args.endpoint, args.count, args.warmup, args.control, args.curve
    )
    emit(
        result,
        args.json,
        f"{result['impl']} {result['version']}: echoed {args.warmup + args.count} messages "
        f"on {args.endpoint}",
    )


if __name__ == "__main__":
    main()
