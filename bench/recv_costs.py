"""What receiving one small message costs in CPU, piece by piece, in one process (no network).

* ``recv``: ``recv()`` of messages already queued in the socket (PUSH -> PULL over inproc,
  everything sent first, RCVHWM/SNDHWM 0), for both implementations: the API's own cost.
* ``decode`` (brokerless only): the ZMTP decoder turning a 256 KiB read of back-to-back 100 B
  frames into messages -- the other half of what a brokerless receiver pays per message (libzmq
  decodes in C, in its I/O thread, without the GIL).

Their sum is the floor of a pure-Python receiver's CPU per message; ``one_sided.py --side
recv`` shows what a whole receive path costs.  CPU time of this process, best of ``--repeat``.

    python bench/recv_costs.py --impl brokerless
    python bench/recv_costs.py --impl zmq
"""

from __future__ import annotations

import argparse
import time
from types import ModuleType
from typing import Any

from _harness import describe, emit, load_impl_or_exit

BUFFER = 256 * 1024


def recv_cost(impl: ModuleType, count: int, size: int) -> float:
    """CPU seconds per ``recv()`` of a message already queued."""
    ctx = impl.Context()
    push, pull = ctx.socket(impl.PUSH), ctx.socket(impl.PULL)
    for sock in (push, pull):
        sock.setsockopt(impl.SNDHWM, 0)
        sock.setsockopt(impl.RCVHWM, 0)
    push.bind("inproc://recv-costs")
    pull.connect("inproc://recv-costs")
    payload = bytes(size)
    for _ in range(count):
        push.send(payload)
    recv = pull.recv
    start = time.process_time()
    for _ in range(count):
        recv()
    cost = (time.process_time() - start) / count
    push.close(linger=0)
    pull.close(linger=0)
    ctx.term()
    return cost


def decode_cost(size: int, rounds: int) -> float:
    """CPU seconds per message for brokerless's ZMTP decoder (short final frames)."""
    from brokerless.zmtp.frames import FrameDecoder

    frame = bytes((0, size)) + bytes(size)
    data = frame * (BUFFER // len(frame))
    view = memoryview(bytearray(data))  # what the engine hands the decoder: a recv_into buffer
    decoder = FrameDecoder()
    start = time.process_time()
    for _ in range(rounds):
        decoder.feed(view)
    return (time.process_time() - start) / (rounds * (len(data) // len(frame)))


def run(impl: ModuleType, count: int, size: int, repeat: int) -> dict[str, Any]:
    result: dict[str, Any] = {"tool": "recv_costs", "size": size, **describe(impl)}
    result["recv_ns"] = min(recv_cost(impl, count, size) for _ in range(repeat)) * 1e9
    if impl.__name__ == "brokerless":
        rounds = max(1, count // (BUFFER // (size + 2)))
        result["decode_ns"] = min(decode_cost(size, rounds) for _ in range(repeat)) * 1e9
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", default="brokerless", help="zmq or brokerless")
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="message size (0-255 bytes)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one JSON line")
    args = parser.parse_args(argv)
    if not 0 <= args.size < 256:
        parser.error("--size must be 0-255")
    impl = load_impl_or_exit(args.impl, ("Context", "PUSH", "PULL", "SNDHWM", "RCVHWM"))
    result = run(impl, args.count, args.size, args.repeat)
    human = f"{result['impl']} {result['version']}: recv() {result['recv_ns']:.0f} ns"
    if "decode_ns" in result:
        human += f", ZMTP decode {result['decode_ns']:.0f} ns"
    emit(result, args.json, human + f" per {args.size} B message (CPU, best of {args.repeat})")


if __name__ == "__main__":
    main()
