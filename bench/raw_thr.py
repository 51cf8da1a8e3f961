"""The floor under pure-Python throughput of large messages: plain OS sockets, ZMTP long frames.

A forked sender writes ``--count`` messages of ``--size`` octets as ZMTP long frames (a 9-octet
header, then the body; four messages per ``sendmsg``, header and body passed by reference, as a
batching sender does).  The receiver reads them as any Python receiver must: ``recv_into`` a
reused buffer, each whole body copied out as ``bytes``, a partial frame carried to the next
read.  With ``--threads 1`` the application thread reads the socket itself; with ``--threads 2``
a reader thread reads and decodes and hands the bodies to the application thread (a deque and a
condition) -- the shape of any library with an I/O thread, brokerless's and libzmq's alike.  No
ZMTP handshake, no pipes, no options: what the kernel, the allocator and the interpreter cost by
themselves.  Throughput is timed from the first message to the last, as ``local_thr.py`` does.

    python bench/raw_thr.py --threads 2
    python bench/raw_thr.py --threads 1 --transport ipc --size 1024 --count 200000
"""

from __future__ import annotations

import argparse
import os
import socket
import threading
import time
from collections import deque

from _harness import emit, plain_pair

READ_BUFFER = 256 * 1024  # as brokerless's I/O thread reads
BATCH = 4  # messages per sendmsg


def _send(sock: socket.socket, size: int, count: int) -> None:
    header = b"\x02" + size.to_bytes(8, "big")
    body = b"x" * size
    batch = [header, body] * BATCH
    for _ in range(count // BATCH):
        _sendmsg_all(sock, batch)
    _sendmsg_all(sock, [header, body] * (count % BATCH))


def _sendmsg_all(sock: socket.socket, buffers: list[bytes]) -> None:
    sent = sock.sendmsg(buffers)  # a blocking socket sends all but when a signal cuts in
    if sent < sum(map(len, buffers)):
        sock.sendall(memoryview(b"".join(buffers))[sent:])


class Reader:
    """Bodies of long frames off ``sock``: one ``recv_into`` per ``read``, each whole body
    copied out, a partial frame kept for the next read."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = memoryview(bytearray(READ_BUFFER))
        self.held = b""

    def read(self) -> list[bytes]:
        n = self.sock.recv_into(self.buffer)
        if n == 0:
            raise EOFError("the sender closed the connection")
        view = self.buffer[:n]
        if self.held:
            view = memoryview(self.held + view)
        out = []
        pos, end = 0, len(view)
        while end - pos >= 9:
            stop = pos + 9 + int.from_bytes(view[pos + 1 : pos + 9], "big")
            if stop > end:
                break
            out.append(bytes(view[pos + 9 : stop]))
            pos = stop
        self.held = bytes(view[pos:])
        return out


def _receive_here(reader: Reader, count: int) -> tuple[int, int]:
    got = reader.read()
    start = time.perf_counter_ns()
    received = len(got)
    while received < count:
        received += len(reader.read())
    return start, time.perf_counter_ns()


def _receive_through_a_thread(reader: Reader, count: int) -> tuple[int, int]:
    queue: deque[bytes] = deque()
    ready = threading.Condition()
    waiting = False

    def read_ahead() -> None:
        received = 0
        while received < count:
            got = reader.read()
            received += len(got)
            queue.extend(got)
            if waiting:
                with ready:
                    ready.notify()

    thread = threading.Thread(target=read_ahead, daemon=True)
    thread.start()
    received = 0
    start = 0
    while received < count:
        if queue:
            queue.popleft()
            if not received:
                start = time.perf_counter_ns()
            received += 1
            continue
        with ready:
            waiting = True
            if not queue:
                ready.wait(0.01)
            waiting = False
    stop = time.perf_counter_ns()
    thread.join()
    return start, stop


def run(transport: str, size: int, count: int, threads: int) -> dict:
    ours, theirs = plain_pair(transport)
    pid = os.fork()
    if pid == 0:  # the sender
        ours.close()
        _send(theirs, size, count)
        theirs.close()
        os._exit(0)
    theirs.close()
    cpu = time.process_time()
    receive = _receive_here if threads == 1 else _receive_through_a_thread
    start, stop = receive(Reader(ours), count)
    used = time.process_time() - cpu  # (user + system, every thread)
    os.waitpid(pid, 0)
    ours.close()
    seconds = (stop - start) / 1e9
    return {
        "tool": "raw_thr",
        "transport": transport,
        "size": size,
        "count": count,
        "threads": threads,
        "msg_per_s": (count - 1) / seconds if seconds else float("nan"),
        "cpu_us_per_msg": used / count * 1e6,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=("tcp", "ipc"), default="tcp")
    parser.add_argument("--size", type=int, default=65536)
    parser.add_argument("--count", type=int, default=30_000)
    parser.add_argument(
        "--threads",
        type=int,
        choices=(1, 2),
        default=2,
        help="1: the application thread reads; 2: a reader thread hands bodies over (default)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args(argv)
    if args.size < 256:
        parser.error("--size must be 256 or more (long frames)")
    result = run(args.transport, args.size, args.count, args.threads)
    emit(
        result,
        args.json,
        f"plain sockets, {args.transport}, {args.size} B, {args.threads} thread(s): "
        f"{result['msg_per_s']:,.0f} msg/s, {result['cpu_us_per_msg']:.1f} µs of CPU a message",
    )


if __name__ == "__main__":
    main()
