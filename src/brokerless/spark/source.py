"""Structured Streaming source: ``spark.readStream.format("brokerless")``.

Theory of operation
-------------------
Spark keeps the stream reader of a query in a long-lived Python process on the driver (the
streaming source runner) and calls it there: ``initialOffset``, ``latestOffset``,
``partitions``, ``commit`` and ``stop``.  The first of these calls starts a *receiver*: a
brokerless SUB, PULL (or, with ``ack=true``, ROUTER) socket and a thread that drains whatever
the socket holds, appends each message to the write-ahead log (:mod:`brokerless.spark.wal`)
and then flushes the log (one ``write`` + ``fsync`` per drained batch).  Only a flushed
record's sequence number is visible to ``latestOffset``, so every offset Spark writes to its
offset log names records that are on disk.

An offset is ``{"seq": N}``: every record up to and including ``N`` belongs to the stream so
far.  A new query starts at the record before the oldest one the log holds (``{"seq": 0}``
for a new log).  ``latestOffset`` returns the newest durable record, capped by the read limit
Spark passes (``maxRowsPerBatch`` becomes ``ReadMaxRows``).  ``partitions(start, end)`` splits
``(start, end]`` into contiguous ranges; each range names the log directory, and ``read`` runs
on an executor and reads those records straight from the segment files, so the log directory
must be readable by every executor (local mode: any directory; a cluster: a shared mount; a
read task that does not find it says so, naming its host).
``commit(end)`` deletes the segments that hold only records ``<= end``.

The socket's limits are options: frames of at most ``maxMessageSize`` bytes (MAXMSGSIZE) and
at most ``rcvhwm`` messages held while the log is busy (RCVHWM); and the log's, at most
``maxBacklogBytes`` of messages that ``latestOffset`` has not yet offered (then the receiver
reads nothing until it does).  A full socket stops reading, so a PUSH peer waits and a PUB
peer drops at its own SNDHWM (ZeroMQ's PUB/SUB rule); the source itself never drops a message
its socket took.

A restarted query reopens the same log: the receiver continues the numbering after the last
good record, and Spark asks again for the range it had planned but not committed, which the
log still holds, so nothing is lost or repeated.  An offset Spark passes in must be one this
reader offered or be within what the log held when it reopened: a log that lost records
(``fsync=false`` and a machine crash) would otherwise give their numbers to new messages that
Spark then skips as processed.

*The first batch, and Trigger.AvailableNow*: a message stream keeps no backlog of its own, so
what is "available" when a query starts is what its peers have queued for it, which arrives
once they have connected.  The first ``latestOffset`` of a reader lets the receiver read until
its socket has been quiet for ``FIRST_QUIET`` seconds (at most ``FIRST_MOST``), so the first
batch -- the only one of a ``once`` trigger -- holds it.  Spark calls
``prepareForTriggerAvailableNow`` first for an AvailableNow query; the receiver then reads until
the socket has been quiet for ``SETTLE_QUIET`` seconds (at most ``SETTLE_MOST``: a peer that
never pauses), and the log's end is the query's target: ``latestOffset`` goes no further (in
batches of ``maxRowsPerBatch``), and what comes later waits for the next run.  Before, the end
was taken a moment after the socket opened -- before its peers had connected -- and what they
had queued was only read in the run after.

The receiver -- the socket, its thread and the log, how it stops without losing what it took,
and acknowledged ingestion (``ack=true``) -- is ``receiver.py``; the options are
``source_config.py``.

Why the reader does not start in ``__init__``: Spark also builds a reader in a short-lived
planner process only to ship its ``read`` method to executors; that one must open nothing.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Sequence
from itertools import islice, pairwise

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    StructField,
    StructType,
    TimestampType,
)

from brokerless.stream.wal import Record, WriteAheadLog, read_range

from .ingest import payload_of
from .receiver import Receiver
from .source_config import SourceConfig, SourceError

__all__ = ["SCHEMA", "BrokerlessStreamReader", "SourceConfig", "SourceError", "WalRange"]

#: Columns of the source.  ``topic`` is the first frame for SUB and null otherwise; ``payload``
#: is the last frame; ``frames`` all of them (for ``ack=true``: all the sender's);
#: ``received_at`` when the receiver took the message off the socket; ``seq`` its write-ahead
#: log number (gap-free, increasing in receive order, the same when a batch is replayed: a key
#: to deduplicate on downstream).
SCHEMA = StructType(
    [
        StructField("topic", BinaryType(), True),
        StructField("payload", BinaryType(), False),
        StructField("frames", ArrayType(BinaryType(), False), False),
        StructField("received_at", TimestampType(), False),
        StructField("seq", LongType(), False),
    ]
)

_ROWS_PER_ARROW_BATCH = 8192


class WalRange(InputPartition):
    """Records ``after < seq <= upto`` of the log in ``wal_path`` (one read task), logged by a
    source of ``socket_type`` (what its records' frames are)."""

    def __init__(self, wal_path: str, after: int, upto: int, socket_type: str) -> None:
        self.wal_path = wal_path
        self.after = after
        self.upto = upto
        self.socket_type = socket_type

    def __repr__(self) -> str:
        return f"WalRange({self.wal_path!r}, ({self.after}, {self.upto}])"


#: Trigger.AvailableNow's target: the log's end once the socket has been quiet this long (s),
#: or after at most ``SETTLE_MOST``; the first batch's, ``FIRST_*`` (see the module doc).
SETTLE_QUIET = 0.5
SETTLE_MOST = 5.0
FIRST_QUIET = 0.2
FIRST_MOST = 1.0


class BrokerlessStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The reader behind ``spark.readStream.format("brokerless")``."""

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        self._receiver: Receiver | None = None
        self._offered = 0  # the highest offset latestOffset returned
        self._target: int | None = None  # Trigger.AvailableNow's (see the module doc)
        self._first = True  # no latestOffset yet

    def prepareForTriggerAvailableNow(self) -> None:
        self._log()
        assert self._receiver is not None
        self._target = self._receiver.settle(SETTLE_QUIET, SETTLE_MOST)

    def _log(self) -> WriteAheadLog:
        """The log, starting the receiver on the first call (driver side only)."""
        if self._receiver is None:
            self._receiver = Receiver(self.config)
        return self._receiver.check()

    def _check_known(self, seq: int) -> WriteAheadLog:
        """The log, after checking that offset ``seq`` from Spark names a record it had: one
        this reader offered, or one from the checkpoint of an earlier run, which must be in
        the log as it reopened -- else records were lost, and new messages, numbered on from
        the log's end, would be taken for records Spark has already processed."""
        wal = self._log()
        assert self._receiver is not None
        recovered = self._receiver.recovered_seq
        if seq > max(recovered, self._offered):
            raise SourceError(
                f"brokerless source: the checkpoint has processed up to record {seq}, but the "
                f"write-ahead log at {self.config.wal_path} ended at {recovered} when it "
                "opened: the log lost records (fsync=false and a machine crash, or the "
                "directory was replaced). Start the query with a new checkpoint location and "
                "walPath."
            )
        return wal

    def initialOffset(self) -> dict[str, int]:
        return {"seq": self._log().first_seq - 1}

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.config.max_rows_per_batch
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        begin = start["seq"]
        wal = self._check_known(begin)
        if self._first and self._target is None:  # the first batch (the module doc)
            assert self._receiver is not None
            self._receiver.settle(FIRST_QUIET, FIRST_MOST)
        self._first = False
        end = wal.durable_seq
        if self._target is not None:
            end = max(begin, min(end, self._target))
        if isinstance(limit, ReadMaxRows):
            end = min(end, begin + limit.max_rows)
        self._offered = max(self._offered, end)
        assert self._receiver is not None
        self._receiver.taken(self._offered)  # the backlog shrinks (receiver.py)
        return {"seq": end}

    def reportLatestOffset(self) -> dict[str, int]:
        return {"seq": self._log().durable_seq}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        after, upto = start["seq"], end["seq"]
        self._check_known(upto)  # a batch an earlier run planned is replayed with these records
        count = upto - after
        parts = min(self.config.num_partitions, max(count, 0))
        bounds = [after + count * i // parts for i in range(parts + 1)] if parts else []
        kind = self.config.socket_type
        return [WalRange(self.config.wal_path, low, high, kind) for low, high in pairwise(bounds)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, WalRange)
        if not os.path.isdir(partition.wal_path):
            raise SourceError(
                f"brokerless source: walPath {partition.wal_path} is not a directory on "
                f"{socket.gethostname()}, where this read task runs: the source logs on the "
                "driver and its read tasks read the log on the executors, so walPath must be on "
                "storage every executor can read at the same path (a shared mount)"
            )
        records = read_range(partition.wal_path, partition.after, partition.upto)
        while chunk := list(islice(records, _ROWS_PER_ARROW_BATCH)):
            yield _to_arrow(chunk, partition.socket_type)

    def commit(self, end: dict[str, int]) -> None:
        self._log()
        assert self._receiver is not None
        self._receiver.commit(end["seq"])

    def stop(self) -> None:
        if self._receiver is not None:
            self._receiver.stop()
            self._receiver = None


_ARROW_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.binary(), True),
        pa.field("payload", pa.binary(), False),
        pa.field("frames", pa.list_(pa.field("element", pa.binary(), False)), False),
        pa.field("received_at", pa.timestamp("us", tz="UTC"), False),
        pa.field("seq", pa.int64(), False),
    ]
)


def _to_arrow(records: list[Record], socket_type: str) -> pa.RecordBatch:
    if socket_type == "ROUTER":  # ack=true: the sender and its number come first
        frames = [list(payload_of(r.frames)) for r in records]
    else:
        frames = [r.frames for r in records]
    topics = [f[0] for f in frames] if socket_type == "SUB" else [None] * len(records)
    columns = [
        pa.array(topics, pa.binary()),
        pa.array([f[-1] for f in frames], pa.binary()),
        pa.array(frames, _ARROW_SCHEMA.field("frames").type),
        pa.array([r.received_at for r in records], pa.timestamp("us", tz="UTC")),
        pa.array([r.seq for r in records], pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=_ARROW_SCHEMA)
