"""A sequence-numbered write-ahead log of received messages: what the Spark source logs
(``brokerless.spark.wal`` is this package under the source's name) and ``WALSpout`` reads;
no Spark import.

Theory of operation
-------------------
The log is a directory of append-only *segment* files, each named by the sequence number of
its first record (``00000000000000000001.wal``).  Sequence numbers start at 1 and have no gaps;
a segment holds the records from its name up to the next segment's name minus one.

A record is framed as ``length u32 | crc32 u32 | body`` (big-endian), with
``body = seq u64 | received_at i64 (µs since the epoch, UTC) | nframes u32 |
(frame length u32 | frame bytes) * nframes``.  The CRC covers the body, so a record that was
cut short by a crash, or bytes that are not a record at all, are recognised.

One writer (the source's receiver thread) calls :meth:`WriteAheadLog.append`, which only encodes
into memory, and then :meth:`WriteAheadLog.flush`, which writes everything pending with one
``write``, optionally ``fsync``s, and only then advances :attr:`WriteAheadLog.durable_seq`.  So
a sequence number is never visible to Spark before its record is on disk (group commit: one
system call per drained batch of messages, not one per message).

Recovery.  Only the last segment can end in a *torn tail*: a crash in the middle of a ``write``
leaves the start of the next record and then nothing (the process died) or zeros (the file grew
but the data never reached the disk).  Opening the log reads the last segment from its start,
truncates a torn tail -- what is left agrees with the start of the record that belongs there:
its number, and frame lengths that do not end before its length says -- and continues the
numbering at that record.  Its number is free again: ``flush`` had not returned for it, so it
was never durable and never shown to Spark.  Anything else that is not the next record is
damage, not a crash -- a bad checksum, a bad record followed by more data, a complete last
record that fails its checksum, a length that runs past the end over bytes that are not that
record: opening raises :class:`WALCorruptError` with the file and the offset and truncates
nothing, since dropping those records would give their numbers, which Spark may already hold,
to new messages.  The numbering survives every other way a writer ends: a segment is named
after the record it will start with before anything is written to it (``_roll`` fsyncs the
directory when ``fsync`` is on), ``trim`` always keeps the last segment (empty, it still names
the next number), and a failed ``flush`` cuts the segment back to its last durable record.

Readers are other processes (Spark executors) and never take the writer's lock: they open the
segment that holds the first wanted number and read forward with :func:`read_range`; the writer
only ever appends past what they were told to read.  :meth:`WriteAheadLog.trim` deletes
segments whose records are all committed; when the active segment is wholly committed it is
closed and a fresh empty one started, so a log whose every record is committed holds no data
and still names the next sequence number.  An exclusive ``flock`` on ``<dir>/.lock`` keeps two
writers (two queries sharing a directory) from interleaving; a new writer waits a little for
the previous one, since Spark ends a stopped query's source process without waiting for it.

A reader that is told nothing (:class:`LogReader`, under ``brokerless.stream.WALSpout``)
follows the files instead: a record is there once it is whole and passes its checksum, and one
cut short is still being written.

Modules: ``records`` (the record and segment format, and reading one record), ``writer``
(:class:`WriteAheadLog`: appending, recovery on open, trimming), ``reader`` (:func:`read_range`,
:class:`LogReader`).
"""

from .reader import LogReader, read_range
from .records import Record, WALCorruptError, WALError, WALLockedError
from .writer import WriteAheadLog

__all__ = [
    "LogReader",
    "Record",
    "WALCorruptError",
    "WALError",
    "WALLockedError",
    "WriteAheadLog",
    "read_range",
]
