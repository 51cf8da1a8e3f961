"""Structured Streaming sink: ``df.writeStream.format("brokerless")`` (and ``df.write``, the
same messages, for ``foreachBatch`` and batch jobs).

Each write task (one per partition of a micro-batch, on an executor) opens its own brokerless
PUSH or PUB socket, sends every row as one multipart message and closes the socket only when
the messages have left it, so the end of a task does not cut off the end of its partition.

A message is ``[topic, header, payload]`` for PUB and ``[header, payload]`` for PUSH.  The
header is 20 bytes, big-endian ``batch_id u64 | partition_id u32 | seq u64``: the micro-batch,
the partition within it, and the row's position in that partition from 0 (decode it with
:func:`parse_header`).  When Spark runs a batch again (a retried task, or the last batch after a
restart) it sends the same keys again, as long as the batch's plan is deterministic, so a
consumer that drops a message whose header it has already received gets every row once.
Batches may arrive interleaved: each task writes over a connection of its own, so a consumer
that reads slower than the query writes receives the end of one batch after the start of the
next; a message is not a replay for carrying an older batch id than one already seen.  Spark
replays only a batch it has not committed, and starts a batch only once the one before is
committed, so a batch's keys can be forgotten once a later batch id has come and the batch's
own messages have stopped coming.

Delivery: ZeroMQ has no acknowledgements, so "sent" means handed to a connected peer's TCP
connection.  PUSH waits (up to ``timeoutMs``) for a peer and for room below the high-water mark,
then lingers up to ``timeoutMs`` on close for the queue to drain; a task that cannot do either
fails, and Spark retries it.  PUB never blocks and drops what no subscriber wants: the sink uses
an XPUB socket and waits (up to ``timeoutMs``) until a subscription has arrived before sending,
so a connecting task does not lose its first messages to ZeroMQ's slow-joiner effect.

Bind mode (``bind=true``) binds the endpoint in every task: only one task may hold the port at a
time, so write a single partition (``df.coalesce(1)``), and consumers reconnect once per batch.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, NamedTuple

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, StringType, StructType

import brokerless as zmq

from .endpoints import attach
from .options import OptionError, boolean, check_known, choice, endpoints, positive_int
from .security import OPTIONS as SECURITY_OPTIONS
from .security import PeerSecurity

__all__ = [
    "HEADER",
    "BrokerlessStreamWriter",
    "BrokerlessWriter",
    "MessageHeader",
    "SinkConfig",
    "parse_header",
]

#: ``batch_id u64 | partition_id u32 | seq u64``, big-endian (20 bytes).
HEADER = struct.Struct(">QIQ")

_OPTIONS = (
    "endpoints",
    "socketType",
    "bind",
    "topicColumn",
    "payloadColumn",
    "timeoutMs",
)
_SPARK_OPTIONS = ("checkpointLocation",)  # Spark passes the query's own options along
_WHAT = "sink"
#: What the sink's socket takes in: subscriptions (XPUB) or nothing (PUSH), from any peer.
SUBSCRIPTION_MAX_BYTES = 64 << 10
_BATCH_ID = "streaming.sql.batchId"  # the local property Spark sets on a micro-batch's tasks


class MessageHeader(NamedTuple):
    batch_id: int
    partition_id: int
    seq: int


def parse_header(frame: bytes | memoryview) -> MessageHeader:
    """Decode the header frame of a message the sink sent."""
    if len(frame) != HEADER.size:
        raise ValueError(f"a brokerless sink header is {HEADER.size} bytes, not {len(frame)}")
    return MessageHeader(*HEADER.unpack(frame))


class SinkError(RuntimeError):
    """A write task could not deliver its rows."""


@dataclass(frozen=True)
class SinkConfig:
    """The sink's options, checked against the DataFrame's schema.

    - ``endpoints`` (required): comma-separated ``tcp://`` or ``ipc://`` endpoints (to bind:
      with their port; a port the system picks, ``*`` or ``0``, is refused).
    - ``socketType``: ``PUSH`` (default) or ``PUB``.
    - ``bind``: ``true`` to bind (one writing task at a time), ``false`` (default) to connect.
    - ``payloadColumn``: the binary or string column to send (default ``payload``, else
      ``value``).
    - ``topicColumn``: for PUB, the binary or string column that is the topic frame (default:
      an empty topic, which every subscriber of ``""`` receives).
    - ``timeoutMs``: how long a task may wait for a peer, for room to send, and for its queue to
      drain on close (default 30000).

    Security towards the peers, CURVE or PLAIN: the options of
    :class:`~brokerless.spark.security.PeerSecurity`; e.g. ``curveServerKey`` with
    ``curveSecretKey`` for a sink that connects to a CURVE server.
    """

    endpoints: tuple[str, ...]
    socket_type: str
    bind: bool
    payload_index: int
    topic_index: int | None
    timeout_ms: int
    security: PeerSecurity = field(default_factory=PeerSecurity)

    @classmethod
    def from_options(cls, options: Mapping[str, str], schema: StructType) -> SinkConfig:
        check_known(options, _OPTIONS + SECURITY_OPTIONS, _WHAT, also=_SPARK_OPTIONS)
        socket_type = choice(options, "socketType", ("PUSH", "PUB"), _WHAT)
        payload = options.get("payloadColumn")
        if payload is None:
            names = [name for name in ("payload", "value") if name in schema.fieldNames()]
            if not names:
                raise OptionError(
                    'brokerless sink: no "payload" or "value" column; name the column to send '
                    'with option "payloadColumn"'
                )
            payload = names[0]
        topic = options.get("topicColumn")
        if topic is not None and socket_type != "PUB":
            raise OptionError(
                'brokerless sink: option "topicColumn" applies to socketType PUB only'
            )
        timeout_ms = positive_int(options, "timeoutMs", 30_000, _WHAT)
        assert timeout_ms is not None
        bind = boolean(options, "bind", False, _WHAT)
        return cls(
            endpoints=endpoints(options, "endpoints", _WHAT, bind),
            socket_type=socket_type,
            bind=bind,
            payload_index=_column(schema, payload, "payloadColumn"),
            topic_index=None if topic is None else _column(schema, topic, "topicColumn"),
            timeout_ms=timeout_ms,
            security=PeerSecurity.from_options(options, _WHAT),
        )


def _column(schema: StructType, name: str, option: str) -> int:
    names = schema.fieldNames()
    if name not in names:
        raise OptionError(
            f'brokerless sink: option "{option}": no column {name!r} (columns: {", ".join(names)})'
        )
    field = schema[name]
    if not isinstance(field.dataType, BinaryType | StringType):
        raise OptionError(
            f'brokerless sink: option "{option}": column {name!r} is '
            f"{field.dataType.simpleString()}; it must be binary or string (CAST it)"
        )
    return names.index(name)


def _frames(column: pa.Array[Any]) -> list[bytes]:
    """A binary or string column as message frames (null: an empty frame)."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return [b"" if value is None else value.encode() for value in column.to_pylist()]
    return [b"" if value is None else value for value in column.to_pylist()]


