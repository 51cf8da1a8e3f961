"""Replayable spouts: what a checkpointed topology reads from (``checkpoint.py``).

* :class:`WALSpout` -- the records of a write-ahead log in ``brokerless.stream.wal``'s format
  (the Spark source's, or one that a receiver of your own appends to): positions are sequence
  numbers, so a rollback replays exactly the records after the checkpoint's.  It follows the log
  as it grows: live input with exactly-once state.
* :class:`SequenceSpout` -- a fixed list of tuples, for tests and batch input.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .component import ReplayableSpout, Stream, TopologyContext
from .config import Config
from .wal import LogReader

__all__ = ["SequenceSpout", "WALSpout"]


class SequenceSpout(ReplayableSpout):
    """Emits ``tuples`` once, in order, on the default stream with ``fields``: task i of n
    takes tuples i, i + n, i + 2n, ...; its position is how many of them it emitted; it is
    exhausted when it emitted them all."""

    def __init__(self, tuples: Sequence[Sequence[Any]], fields: Sequence[str] = ("value",)) -> None:
        self.outputs = [Stream(list(fields))]
        self._tuples = [list(t) for t in tuples]
        self._mine: Sequence[int] = ()
        self._next = 0

    def open(self, conf: Config, context: TopologyContext) -> None:
        n = len(context.get_component_tasks(context.component_id))
        self._mine = range(context.task_index, len(self._tuples), n)

    def next_tuple(self) -> None:
        if self._next < len(self._mine):
            values = self._tuples[self._mine[self._next]]
            self._next += 1
            self.emit(values)

    def position(self) -> int:
        return self._next

    def seek(self, position: int) -> None:
        self._next = position

    def exhausted(self) -> bool:
        return self._next >= len(self._mine)


class WALSpout(ReplayableSpout):
    """Emits each record of the write-ahead log in ``directory`` as ``[seq, payload,
    received_at]`` (``payload``: the message's last frame; override :meth:`values` and
    ``outputs`` for another shape), following the log as it grows.  Task i of n emits the
    records whose ``seq % n == i``; a task's position is the last sequence number it read.

    The log's directory must be readable from every worker (a shared mount on a cluster), and
    must still hold the records after the last complete checkpoint (do not trim past it)."""

    outputs = ["seq", "payload", "received_at"]

    def __init__(self, directory: str | os.PathLike[str], batch: int = 64) -> None:
        self.directory = os.fspath(directory)
        self.batch = batch
        self._position = 0

    def open(self, conf: Config, context: TopologyContext) -> None:
        self._tasks = len(context.get_component_tasks(context.component_id))
        self._index = context.task_index
        self._reader = LogReader(self.directory)

    def values(self, record: Any) -> list[Any]:
        """The tuple for one ``brokerless.stream.wal.Record``."""
        return [record.seq, record.frames[-1] if record.frames else b"", record.received_at]

    def next_tuple(self) -> None:
        tasks, index = self._tasks, self._index
        for record in self._reader.read(self.batch):
            self._position = record.seq
            if record.seq % tasks == index:
                self.emit(self.values(record))

    def position(self) -> int:
        return self._position

    def seek(self, position: int) -> None:
        self._reader.close()
        self._reader = LogReader(self.directory, after=position)
        self._position = position

    def close(self) -> None:
        self._reader.close()
