"""The floor under any pure-Python latency: a blocking ping-pong on plain OS sockets.

Two processes bounce a 5-octet buffer (a 1 B ZMTP frame's size) over tcp (TCP_NODELAY) or a
Unix socket pair, each side one ``sendall`` and one ``recv`` per message, no framing, no
threads: what the kernel and the interpreter cost by themselves.  Mean one-way latency =
loop time / round trips / 2, as ``remote_lat.py`` reports it, so the two compare directly.

``--wait poll`` makes each side ``poll`` its socket before each ``recv`` (as a thread that
must also watch something else does): what being woken from ``poll`` costs, against being
woken in ``recv`` itself (the default, ``--wait recv``).

    python bench/raw_lat.py --transport tcp
    python bench/raw_lat.py --transport ipc --count 20000 --wait poll
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import time
from collections.abc import Callable

from _harness import emit, plain_pair

MESSAGE = b"\x00\x01x\x00\x00"


def _receiver(sock: socket.socket, wait: str) -> Callable[[int], bytes]:
    """``sock.recv``, or with ``wait`` "poll" a ``poll`` of the socket and then its ``recv``."""
    if wait == "recv":
        return sock.recv
    poller = select.poll()
    poller.register(sock, select.POLLIN)

    def recv(size: int) -> bytes:
        poller.poll()
        return sock.recv(size)

    return recv


def _bounce(sock: socket.socket, n: int, wait: str) -> None:
    recv = _receiver(sock, wait)
    for _ in range(n):
        sock.sendall(recv(64))


def run(transport: str, count: int, warmup: int, wait: str = "recv") -> dict:
    ours, theirs = plain_pair(transport)
    pid = os.fork()
    if pid == 0:  # the echoing side
        ours.close()
        _bounce(theirs, warmup + count, wait)
        os._exit(0)
    theirs.close()
    send, recv = ours.sendall, _receiver(ours, wait)
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
        "wait": wait,
        "count": count,
        "mean_one_way_us": elapsed / count / 2 / 1000,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=("tcp", "ipc"), default="tcp")
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument(
        "--wait", choices=("recv", "poll"), default="recv", help="how each side waits"
    )
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args(argv)
    result = run(args.transport, args.count, args.warmup, args.wait)
    emit(
        result,
        args.json,
        f"plain sockets, {args.transport}, woken in {args.wait}: mean one-way latency "
        f"{result['mean_one_way_us']:.1f} µs over {args.count} round trips",
    )


if __name__ == "__main__":
    main()