class BrokerlessStreamWriter(DataSourceStreamArrowWriter):
    """The writer behind ``df.writeStream.format("brokerless")`` (takes Arrow batches, not
    rows: Spark then builds no Python object per row beyond the frames themselves)."""

    def __init__(self, config: SinkConfig) -> None:
        self.config = config

    # Arrow batches, as DataSourceStreamArrowWriter.write takes them (pyspark's own override of
    # the row writer's write is no more compatible)
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        return _write_partition(self.config, iterator, streaming=True)


class BrokerlessWriter(DataSourceArrowWriter):
    """The writer behind ``df.write.format("brokerless")``: the same messages.  Inside
    ``foreachBatch`` their header carries the stream's batch id (the job runs with the
    micro-batch's properties), so a consumer drops a replayed batch as from ``writeStream``;
    in a batch job of its own the batch id is 0."""

    def __init__(self, config: SinkConfig) -> None:
        self.config = config

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        return _write_partition(self.config, iterator, streaming=False)


def _write_partition(
    config: SinkConfig, iterator: Iterator[pa.RecordBatch], streaming: bool
) -> WriterCommitMessage:
    """One task's rows as messages (see the module doc); fails the task when no peer takes
    them within ``timeoutMs``."""
    context = TaskContext.get()
    assert context is not None, "write() runs in a Spark task"
    batch_id = context.getLocalProperty(_BATCH_ID)
    if batch_id is None and streaming:
        raise SinkError(
            f"brokerless sink: the task has no {_BATCH_ID!r} property; "
            "the streaming sink runs in streaming queries only"
        )
    batches = (batch for batch in iterator if batch.num_rows)
    first = next(batches, None)
    if first is None:  # an empty partition opens no socket (and waits for no subscriber)
        return WriterCommitMessage()
    zmq_context = zmq.Context()
    sock = zmq_context.socket(zmq.XPUB if config.socket_type == "PUB" else zmq.PUSH)
    authenticator = config.security.apply(sock, zmq_context)  # a PLAIN server's ZAP handler
    try:
        _open(sock, config)
        rows = chain([first], batches)
        _send_rows(sock, config, int(batch_id or 0), context.partitionId(), rows)
        started = time.monotonic()
        sock.close()  # lingers up to timeoutMs while the queue drains
        if authenticator is not None:
            authenticator.stop()
        zmq_context.term()
        # A session still holding messages at the linger deadline is dropped with them, so a
        # close that took the whole linger did not deliver everything.
        if (time.monotonic() - started) * 1000 >= config.timeout_ms:
            raise SinkError(
                f"brokerless sink: messages were still queued after timeoutMs="
                f"{config.timeout_ms} ms; no peer took them"
            )
    finally:
        if authenticator is not None:
            authenticator.stop()  # (again: a no-op once stopped)
        zmq_context.destroy(linger=0)
    return WriterCommitMessage()


