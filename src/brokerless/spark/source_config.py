"""The Structured Streaming source's options, checked (:meth:`SourceConfig.from_options`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .options import OptionError, boolean, check_known, choice, endpoints, positive_int
from .security import OPTIONS as SECURITY_OPTIONS
from .security import PeerSecurity

__all__ = ["SourceConfig", "SourceError"]

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
    "maxBacklogBytes",
    "ack",
)
_WHAT = "source"
_MAX_MESSAGE_SIZE = 1 << 20  # default maxMessageSize: the largest frame a peer may send (bytes)
_RCVHWM = 1000  # default rcvhwm: messages the socket holds for the receiver (libzmq's default)
_MAX_BACKLOG_BYTES = 1 << 30  # default maxBacklogBytes: the log's bytes Spark has not yet taken


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
    max_backlog_bytes: int = _MAX_BACKLOG_BYTES
    ack: bool = False
    security: PeerSecurity = field(default_factory=PeerSecurity)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SourceConfig:
        """Options (names are case-insensitive):

        - ``endpoints`` (required): comma-separated ``tcp://`` or ``ipc://`` endpoints (to
          bind: with their port; a port the system picks, ``*`` or ``0``, is refused).
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
        - ``maxBacklogBytes``: how many bytes of messages the log may hold that Spark has not
          yet taken into a batch (default 1 GiB).  Past it the source stops reading until the
          query's next batch takes some: the socket fills to ``rcvhwm`` and pushes back as
          above, so a peer faster than the query cannot fill the disk.  The log on disk then
          holds at most about this much plus the batches Spark has not yet committed.

        Security towards the peers, CURVE or PLAIN: the options of
        :class:`~brokerless.spark.security.PeerSecurity`; e.g. ``curveServer=true`` with
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
        for topic in topics:
            if topic != topic.strip():
                raise OptionError(
                    f'brokerless source: option "topics" has {topic.decode()!r}, with spaces '
                    "around it: topics are prefixes compared octet for octet, so it would "
                    'match nothing sent without them; write the list without spaces ("a,b")'
                )
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
        bind = boolean(options, "bind", False, _WHAT)
        return cls(
            endpoints=endpoints(options, "endpoints", _WHAT, bind),
            socket_type=socket_type,
            topics=topics,
            bind=bind,
            wal_path=os.path.abspath(wal_path),
            max_rows_per_batch=positive_int(options, "maxRowsPerBatch", None, _WHAT),
            num_partitions=positive_int(options, "numPartitions", 1, _WHAT),
            fsync=boolean(options, "fsync", True, _WHAT),
            max_message_size=positive_int(options, "maxMessageSize", _MAX_MESSAGE_SIZE, _WHAT),
            rcvhwm=positive_int(options, "rcvhwm", _RCVHWM, _WHAT),
            max_backlog_bytes=positive_int(
                options, "maxBacklogBytes", _MAX_BACKLOG_BYTES, _WHAT
            ),
            ack=ack,
            security=PeerSecurity.from_options(options, _WHAT),
        )
