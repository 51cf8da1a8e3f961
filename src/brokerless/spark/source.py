"""Structured Streaming source: ``spark.readStream.format("brokerless")``.

Theory of operation
-------------------
Spark keeps the stream reader of a query in a long-lived Python process on the driver (the
streaming source runner) and calls it there: ``initialOffset``, ``latestOffset``,
``partitions``, ``commit`` and ``stop``.  The first of these calls starts a *receiver*: a
brokerless SUB or PULL socket and a thread that drains whatever the socket holds, appends each
message to the write-ahead log (:mod:`brokerless.spark.wal`) and then flushes the log (one
``write`` + ``fsync`` per drained batch).  Only a flushed record's sequence number is visible to
``latestOffset``, so every offset Spark writes to its offset log names records that are on
disk.

An offset is ``{"seq": N}``: every record up to and including ``N`` belongs to the stream so
far.  A new query starts at the record before the oldest one the log holds (``{"seq": 0}``
for a new log).  ``latestOffset`` returns the newest durable record, capped by the read limit
Spark passes (``maxRowsPerBatch`` becomes ``ReadMaxRows``).  ``partitions(start, end)`` splits
``(start, end]`` into contiguous ranges; each range names the log directory, and ``read`` runs
on an executor and reads those records straight from the segment files, so the log directory
must be readable by every executor (local mode: any directory; a cluster: a shared mount).
``commit(end)`` deletes the segments that hold only records ``<= end``.

The socket's limits are options: frames of at most ``maxMessageSize`` bytes (MAXMSGSIZE) and
at most ``rcvhwm`` messages held while the log is busy (RCVHWM).  A full socket stops reading,
so a PUSH peer waits and a PUB peer drops at its own SNDHWM (ZeroMQ's PUB/SUB rule); the
source itself never drops a message its socket took.

A restarted query reopens the same log: the receiver continues the numbering after the last
good record, and Spark asks again for the range it had planned but not committed, which the
log still holds, so nothing is lost or repeated.  An offset Spark passes in must be one this
reader offered or be within what the log held when it reopened: a log that lost records
(``fsync=false`` and a machine crash) would otherwise give their numbers to new messages that
Spark then skips as processed.  Messages still travelling towards the socket when the query
stops are ZeroMQ's to lose (SUB drops what arrives while no subscriber is there; a PUSH peer
keeps queueing for the receiver of the next run when it connected to a source that binds, or
when the source connects to it); what the socket holds at the stop (``rcvhwm`` at most) goes to
the log.  Spark ends the source's process soon after asking it to stop, without waiting: the
receiver's last drain into the log is best effort, and messages taken off the socket but not
yet flushed are lost with the process (at most one drained batch, taken a few milliseconds
earlier).

Why the reader does not start in ``__init__``: Spark also builds a reader in a short-lived
planner process only to ship its ``read`` method to executors; that one must open nothing.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice, pairwise

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    StructField,
    StructType,
    TimestampType,
)

import brokerless as zmq

from . import options as opt
from .endpoints import attach
from .wal import Record, WriteAheadLog, read_range

__all__ = ["SCHEMA", "BrokerlessStreamReader", "SourceConfig", "SourceError", "WalRange"]

#: Columns of the source.  ``topic`` is the first frame for SUB and null for PULL; ``payload``
#: is the last frame; ``frames`` all of them; ``received_at`` when the receiver took the message
#: off the socket; ``seq`` its write-ahead log number (gap-free, increasing in receive order, the
#: same when a batch is replayed: a key to deduplicate on downstream).
SCHEMA = StructType(
    [
        StructField("topic", BinaryType(), True),
        StructField("payload", BinaryType(), False),
        StructField("frames", ArrayType(BinaryType(), False), False),
        StructField("received_at", TimestampType(), False),
        StructField("seq", LongType(), False),
    ]
)

_OPTIONS = (
    "endpoints",
    "socketType",
    "topics",
    "bind",
    "walPath",
    "maxRowsPerBatch",
    "numPartitions",
    "fsync",
    "maxMessageSize",
    "rcvhwm",
)
_WHAT = "source"
_POLL_MS = 100  # how often the receiver looks at its stop flag while no message comes
_MAX_DRAIN = 8192  # messages per log flush at most (bounds the memory of one group commit)
_MAX_MESSAGE_SIZE = 1 << 20  # default maxMessageSize: the largest frame a peer may send (bytes)
_RCVHWM = 1000  # default rcvhwm: messages the socket holds for the receiver (libzmq's default)
_ROWS_PER_ARROW_BATCH = 8192


class SourceError(RuntimeError):
    """The source cannot go on (its socket could not be set up, or its log disagrees)."""


@dataclass(frozen=True)
class SourceConfig:
    """The source's options, checked (see :meth:`from_options` for their meaning)."""

    endpoints: tuple[str, ...]
    socket_type: str
    topics: tuple[bytes, ...]
    bind: bool
    wal_path: str
    max_rows_per_batch: int | None
    num_partitions: int
    fsync: bool
    max_message_size: int
    rcvhwm: int

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SourceConfig:
        """Options (names are case-insensitive):

        - ``endpoints`` (required): comma-separated ``tcp://`` or ``ipc://`` endpoints.
        - ``socketType``: ``SUB`` (default) or ``PULL``.
        - ``topics``: comma-separated topic prefixes for SUB (default: every message).
        - ``bind``: ``true`` to bind the endpoints, ``false`` (default) to connect to them.
        - ``walPath`` (required): the write-ahead log directory, normally
          ``<the query's checkpointLocation>/brokerless-wal``; one per source, kept with the
          checkpoint, readable by every executor.
        - ``maxRowsPerBatch``: at most this many rows per micro-batch (default: all available).
        - ``numPartitions``: split a micro-batch into up to this many read tasks (default 1).
        - ``fsync``: ``true`` (default) to ``fsync`` the log before Spark sees a record, so a
          machine crash loses nothing Spark has planned; ``false`` survives process crashes only.
        - ``maxMessageSize``: the largest frame (message part) a peer may send, in bytes
          (default 1 MiB; ZeroMQ's MAXMSGSIZE): a peer that sends a larger one is disconnected
          as its header arrives, and what it sent before is kept.
        - ``rcvhwm``: how many messages the socket holds for the receiver while the log is busy
          (default 1000; ZeroMQ's RCVHWM).  When it is full the socket stops reading: a PUSH
          peer waits, a PUB peer drops at its own SNDHWM (ZeroMQ's rule for PUB/SUB); a message
          the socket has taken is never dropped.  So what one peer can make the source hold is
          bounded: ``rcvhwm`` messages whose frames are at most ``maxMessageSize`` each.
        """
        opt.check_known(options, _OPTIONS, _WHAT)
        socket_type = opt.choice(options, "socketType", ("SUB", "PULL"), _WHAT)
        raw_topics = options.get("topics")
        if raw_topics is not None and socket_type != "SUB":
            raise opt.OptionError(
                'brokerless source: option "topics" applies to socketType SUB only'
            )
        topics = tuple(t.encode() for t in raw_topics.split(",")) if raw_topics else (b"",)
        wal_path = options.get("walPath")
        if not wal_path:
            raise opt.OptionError(
                'brokerless source: option "walPath" is required: a directory for the '
                "write-ahead log, normally <checkpointLocation>/brokerless-wal (Spark does not "
                "tell a source where the query's checkpoint is)"
            )
        if wal_path.startswith("file:"):
            wal_path = wal_path.removeprefix("file:").removeprefix("//")
        elif "://" in wal_path:
            raise opt.OptionError(
                f'brokerless source: option "walPath" must be a local or mounted directory, '
                f"not {wal_path!r} (the log is written with POSIX file calls)"
            )
        return cls(
            endpoints=opt.endpoints(options, "endpoints", _WHAT),
            socket_type=socket_type,
            topics=topics,
            bind=opt.boolean(options, "bind", False, _WHAT),
            wal_path=os.path.abspath(wal_path),
            max_rows_per_batch=opt.positive_int(options, "maxRowsPerBatch", None, _WHAT),
            num_partitions=opt.positive_int(options, "numPartitions", 1, _WHAT),
            fsync=opt.boolean(options, "fsync", True, _WHAT),
            max_message_size=opt.positive_int(options, "maxMessageSize", _MAX_MESSAGE_SIZE, _WHAT),
            rcvhwm=opt.positive_int(options, "rcvhwm", _RCVHWM, _WHAT),
        )


