"""One side of a PUSH->PULL stream against a raw ZMTP peer: what one implementation's send or
receive path costs on its own.

In ``local_thr``/``remote_thr`` both ends run the implementation under test, so the slower end
sets the figure.  Here the other end is a plain-socket peer in its own process that does the
ZMTP 3.1 NULL handshake by hand and then either writes pre-encoded 100 B messages as fast as
the kernel takes them (``--side recv``: the implementation's PULL is timed) or reads and
discards everything (``--side send``: the implementation's PUSH send loop is timed).  Neither
implementation's code runs in the peer.  The result also counts the minor page faults the
implementation's process took while timed (``minor_faults``): memory the allocator handed back
to the system and took again shows there.

    python bench/one_sided.py --impl brokerless --side recv --count 2000000
    python bench/one_sided.py --impl zmq --side send --size 100
"""

from __future__ import annotations

import argparse
import resource
import socket
import subprocess
import sys
import time
from typing import Any

from _harness import describe, emit, load_impl_or_exit


def greeting() -> bytes:
    """ZMTP 3.1 greeting, NULL mechanism, as-client (RFC 23)."""
    return b"\xff" + bytes(8) + b"\x7f" + bytes((3, 1)) + b"NULL".ljust(20, b"\0") + bytes(32)


def ready(socket_type: bytes) -> bytes:
    """A READY command frame with only the Socket-Type property."""
    name = b"Socket-Type"
    body = b"\x05READY" + bytes((len(name),)) + name + len(socket_type).to_bytes(4, "big")
    body += socket_type
    return bytes((0x04, len(body))) + body


def read_handshake(sock: socket.socket) -> bytes:
    """Read the peer's greeting and READY; returns any bytes that came after them."""
    data = b""
    while len(data) < 66 or len(data) < 66 + data[65]:
        chunk = sock.recv(4096)
        if not chunk:
            raise SystemExit("error: the peer closed during the handshake")
        data += chunk
    return data[66 + data[65] :]


def raw_peer(port: int, side: str, count: int, size: int) -> None:
    """The plain-socket end: a PUSH blasting messages, or a PULL draining them."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(greeting() + ready(b"PUSH" if side == "recv" else b"PULL"))
    extra = read_handshake(sock)
    frame = bytes((0, size)) + bytes(size)
    if side == "recv":
        batch = 10_000
        for sent in range(0, count, batch):
            sock.sendall(frame * min(batch, count - sent))
        sock.recv(1)  # until the implementation closes
    else:
        need, got = count * len(frame) - len(extra), 0
        buf = bytearray(1 << 20)
        while got < need:
            n = sock.recv_into(buf)
            if not n:
                raise SystemExit("error: the implementation closed before sending everything")
            got += n
        sock.sendall(b"\0")  # "all in": the implementation may close now
    sock.close()


def run(impl: Any, side: str, count: int, size: int) -> dict[str, Any]:
    ctx = impl.Context()
    sock = ctx.socket(impl.PULL if side == "recv" else impl.PUSH)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    args = ["--raw-peer", str(port), "--side", side, "--count", str(count), "--size", str(size)]
    peer = subprocess.Popen([sys.executable, __file__, *args])
    clock = time.perf_counter_ns
    try:
        if side == "recv":
            recv = sock.recv
            recv()
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = clock()
            for _ in range(count - 1):
                recv()
        else:
            send = sock.send
            payload = bytes(size)
            send(payload)
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = clock()
            for _ in range(count - 1):
                send(payload)
        stop = clock()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        if side == "send" and peer.wait(120) != 0:
            raise SystemExit("error: the raw peer failed")
    finally:
        if peer.poll() is None:
            peer.kill()
        peer.wait()
    sock.close(linger=0)
    ctx.term()
    elapsed = (stop - start) / 1e9
    return {
        "tool": "one_sided",
        "side": side,
        "size": size,
        "count": count,
        "elapsed_s": elapsed,
        "msg_per_s": (count - 1) / elapsed,
        "minor_faults": faults,  # page faults of this process (every thread) while timed
        **describe(impl),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", default="brokerless", help="zmq or brokerless")
    parser.add_argument("--side", choices=("send", "recv"), default="recv")
    parser.add_argument("--count", type=int, default=2_000_000)
    parser.add_argument("--size", type=int, default=100, help="message size (0-255 bytes)")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    parser.add_argument("--raw-peer", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 0 <= args.size < 256 or args.count < 2:
        parser.error("--size must be 0-255 and --count at least 2")
    if args.raw_peer is not None:
        raw_peer(args.raw_peer, args.side, args.count, args.size)
        return
    impl = load_impl_or_exit(args.impl, ("Context", "PUSH", "PULL"))
    result = run(impl, args.side, args.count, args.size)
    human = (
        f"{result['impl']} {result['version']}: {args.side} side alone, {args.count} messages "
        f"of {args.size} B over tcp: {result['msg_per_s']:,.0f} msg/s, "
        f"{result['minor_faults']:,} page faults"
    )
    emit(result, args.json, human)


if __name__ == "__main__":
    main()
