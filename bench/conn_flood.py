"""What TCP connections cost a bound socket: memory per idle connection, memory left after they
close, and how fast a burst of them is accepted.

The receiver runs in its own process (``--impl zmq`` or ``--impl brokerless``): it binds a PULL
or ROUTER socket on tcp, and a thread waits in ``recv`` on it as an application would.  This
process is the flood, plain OS sockets that behave as an attacker's (or a crowd of peers'):

1. **burst**: ``--burst`` connections opened at once; timed until each one has received the
   first octets of the receiver's ZMTP greeting (so it was accepted and served), and the TCP
   retransmissions they needed are counted (``TCP_INFO``; a SYN the receiver's full listen
   queue dropped is sent again after 1 s).  The receiver's RSS while they are all open, minus
   its RSS before, over the count is the memory an idle connection costs.  Then they are closed
   (each half-closes and reads to the receiver's end of stream, so both sides are gone) and RSS
   is read again.
2. **cycles**: ``--cycles`` connections opened and closed the same way, ``--batch`` at a time.

What a connection sends as soon as it is connected is ``--send``: ``greeting`` (default) the
64-octet ZMTP greeting and then nothing (a peer stalled in the handshake), ``ready`` the greeting
and READY (a PUSH for a PULL, a DEALER for a ROUTER: the receiver makes a pipe for it too), or
``nothing``.  With ``nothing``, a burst larger than the listen queue can leave connections that
the client thinks are open and the server never saw (the kernel answered with SYN cookies and
then had no room for the final ACK); a client that sends something revives them, one that sends
nothing waits forever -- so that mode is for small bursts only.

RSS is VmRSS from ``/proc/<pid>/status``.  Before each reading the receiver settles: for
brokerless it runs one empty call through each of its I/O threads (so every close they were
handling is finished) and counts the ``Engine`` and ``Session`` objects still alive with
``gc.get_objects()`` -- no ``gc.collect()`` anywhere.

    python bench/conn_flood.py --impl brokerless --type PULL
    python bench/conn_flood.py --impl zmq --type ROUTER --burst 2000 --cycles 10000 --json
    python bench/conn_flood.py --impl zmq --burst 2000 --backlog 4096   # libzmq, larger queue
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _harness import describe, emit, load_impl_or_exit

HERE = Path(__file__).resolve()

# A ZMTP 3.1 NULL greeting (as-server 0) and a READY for each receiving socket type's peer.
GREETING = b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x01" + b"NULL".ljust(20, b"\0") + b"\0" * 32
PEER_TYPE = {"PULL": b"PUSH", "ROUTER": b"DEALER"}
SEND = ("nothing", "greeting", "ready")


def ready_command(socket_type: bytes) -> bytes:
    body = b"\x05READY" + b"\x0bSocket-Type" + len(socket_type).to_bytes(4, "big") + socket_type
    return b"\x04" + bytes((len(body),)) + body


# -- the receiver (a subprocess) ---------------------------------------------------------------


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def serve(impl_name: str, type_name: str, backlog: int | None) -> None:
    """Bind, print the port, then answer one JSON line per command line on stdin."""
    import gc
    import threading

    impl = load_impl_or_exit(impl_name)
    ctx = impl.Context()
    sock = ctx.socket(getattr(impl, type_name))
    sock.setsockopt(impl.LINGER, 0)
    if backlog is not None:
        sock.setsockopt(impl.BACKLOG, backlog)
    port = sock.bind_to_random_port("tcp://127.0.0.1")

    def receive() -> None:
        while True:
            sock.recv_multipart()

    threading.Thread(target=receive, daemon=True).start()
    io_threads = getattr(ctx, "_io_threads", None)  # brokerless only

    def settle() -> dict[str, Any]:
        state: dict[str, Any] = {}
        if io_threads is not None:
            for io in io_threads:
                io.call_and_wait(lambda _: None)
            names = ("Engine", "Session")
            counts = dict.fromkeys(names, 0)
            for obj in gc.get_objects():
                name = type(obj).__name__
                if name in counts and type(obj).__module__.startswith(impl_name):
                    counts[name] += 1
            state = {"engines": counts["Engine"], "sessions": counts["Session"]}
        state["rss_kib"] = rss_kib()
        return state

    print(json.dumps({"port": port}), flush=True)
    for _line in sys.stdin:
        print(json.dumps(settle()), flush=True)


# -- the flood (this process) ------------------------------------------------------------------


class Receiver:
    """The receiver subprocess and its command channel."""

    def __init__(self, impl: str, type_name: str, backlog: int | None) -> None:
        command = [sys.executable, str(HERE), "--serve", "--impl", impl, "--type", type_name]
        if backlog is not None:
            command += ["--backlog", str(backlog)]
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.port = self._read()["port"]

    def _read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the receiver exited ({self.proc.wait()})")
        return json.loads(line)

    def settle(self) -> dict[str, Any]:
        """Its state once what it was doing has settled (RSS, live engines and sessions)."""
        self.proc.stdin.write("settle\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def open_many(port: int, count: int, first: bytes = b"") -> list:
    """``count`` connections opened at once; returns them once each one has received the
    first octets of the receiver's greeting (``first`` is sent as soon as it is connected)."""
    selector = selectors.DefaultSelector()
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        socks.append(s)
        selector.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)

    def served(s: socket.socket, mask: int) -> bool:
        if mask & selectors.EVENT_WRITE:
            if first:
                s.send(first)
            if not mask & selectors.EVENT_READ:
                selector.modify(s, selectors.EVENT_READ)
                return False
        return True

    wait_each(selector, count, served, "served")
    return socks


