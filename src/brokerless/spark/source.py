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
Spark then skips as processed.

*Stopping.*  The receiver first stops taking messages from the network
(``Socket.stop_receiving``: its connections read nothing more, its listeners accept nothing
more), then logs everything the socket had taken -- what its pipes hold and what its engines
had decoded -- and fsyncs the log, and only then closes the socket: nothing the source took off
the network is lost.  Spark ends a stopped query's source process with SIGTERM, without
waiting; the receiver catches it (from the process's main thread, where Spark starts it), stops
as above, and then lets SIGTERM end the process.  What ZeroMQ itself cannot promise stays
lost: bytes in the kernels' buffers or on the wire when a connection closes (the source's own
unread ones included: once it stops reading, they are never read), messages a PUB sends while
no subscriber is connected, and what a PUSH had queued for a connection that closed (a bound
PUSH drops it; a PUSH that connected keeps it for the next run).

*Acknowledged ingestion* (``ack=true``, :mod:`brokerless.spark.ingest`) closes that gap: the
socket is a ROUTER; each message carries its sender's id and number, the receiver logs only a
sender's next message (duplicates and out-of-order ones are dropped: see ``AckTable``), and
after each drained batch is fsynced it acknowledges, per sender, the highest number it has
logged.  A :class:`~brokerless.spark.ingest.ReliableSender` keeps every message until it is
acknowledged and sends it again after a reconnection or a timeout, so a sender and a query can
both be killed and restarted at any moment and every message lands in the log once.  The
records of this mode hold ``[sender id, number, payload frames...]``; the columns show the
payload frames only.

Why the reader does not start in ``__init__``: Spark also builds a reader in a short-lived
planner process only to ship its ``read`` method to executors; that one must open nothing.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice, pairwise
from typing import Any

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
from brokerless.auth.thread import ThreadAuthenticator
from brokerless.stream.wal import Record, WriteAheadLog, read_range

from .endpoints import attach
from .ingest import AckTable, Admit, decode_message, encode_ack, payload_of, record_frames
from .options import OptionError, boolean, check_known, choice, endpoints, positive_int
from .security import OPTIONS as SECURITY_OPTIONS
from .security import PeerSecurity

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
    "ack",
)
_WHAT = "source"
_POLL_MS = 100  # how often the receiver looks at its stop flag while no message comes
_ACK_LINGER_MS = 200  # how long the last acknowledgements may take to leave at stop
_NOT_WATCHING = object()  # the receiver has no SIGTERM handler of its own (any more)
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
    ack: bool = False
    security: PeerSecurity = field(default_factory=PeerSecurity)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SourceConfig:
        """Options (names are case-insensitive):

        - ``endpoints`` (required): comma-separated ``tcp://`` or ``ipc://`` endpoints.
        - ``socketType``: ``SUB`` (default) or ``PULL``.
        - ``ack``: ``true`` for acknowledged ingestion (:mod:`brokerless.spark.ingest`): the
          source is a ROUTER, takes messages from :class:`~brokerless.spark.ingest.ReliableSender`
          peers, drops the duplicates their resending makes, and acknowledges each drained
          batch once it is fsynced; ``socketType`` and ``topics`` do not apply (default
          ``false``).
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
        - ``curveServer``, ``curveServerKey``, ``curvePublicKey``, ``curveSecretKey``,
          ``plainServer``, ``plainUsername``, ``plainPassword``, ``zapDomain``: CURVE or PLAIN
          towards the peers (``security.py``); e.g. ``curveServer=true`` with
          ``curveSecretKey`` for a bound source that encrypts what its peers send.
        """
        check_known(options, _OPTIONS + SECURITY_OPTIONS, _WHAT)
        ack = boolean(options, "ack", False, _WHAT)
        if ack and options.get("socketType") is not None:
            raise OptionError(
                'brokerless source: option "socketType" does not apply with ack=true (the '
                "source is then a ROUTER, its peers ReliableSenders)"
            )
        socket_type = "ROUTER" if ack else choice(options, "socketType", ("SUB", "PULL"), _WHAT)
        raw_topics = options.get("topics")
        if raw_topics is not None and socket_type != "SUB":
            raise OptionError('brokerless source: option "topics" applies to socketType SUB only')
        topics = tuple(t.encode() for t in raw_topics.split(",")) if raw_topics else (b"",)
        wal_path = options.get("walPath")
        if not wal_path:
            raise OptionError(
                'brokerless source: option "walPath" is required: a directory for the '
                "write-ahead log, normally <checkpointLocation>/brokerless-wal (Spark does not "
                "tell a source where the query's checkpoint is)"
            )
        if wal_path.startswith("file:"):
            wal_path = wal_path.removeprefix("file:").removeprefix("//")
        elif "://" in wal_path:
            raise OptionError(
                f'brokerless source: option "walPath" must be a local or mounted directory, '
                f"not {wal_path!r} (the log is written with POSIX file calls)"
            )
        return cls(
            endpoints=endpoints(options, "endpoints", _WHAT),
            socket_type=socket_type,
            topics=topics,
            bind=boolean(options, "bind", False, _WHAT),
            wal_path=os.path.abspath(wal_path),
            max_rows_per_batch=positive_int(options, "maxRowsPerBatch", None, _WHAT),
            num_partitions=positive_int(options, "numPartitions", 1, _WHAT),
            fsync=boolean(options, "fsync", True, _WHAT),
            max_message_size=positive_int(options, "maxMessageSize", _MAX_MESSAGE_SIZE, _WHAT),
            rcvhwm=positive_int(options, "rcvhwm", _RCVHWM, _WHAT),
            ack=ack,
            security=PeerSecurity.from_options(options, _WHAT),
        )


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


