"""The floor under any pure-Python latency: a blocking ping-pong on plain OS sockets.

Two processes bounce a 5-octet buffer (a 1 B ZMTP frame's size) over tcp (TCP_NODELAY) or a
Unix socket pair, each side one ``sendall`` and one ``recv`` per message, no framing, no
threads: what the kernel and the interpreter cost by themselves.  Mean one-way latency =
loop time / round trips / 2, as ``remote_lat.py`` reports it, so the two compare directly.

    python bench/raw_lat.py --transport tcp
    python bench/raw_lat.py --transport ipc --count 20000
"""

from __future__ import annotations

import argparse
import os
import socket
import time

from _harness import emit, plain_pair

MESSAGE = b"\x00\x01x\x00\x00"


def _bounce(sock: socket.socket, n: int) -> None:
    for _ in range(n):
        sock.sendall(sock.recv(64))


def run(transport: str, count: int, warmup: int) -> dict:
    ours, theirs = plain_pair(transport)
    pid = os.fork()
    if pid == 0:  # the echoing side
        ours.close()
        _bounce(theirs, warmup + count)
        os._exit(0)
    theirs.close()
    send, recv = ours.sendall, ours.recv
    for _ in range(warmup):
        send(MESSAGE)
        recv(64)
    start = time.perf_counter_ns()
    for _ in range(count):
        send(MESSAGE)
        recv(64)
    elapsed = time.perf_counter_ns() - start
    os.waitpid(pid, 0)
    ours.close()
    return {
        "tool": "raw_lat",
        "transport": transport,
        "count": count,
        "mean_one_way_us": elapsed / count / 2 / 1000,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=("tcp", "ipc"), default="tcp")
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args(argv)
    result = run(args.transport, args.count, args.warmup)
    emit(
        result,
        args.json,
        f"plain sockets, {args.transport}: mean one-way latency "
        f"{result['mean_one_way_us']:.1f} µs over {args.count} round trips",
    )


if __name__ == "__main__":
    main()