class WalRange(InputPartition):
    """Records ``after < seq <= upto`` of the log in ``wal_path`` (one read task)."""

    def __init__(self, wal_path: str, after: int, upto: int, topic_frame: bool) -> None:
        self.wal_path = wal_path
        self.after = after
        self.upto = upto
        self.topic_frame = topic_frame

    def __repr__(self) -> str:
        return f"WalRange({self.wal_path!r}, ({self.after}, {self.upto}])"


class _Receiver:
    """The socket, the thread that moves its messages into the log, and the log."""

    def __init__(self, config: SourceConfig) -> None:
        self.wal = WriteAheadLog(config.wal_path, fsync=config.fsync)
        #: The last record the log held when it opened: an offset from an earlier run (Spark's
        #: checkpoint) can name no record past it.
        self.recovered_seq = self.wal.durable_seq
        self.error: BaseException | None = None
        self._rcvhwm = config.rcvhwm
        self._context = zmq.Context()
        self._stopping = threading.Event()
        try:
            self._socket = self._open(config)
        except BaseException:
            self._context.destroy(linger=0)
            self.wal.close()
            raise
        self._thread = threading.Thread(
            target=self._run, name=f"brokerless-source {config.wal_path}", daemon=True
        )
        self._thread.start()

    def _open(self, config: SourceConfig) -> zmq.Socket:
        sock = self._context.socket(zmq.SUB if config.socket_type == "SUB" else zmq.PULL)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, config.max_message_size)
        sock.setsockopt(zmq.RCVHWM, config.rcvhwm)
        if config.socket_type == "SUB":
            for topic in config.topics:
                sock.setsockopt(zmq.SUBSCRIBE, topic)
        attach(
            sock,
            config.endpoints,
            config.bind,
            lambda verb, endpoint, exc: SourceError(
                f"brokerless source: cannot {verb} {endpoint}: {exc}"
            ),
        )
        return sock

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                if self._socket.poll(_POLL_MS):
                    self._drain(_MAX_DRAIN)
            # What the socket holds (RCVHWM messages at most) goes to the log, for the next run.
            self._drain(max(_MAX_DRAIN, self._rcvhwm))
        except BaseException as exc:  # reported to Spark by the next driver-side call
            self.error = exc

    def _drain(self, limit: int) -> None:
        recv, append, now_ns = self._socket.recv_multipart, self.wal.append, time.time_ns
        for _ in range(limit):
            try:
                frames = recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            append(frames, now_ns() // 1000)
        self.wal.flush()

    def check(self) -> WriteAheadLog:
        if self.error is not None:
            raise SourceError(f"brokerless source: the receiver failed: {self.error!r}") from (
                self.error
            )
        return self.wal

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()
        self._socket.close(linger=0)
        self._context.term()
        self.wal.close()


class BrokerlessStreamReader(DataSourceStreamReader):
    """The reader behind ``spark.readStream.format("brokerless")``."""

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        self._receiver: _Receiver | None = None
        self._offered = 0  # the highest offset latestOffset returned

    def _log(self) -> WriteAheadLog:
        """The log, starting the receiver on the first call (driver side only)."""
        if self._receiver is None:
            self._receiver = _Receiver(self.config)
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

    def initialOffset(self) -> dict:
        return {"seq": self._log().first_seq - 1}

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.config.max_rows_per_batch
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = start["seq"]
        end = self._check_known(begin).durable_seq
        if isinstance(limit, ReadMaxRows):
            end = min(end, begin + limit.max_rows)
        self._offered = max(self._offered, end)
        return {"seq": end}

    def reportLatestOffset(self) -> dict:
        return {"seq": self._log().durable_seq}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        after, upto = start["seq"], end["seq"]
        self._check_known(upto)  # a batch an earlier run planned is replayed with these records
        count = upto - after
        parts = min(self.config.num_partitions, max(count, 0))
        bounds = [after + count * i // parts for i in range(parts + 1)] if parts else []
        topic_frame = self.config.socket_type == "SUB"
        return [
            WalRange(self.config.wal_path, low, high, topic_frame) for low, high in pairwise(bounds)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, WalRange)
        records = read_range(partition.wal_path, partition.after, partition.upto)
        while chunk := list(islice(records, _ROWS_PER_ARROW_BATCH)):
            yield _to_arrow(chunk, partition.topic_frame)

    def commit(self, end: dict) -> None:
        self._log().trim(end["seq"])

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


def _to_arrow(records: list[Record], topic_frame: bool) -> pa.RecordBatch:
    frames = [r.frames for r in records]
    topics = [f[0] for f in frames] if topic_frame else [None] * len(records)
    columns = [
        pa.array(topics, pa.binary()),
        pa.array([f[-1] for f in frames], pa.binary()),
        pa.array(frames, _ARROW_SCHEMA.field("frames").type),
        pa.array([r.received_at for r in records], pa.timestamp("us", tz="UTC")),
        pa.array([r.seq for r in records], pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=_ARROW_SCHEMA)