def _open(sock: zmq.SyncSocket, config: SinkConfig) -> None:
    """Set up the sink's socket (its security options are set) and attach it."""
    pub = config.socket_type == "PUB"
    sock.setsockopt(zmq.LINGER, config.timeout_ms)
    sock.setsockopt(zmq.SNDTIMEO, config.timeout_ms)
    sock.setsockopt(zmq.MAXMSGSIZE, SUBSCRIPTION_MAX_BYTES)
    hint = " (bind mode: one task at a time; use df.coalesce(1))" if config.bind else ""
    attach(
        sock,
        config.endpoints,
        config.bind,
        lambda verb, endpoint, exc: SinkError(
            f"brokerless sink: cannot {verb} {endpoint}: {exc}{hint}"
        ),
    )
    if pub and not sock.poll(config.timeout_ms):
        raise SinkError(f"brokerless sink: no subscriber within timeoutMs={config.timeout_ms} ms")


def _send_rows(
    sock: zmq.SyncSocket,
    config: SinkConfig,
    batch_id: int,
    partition_id: int,
    batches: Iterator[pa.RecordBatch],
) -> None:
    send, pack = sock.send_multipart, HEADER.pack
    seq = 0
    for batch in batches:
        payloads = _frames(batch.column(config.payload_index))
        if config.socket_type != "PUB":
            messages = ([pack(batch_id, partition_id, seq + i), p] for i, p in enumerate(payloads))
        else:
            at = config.topic_index
            topics = [b""] * len(payloads) if at is None else _frames(batch.column(at))
            messages = (
                [t, pack(batch_id, partition_id, seq + i), p]
                for i, (t, p) in enumerate(zip(topics, payloads, strict=True))
            )
        for frames in messages:
            try:
                send(frames)
            except zmq.Again:
                raise SinkError(
                    f"brokerless sink: could not send within timeoutMs={config.timeout_ms} ms "
                    "(no peer, or peers not reading)"
                ) from None
        seq += len(payloads)
