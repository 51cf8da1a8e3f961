"""Fuzz target: what a worker makes of the batches that reach its virtual port.

``test_one_input(data)`` cuts ``data`` into frames (each a 2-byte little-endian length and
that many bytes; the last one takes what is left) and hands them, as one received batch, to
``Inbound.read`` of worker 0 of a two-worker topology with every kind of receiver: a spout, bolts
on a regular and a cyclic edge, a bolt fed by a second stream, ackers, and bolt executors in
the other worker that it holds credits for.  The invariants:

* ``read`` raises nothing: a bad message is a returned reason, never an exception;
* every pair is either accepted or has a reason (a malformed batch is one reason);
* nothing invalid is accepted, judged here from the protocol (``protocol.py``) and not from
  ``inbound.py``'s code: each accepted item has exactly the shape and types its executor
  handles, and applying it as the executor would (an acker's ledger, a tuple's anchors) works.

Its corpus, ``fuzz/corpus/stream_messages/``, starts from ``seeds()``: valid batches of each
kind and issue 11's bad ones (``named_seeds()`` says which is which), named by content as
libFuzzer names them.
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack

from brokerless.stream import Bolt, Config, Spout, Stream, Topology, shuffle
from brokerless.stream.acker import AckerLedger
from brokerless.stream.assignment import assign
from brokerless.stream.messaging import LocalMessaging, LocalNetwork
from brokerless.stream.protocol import (
    ACK,
    ACK_INIT,
    ACKED,
    CREDIT,
    FAIL,
    FAILED,
    MAX_BATCH,
    TUPLE,
    WORKER_TASK,
    task_frame,
)
from brokerless.stream.tuple import Tuple
from brokerless.stream.worker import Worker

_LENGTH = struct.Struct("<H")


class _Words(Spout):
    outputs = [Stream(["word"]), Stream(["n", "m"], name="pairs")]


class _Relay(Bolt):
    outputs = ["word"]


class _Sink(Bolt):
    pass


def _worker() -> Worker:
    topology = (
        Topology("fuzz", Config(num_workers=2))
        .spout("words", _Words)
        .bolt("relay", _Relay, parallelism=2, inputs={"words": shuffle(), "loop": shuffle()})
        .bolt("loop", _Relay, inputs={"relay": shuffle()})
        .bolt("sink", _Sink, inputs={("words", "pairs"): shuffle(), "relay": shuffle()})
    )
    plan = topology.build()
    return Worker(plan, assign(plan, 2), 0, LocalMessaging(LocalNetwork()))


WORKER = _worker()
_PLAN = WORKER.plan
_SPOUT_TASKS = frozenset(_PLAN.component_tasks["words"])
_EXECUTOR_OF = {id(e.queue): e for e in WORKER.executors}  # by queue


def frames_of(data: bytes) -> list[bytes]:
    """The frames that ``data`` stands for (see the module doc)."""
    frames = []
    pos = 0
    while pos < len(data):
        if pos + _LENGTH.size > len(data):
            frames.append(data[pos:])
            break
        (size,) = _LENGTH.unpack_from(data, pos)
        pos += _LENGTH.size
        frames.append(data[pos : pos + size])
        pos += size
    return frames


def data_of(frames: list[bytes]) -> bytes:
    """The fuzz input that stands for ``frames``."""
    return b"".join(_LENGTH.pack(len(frame)) + frame for frame in frames)


def test_one_input(data: bytes) -> None:
    frames = frames_of(data)
    accepted = WORKER.inbound.read(frames)
    pairs = len(frames) // 2
    if len(frames) % 2 or pairs > MAX_BATCH:  # not a batch: one bad message
        assert (accepted.pairs, len(accepted.bad)) == (0, 1), accepted
    else:
        assert accepted.pairs + len(accepted.bad) == pairs, (accepted, frames)
    assert all(isinstance(reason, str) and reason for reason in accepted.bad)
    assert sum(map(len, accepted.items.values())) + len(accepted.credits) == accepted.pairs
    for queue, items in accepted.items.items():
        executor = _EXECUTOR_OF[id(queue)]
        for item in items:
            _check(executor, item)
    for executor, count in accepted.credits:
        assert type(executor) is int and executor in WORKER.credits.executors, executor
        assert type(count) is int and 0 < count <= WORKER.credit_window, count


def _check(executor: Any, item: Any) -> None:
    assert type(item) is tuple and len(item) == 3, item
    task, message, origin = item
    assert task in executor.task_ids, (task, executor)
    if executor.kind == "bolt":
        _check_tuple(executor, message, origin)
        return
    assert origin is None and type(message) is list, item
    assert all(type(value) is int for value in message), message
    kind = message[0]
    if executor.kind == "spout":
        assert kind in (ACKED, FAILED) and len(message) == 2, message
        return
    assert executor.kind == "acker", executor
    assert (kind, len(message)) in ((ACK_INIT, 4), (ACK, 3), (FAIL, 2)), message
    assert kind != ACK_INIT or message[3] in _SPOUT_TASKS, message
    decided = AckerLedger(30.0, 0.0).update(message)
    assert decided is None or decided[2] in _SPOUT_TASKS, decided


def _check_tuple(executor: Any, tup: Any, origin: Any) -> None:
    assert type(tup) is Tuple, tup
    component = _PLAN.components[executor.component]
    assert (tup.component, tup.stream) in component.inputs, tup
    assert _PLAN.task_component[tup.task] == tup.component, tup
    assert type(tup.values) is tuple and len(tup.values) == len(tup.fields), tup
    anchors = tup._anchors
    assert anchors is None or type(anchors) is dict, anchors
    for root, edge in (anchors or {}).items():
        assert type(root) is int and type(edge) is int, anchors
        assert executor.acker_for(root) in _PLAN.acker_tasks  # what acking it computes
    cyclic = (tup.component, executor.component) in _PLAN.cycle_edges
    assert origin == (None if cyclic else WORKER.task_worker[tup.task]), (tup, origin)


def seeds() -> list[bytes]:
    """The hand-made inputs the corpus starts from."""
    return list(named_seeds().values())


def named_seeds() -> dict[str, bytes]:
    """Valid batches of each kind ("valid-..."), and issue 11's bad ones ("bad-...")."""
    pack = msgpack.Packer(use_bin_type=True).pack
    tasks = _PLAN.component_tasks
    here = WORKER.tasks
    (spout,) = tasks["words"]
    relay = next(t for t in tasks["relay"] if t in here)
    (loop,) = tasks["loop"]
    (sink,) = tasks["sink"]
    acker = next(t for t in _PLAN.acker_tasks if t in here)
    credited = min(WORKER.credits.executors)

    def batch(*pairs: tuple[int, Any]) -> bytes:
        frames = []
        for task, message in pairs:
            frames += [task_frame(task), message if type(message) is bytes else pack(message)]
        return data_of(frames)

    return {
        "valid-tuples": batch(
            (relay, [TUPLE, spout, "default", {1 << 62: 12345}, pack(["word"])]),
            (relay, [TUPLE, loop, "default", None, pack(["cycled"])]),
            (sink, [TUPLE, spout, "pairs", {7: 1, 9: 2}, pack([1, 2])]),
        ),
        "valid-acker-messages": batch(
            (acker, [ACK_INIT, 1 << 40, 99, spout]), (acker, [ACK, 1 << 40, 99]), (acker, [FAIL, 5])
        ),
        "valid-spout-messages": batch((spout, [ACKED, 1 << 40]), (spout, [FAILED, 5])),
        "valid-credit": batch((WORKER_TASK, [CREDIT, credited, WORKER.credit_window])),
        "bad-acked-without-root": batch((spout, [ACKED])),
        "bad-acker-string-checksum": batch((acker, [ACK_INIT, 12345, "x", 1])),
        "bad-not-a-tuple-for-a-bolt": batch((sink, [ACK, 1, 2])),
        "bad-anchors": batch((sink, [TUPLE, relay, "default", {"x": 1}, pack(["w"])])),
        "bad-credit-negative": batch((WORKER_TASK, [CREDIT, credited, -(10**9)])),
        "bad-credit-huge": batch((WORKER_TASK, [CREDIT, credited, 10**12])),
        "bad-odd-frames": data_of([task_frame(spout), pack([ACKED, 1]), task_frame(spout)]),
        "bad-unknown-task": batch((999, [ACKED, 1])),
        "bad-task-frame-length": data_of([b"\x01\x00", pack([ACKED, 1])]),
        "bad-garbage-msgpack": batch((spout, b"\xc1\x92\xff garbage")),
    }
