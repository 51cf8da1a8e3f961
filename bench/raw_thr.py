"""Floors under pure-Python throughput of large messages: plain OS sockets, ZMTP long frames.

A forked sender writes ``--count`` messages of ``--size`` octets as ZMTP long frames (a 9-octet
header, then the body; four messages per ``sendmsg``, header and body passed by reference, as a
batching sender does).  The receiver reads them in one of two ways (``--bodies``): ``copied``,
``recv_into`` a reused buffer with each whole body copied out as ``bytes`` and a partial frame
carried to the next read (as brokerless's I/O thread reads), or ``own``, each frame's header and
then its body with ``socket.recv(size)``, so the kernel copies the body straight into the
``bytes`` handed on.  With ``--threads 1`` the application thread reads the socket itself; with
``--threads 2`` a reader thread reads and hands the bodies to the application thread (a deque
and a condition) -- the shape of any library with an I/O thread, brokerless's and libzmq's
alike.  No ZMTP handshake, no pipes, no options: what the kernel, the allocator and the
interpreter cost by themselves, for each design.  Throughput is timed from the first message to
the last, as ``local_thr.py`` does.

    python bench/raw_thr.py --threads 2
    python bench/raw_thr.py --threads 1 --bodies own --transport ipc --size 1024 --count 200000
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
    """Bodies of long frames off ``sock``, ``read`` by ``read`` (each returns the bodies it
    completed).

    ``bodies="copied"``: one ``recv_into`` of the read buffer a read, each whole body copied out
    as ``bytes``, a partial frame kept for the next read (as brokerless's I/O thread reads).
    ``bodies="own"``: a frame's 9-octet header, then its body with ``socket.recv(size)``, so the
    kernel copies the body straight into the ``bytes`` handed on (two system calls a message,
    no copy in Python)."""

    def __init__(
        self, sock: socket.socket, bodies: str = "copied", buffer_size: int = READ_BUFFER
    ) -> None:
        self.sock = sock
        self.buffer = memoryview(bytearray(buffer_size))
        self.held = b""  # "copied": a partial frame; "own": a partial body
        self.need = 0  # "own": the octets of the body still to come (0: a header is next)
        self.read = self._read_copied if bodies == "copied" else self._read_own

    def _recv_into(self, buffer: memoryview) -> int:
        n = self.sock.recv_into(buffer)
        if n == 0:
            raise EOFError("the sender closed the connection")
        return n

    def _read_copied(self) -> list[bytes]:
        view = self.buffer[: self._recv_into(self.buffer)]
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

    def _read_own(self) -> list[bytes]:
        if not self.need:
            header, got = self.buffer[:9], 0
            while got < 9:
                got += self._recv_into(header[got:])
            self.need = int.from_bytes(header[1:9], "big")
        chunk = self.sock.recv(self.need)
        if not chunk:
            raise EOFError("the sender closed the connection")
        self.need -= len(chunk)
        body = self.held + chunk if self.held else chunk
        if self.need:
            self.held = body
            return []
        self.held = b""
        return [body]


def _receive_here(reader: Reader, count: int) -> tuple[int, int, int, int]:
    """Read in this thread; returns the clock at the first read's end and at the last, how many
    messages came between the two, and the octets of every body received."""
    got = reader.read()
    start = time.perf_counter_ns()
    first = received = len(got)
    octets = sum(map(len, got))
    while received < count:
        got = reader.read()
        received += len(got)
        octets += sum(map(len, got))
    return start, time.perf_counter_ns(), received - first, octets


def _receive_through_a_thread(reader: Reader, count: int) -> tuple[int, int, int, int]:
    """Read in a reader thread that hands the bodies over; returns the clock at the first
    message taken and at the last, how many were taken after the first, and the octets of
    every body taken."""
    queue: deque[bytes] = deque()
    ready = threading.Condition()
    waiting = False
    failed: list[BaseException] = []

    def read_ahead() -> None:
        received = 0
        try:
            while received < count:
                got = reader.read()
                received += len(got)
                queue.extend(got)
                if waiting:  # (read after the extend: see the waiting side)
                    with ready:
                        ready.notify()
        except BaseException as exc:  # ends the taking side too, which raises it
            with ready:
                failed.append(exc)
                ready.notify()

    thread = threading.Thread(target=read_ahead, daemon=True)
    thread.start()
    taken = octets = 0
    start = 0
    while taken < count:
        if queue:
            octets += len(queue.popleft())
            if not taken:
                start = time.perf_counter_ns()
            taken += 1
            continue
        with ready:
            waiting = True  # then look again: what was queued before this is seen now
            while not queue and not failed:
                ready.wait()
            waiting = False
        if failed and not queue:
            raise failed[0]
    stop = time.perf_counter_ns()
    thread.join()
    return start, stop, taken - 1, octets


def run(transport: str, size: int, count: int, threads: int, bodies: str) -> dict:
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
    start, stop, timed, octets = receive(Reader(ours, bodies), count)
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
        "bodies": bodies,
        "octets_received": octets,
        "msg_per_s": timed / seconds if seconds else float("nan"),
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
    parser.add_argument(
        "--bodies",
        choices=("copied", "own"),
        default="copied",
        help="copied: out of a read buffer (default); own: each read into a bytes of its own",
    )
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args(argv)
    if not 256 <= args.size <= READ_BUFFER - 9:
        # (long frames that fit one read; a larger body would be carried, copy after copy)
        parser.error(f"--size must be between 256 and {READ_BUFFER - 9}")
    if args.count < 2:
        parser.error("--count must be 2 or more (the rate is timed from the first message)")
    result = run(args.transport, args.size, args.count, args.threads, args.bodies)
    emit(
        result,
        args.json,
        f"plain sockets, {args.transport}, {args.size} B, {args.threads} thread(s), bodies "
        f"{args.bodies}: "
        f"{result['msg_per_s']:,.0f} msg/s, {result['cpu_us_per_msg']:.1f} µs of CPU a message",
    )


if __name__ == "__main__":
    main()
