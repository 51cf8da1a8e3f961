"""What travels between workers: batches of ``[task id, payload]`` pairs.

One message on a worker's virtual port is a batch: frames ``[task, payload, task, payload,
...]``, at most :data:`MAX_BATCH` pairs.  ``task`` is 4 bytes little-endian; task 0 addresses
the receiving worker itself (flow-control credits).  A payload is a msgpack array whose first
item says what it is:

    [TUPLE, source task, stream, anchors {root: edge} or None, serialized values]
    [ACK_INIT, root, xor of edge ids, spout task]      spout -> acker
    [ACK, root, partial xor]                           bolt -> acker
    [FAIL, root]                                       bolt -> acker
    [ACKED, root] / [FAILED, root]                     acker -> spout
    [RESET_TIMEOUT, root]                              bolt -> acker -> spout
    [CREDIT, executor id, count]                       receiving worker -> sending worker
    [BARRIER, source task, checkpoint id]              task -> downstream bolt task
    [BATCH, [message, ...]]                            acker traffic for one task, in one pair

A BATCH holds the acker traffic (ACK_INIT, ACK, FAIL, ACKED, FAILED, RESET_TIMEOUT) one
executor sends one task in one flush (``transfer.py``): one pair on the wire, one queue item in
the receiving worker.  Inside a worker the same messages travel through the queues without
being encoded (a barrier as a :class:`Barrier`, acker traffic as tuples), and two more, never
on the wire,
from the worker to its executors: ``[CHECKPOINT, id]`` (spouts: inject the barrier) and
``[COMMIT, id]`` (the checkpoint is complete; see ``checkpoint.py``).  What a worker accepts
from the network is checked first (``inbound.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .serializer import packer

(
    TUPLE,
    ACK_INIT,
    ACK,
    FAIL,
    ACKED,
    FAILED,
    CREDIT,
    BARRIER,
    CHECKPOINT,
    COMMIT,
    BATCH,
    RESET_TIMEOUT,
) = range(12)
KIND_NAMES = (
    "TUPLE",
    "ACK_INIT",
    "ACK",
    "FAIL",
    "ACKED",
    "FAILED",
    "CREDIT",
    "BARRIER",
    "CHECKPOINT",
    "COMMIT",
    "BATCH",
    "RESET_TIMEOUT",
)
WORKER_TASK = 0  # the task id that addresses the worker itself
MAX_BATCH = 1024  # pairs in one batch: what a worker's sender takes from its queue at once
#: Room for a TUPLE payload's header (source, stream, anchors) on top of its serialized
#: values, in the virtual port's MAXMSGSIZE.
HEADER_ROOM = 1 << 20


def task_frame(task: int) -> bytes:
    return task.to_bytes(4, "little")


def encode(message: Sequence[Any]) -> bytes:
    return packer()(message)


class Barrier:
    """Checkpoint barrier ``checkpoint`` from upstream task ``task``, as a bolt's queue holds
    it (in place of a Tuple; see ``checkpoint.py``)."""

    __slots__ = ("checkpoint", "task")

    def __init__(self, task: int, checkpoint: int) -> None:
        self.task = task
        self.checkpoint = checkpoint

    def __repr__(self) -> str:
        return f"<Barrier {self.checkpoint} from task {self.task}>"