def retransmits(socks: list) -> int:
    """The segments (SYNs included) the kernel had to send again on these connections."""
    total = 0
    for s in socks:
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        total += struct.unpack_from("I", info, 100)[0]  # tcpi_total_retrans
    return total


def close_many(socks: list) -> None:
    """Half-close each connection and read it to the receiver's end of stream, so both ends
    are closed when this returns."""
    selector = selectors.DefaultSelector()
    for s in socks:
        s.shutdown(socket.SHUT_WR)
        selector.register(s, selectors.EVENT_READ)

    def ended(s: socket.socket, _: int) -> bool:
        try:
            return not s.recv(65536)
        except ConnectionResetError:
            return True

    wait_each(selector, len(socks), ended, "closed by the receiver")
    for s in socks:
        s.close()


def wait_each(selector: Any, count: int, done: Any, what: str, timeout: float = 60.0) -> None:
    """Call ``done(sock, events)`` for each ready socket until it has said True for ``count``
    of them (each is then unregistered)."""
    waiting = count
    deadline = time.monotonic() + timeout
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{waiting} of {count} connections not {what} in {timeout} s")
        for key, mask in selector.select(left):
            if done(key.fileobj, mask):
                selector.unregister(key.fileobj)
                waiting -= 1
    selector.close()


def first_octets(send: str, type_name: str) -> bytes:
    """What a connection of the flood sends (see ``--send``)."""
    if send == "ready":
        return GREETING + ready_command(PEER_TYPE[type_name])
    return GREETING if send == "greeting" else b""


def run(
    impl: str,
    type_name: str,
    burst: int,
    cycles: int,
    batch: int,
    send: str,
    backlog: int | None = None,
) -> dict:
    receiver = Receiver(impl, type_name, backlog)
    first = first_octets(send, type_name)
    try:
        close_many(open_many(receiver.port, 10, first))  # start-up allocations, not counted
        start = receiver.settle()
        t0 = time.perf_counter()
        socks = open_many(receiver.port, burst, first)
        accept_s = time.perf_counter() - t0
        retrans = retransmits(socks)
        idle = receiver.settle()
        close_many(socks)
        after_burst = receiver.settle()
        done = 0
        while done < cycles:
            n = min(batch, cycles - done)
            close_many(open_many(receiver.port, n, first))
            done += n
        after_cycles = receiver.settle()
    finally:
        receiver.close()
    per_conn = (idle["rss_kib"] - start["rss_kib"]) / burst if burst else 0.0
    return {
        "type": type_name,
        "send": send,
        "burst": burst,
        "accept_s": accept_s,
        "retransmits": retrans,
        "idle_kib_per_conn": per_conn,
        "rss_start_kib": start["rss_kib"],
        "rss_idle_kib": idle["rss_kib"],
        "rss_after_burst_kib": after_burst["rss_kib"],
        "cycles": cycles,
        "rss_after_cycles_kib": after_cycles["rss_kib"],
        "alive_after_cycles": {k: v for k, v in after_cycles.items() if k != "rss_kib"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", default="brokerless", help="zmq (pyzmq) or brokerless")
    parser.add_argument("--type", default="PULL", choices=sorted(PEER_TYPE))
    parser.add_argument("--burst", type=int, default=1000, help="connections opened at once")
    parser.add_argument("--cycles", type=int, default=10000, help="connect/close cycles")
    parser.add_argument("--batch", type=int, default=100, help="cycles at a time")
    parser.add_argument("--send", default="greeting", choices=SEND, help="see above")
    parser.add_argument("--backlog", type=int, help="set BACKLOG (default: the socket's own)")
    parser.add_argument("--json", action="store_true", help="one JSON line")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.impl, args.type, args.backlog)
        return
    result = run(args.impl, args.type, args.burst, args.cycles, args.batch, args.send, args.backlog)
    info = describe(load_impl_or_exit(args.impl))
    result.update(info)
    mib = 1024
    human = (
        f"{info['impl']} {info['version']} {args.type}"
        f" (peers send {args.send}): "
        f"{args.burst} connections served in {result['accept_s']:.3f} s "
        f"({result['retransmits']} retransmissions); RSS "
        f"{result['rss_start_kib'] / mib:.1f} -> {result['rss_idle_kib'] / mib:.1f} MiB "
        f"({result['idle_kib_per_conn']:.1f} KiB a connection), "
        f"{result['rss_after_burst_kib'] / mib:.1f} MiB once closed; after "
        f"{args.cycles} connect/close cycles {result['rss_after_cycles_kib'] / mib:.1f} MiB"
        + (f", alive: {result['alive_after_cycles']}" if result["alive_after_cycles"] else "")
    )
    emit(result, args.json, human)


if __name__ == "__main__":
    main()