class _Receiver:
    """The socket, the thread that moves its messages into the log, and the log."""

    def __init__(self, config: SourceConfig) -> None:
        self.wal = WriteAheadLog(config.wal_path, fsync=config.fsync)
        #: The last record the log held when it opened: an offset from an earlier run (Spark's
        #: checkpoint) can name no record past it.
        self.recovered_seq = self.wal.durable_seq
        self.error: BaseException | None = None
        self._acks: AckTable | None = None
        self._authenticator: ThreadAuthenticator | None = None
        self._context = zmq.Context()
        self._stopping = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopped = self._terminating = False
        try:
            if config.ack:
                self._acks = AckTable(config.wal_path)
                self._acks.load(self.wal.first_seq, self.wal.durable_seq)
            self._socket = self._open(config)
        except BaseException:
            self._context.destroy(linger=0)
            self.wal.close()
            raise
        self._previous_sigterm: Any = _NOT_WATCHING
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        self._thread = threading.Thread(
            target=self._run, name=f"brokerless-source {config.wal_path}", daemon=True
        )
        self._thread.start()

    def _open(self, config: SourceConfig) -> zmq.SyncSocket:
        kind = {"SUB": zmq.SUB, "PULL": zmq.PULL, "ROUTER": zmq.ROUTER}[config.socket_type]
        sock = self._context.socket(kind)
        sock.setsockopt(zmq.LINGER, _ACK_LINGER_MS if config.ack else 0)
        sock.setsockopt(zmq.MAXMSGSIZE, config.max_message_size)
        sock.setsockopt(zmq.RCVHWM, config.rcvhwm)
        if config.socket_type == "SUB":
            for topic in config.topics:
                sock.setsockopt(zmq.SUBSCRIBE, topic)
        self._authenticator = config.security.apply(sock, self._context)
        try:
            attach(
                sock,
                config.endpoints,
                config.bind,
                lambda verb, endpoint, exc: SourceError(
                    f"brokerless source: cannot {verb} {endpoint}: {exc}"
                ),
            )
        except BaseException:
            self._stop_authenticator()
            raise
        return sock

    def _stop_authenticator(self) -> None:
        """End the ZAP handler (a PLAIN server's), before the context ends."""
        if self._authenticator is not None:
            self._authenticator.stop()
            self._authenticator = None

    def _run(self) -> None:
        drain = self._drain if self._acks is None else self._drain_acknowledged
        try:
            while not self._stopping.is_set():
                if self._socket.poll(_POLL_MS):
                    drain()
            # Stopping: nothing more from the network; everything the socket took goes to the
            # log (and, with acks, is acknowledged) before it closes.
            self._socket.stop_receiving()
            while drain() == _MAX_DRAIN:
                pass
        except BaseException as exc:  # reported to Spark by the next driver-side call
            self.error = exc

    def _drain(self) -> int:
        """Log (and flush) up to ``_MAX_DRAIN`` messages the socket holds; returns how many."""
        recv, append, now_ns = self._socket.recv_multipart, self.wal.append, time.time_ns
        taken = 0
        while taken < _MAX_DRAIN:
            try:
                frames = recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            append(frames, now_ns() // 1000)
            taken += 1
        self.wal.flush()
        return taken

    def _drain_acknowledged(self) -> int:
        """``_drain`` for ``ack=true``: log each sender's next messages, drop what it sent
        twice or out of order, flush, then acknowledge (see ``ingest.py``)."""
        acks = self._acks
        assert acks is not None
        sock, now = self._socket, time.time_ns() // 1000
        answer: dict[bytes, bytes] = {}  # sender -> the routing id its messages came from
        taken = 0
        while taken < _MAX_DRAIN:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            taken += 1
            message = decode_message(frames[1:])
            if message is None:
                continue  # not a ReliableSender's: dropped
            sender, seq, base, payload = message
            admitted = acks.admit(sender, seq, base)
            if admitted is Admit.LOG:
                self.wal.append(record_frames(sender, seq, payload), now)
            if admitted is not Admit.REFUSED:
                answer[sender] = frames[0]
        self.wal.flush()
        acks.flushed()
        for sender, route in answer.items():
            reply = [route, *encode_ack(sender, acks.durable_upto(sender))]
            try:
                sock.send_multipart(reply, zmq.NOBLOCK)
            except zmq.ZMQError:  # that connection is gone: the sender asks again
                pass
        return taken

    def check(self) -> WriteAheadLog:
        if self.error is not None:
            raise SourceError(f"brokerless source: the receiver failed: {self.error!r}") from (
                self.error
            )
        return self.wal

    def commit(self, upto: int) -> None:
        """Spark has processed every record up to ``upto``: drop them from the log (after
        saving the senders' table, which the log can no longer rebuild them from)."""
        if self._acks is not None:
            self._acks.save()
        self.wal.trim(upto)

    def stop(self) -> None:
        """Stop taking messages, log (and fsync) everything the socket took, close.  A second
        caller waits until the first is done."""
        with self._stop_lock:
            if not self._stopped:
                try:
                    self._stopping.set()
                    self._thread.join()
                    self._socket.close()
                    self._stop_authenticator()
                    self._context.term()
                    self.wal.close()
                finally:
                    self._stopped = True
        self._end_sigterm_watch()

    # -- SIGTERM -------------------------------------------------------------------------------
    # Spark ends a stopped query's source process with SIGTERM, without waiting: the default
    # action would kill it with messages taken off the network but not yet in the log.  So the
    # receiver stops first (everything it took goes to the log, fsynced), then the process ends
    # as SIGTERM asked.  The stop runs in a thread of its own: the handler runs in the main
    # thread between any two bytecodes, and the code it interrupted may hold a lock the stop
    # needs (the log's, during a commit).  The runner's own call to stop() waits for that
    # thread, and so does the interpreter before it exits (not a daemon).

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self._terminating = True
        if self._stopped:
            self._end_sigterm_watch()  # the process ends now
        else:
            threading.Thread(target=self.stop, name="brokerless-source stop").start()

    def _end_sigterm_watch(self) -> None:
        """Put the previous SIGTERM handler back -- and end the process if SIGTERM came: from
        the main thread at once, from another by sending SIGTERM again (the main thread's
        handler then finds the receiver stopped)."""
        if self._previous_sigterm is _NOT_WATCHING:
            return
        if threading.current_thread() is not threading.main_thread():
            if self._terminating:
                os.kill(os.getpid(), signal.SIGTERM)
            return
        signal.signal(signal.SIGTERM, self._previous_sigterm)
        self._previous_sigterm = _NOT_WATCHING
        if self._terminating:
            signal.raise_signal(signal.SIGTERM)


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

    def initialOffset(self) -> dict[str, int]:
        return {"seq": self._log().first_seq - 1}

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.config.max_rows_per_batch
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        begin = start["seq"]
        end = self._check_known(begin).durable_seq
        if isinstance(limit, ReadMaxRows):
            end = min(end, begin + limit.max_rows)
        self._offered = max(self._offered, end)
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
