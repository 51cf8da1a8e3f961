"""A sequence-numbered write-ahead log of received messages (no Spark import).

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
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, NamedTuple

__all__ = [
    "LogReader",
    "Record",
    "WALCorruptError",
    "WALError",
    "WALLockedError",
    "WriteAheadLog",
    "read_range",
]

_HEADER = struct.Struct(">II")  # body length, crc32 of the body
_BODY = struct.Struct(">QqI")  # seq, received_at (µs), number of frames
_FRAME = struct.Struct(">I")  # frame length
_SEQ = struct.Struct(">Q")  # the start of a body
_SUFFIX = ".wal"
_LOCK = ".lock"
#: The largest record body; a length field above it is damage, not a record.
_MAX_RECORD = 1 << 31
_LOCK_POLL = 0.05  # seconds between attempts to take a lock another process holds


class WALError(Exception):
    """Base class of write-ahead log errors."""


class WALLockedError(WALError):
    """Another writer holds the log directory."""


class WALCorruptError(WALError):
    """A record that should be there is missing or damaged.

    ``path`` and ``offset`` say where the damaged record starts, when that is known."""

    def __init__(self, message: str, path: Path | None = None, offset: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset


class _TornTail(Exception):
    """(internal) The rest of the segment is a record cut short by a crash."""


class Record(NamedTuple):
    seq: int
    received_at: int  # microseconds since the epoch, UTC
    frames: list[bytes]


def _segment_name(first_seq: int) -> str:
    return f"{first_seq:020d}{_SUFFIX}"


def _segments(directory: Path) -> list[tuple[int, Path]]:
    """The segment files, oldest first, as (first sequence number, path)."""
    found = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith(_SUFFIX) and name[: -len(_SUFFIX)].isdigit():
            found.append((int(name[: -len(_SUFFIX)]), Path(entry.path)))
    found.sort()
    return found


def _encode(seq: int, received_at: int, frames: Sequence[bytes]) -> bytes:
    parts = [_BODY.pack(seq, received_at, len(frames))]
    for frame in frames:
        parts.append(_FRAME.pack(len(frame)))
        parts.append(frame)
    body = b"".join(parts)
    if len(body) > _MAX_RECORD:
        raise ValueError(f"a message of {len(body)} bytes is larger than a log record can be")
    return _HEADER.pack(len(body), zlib.crc32(body)) + body


def _decode(body: bytes) -> Record:
    seq, received_at, count = _BODY.unpack_from(body)
    pos = _BODY.size
    frames = []
    for _ in range(count):
        (size,) = _FRAME.unpack_from(body, pos)
        pos += _FRAME.size
        frames.append(body[pos : pos + size])
        pos += size
    if pos != len(body):
        raise ValueError("frame lengths do not add up to the record")
    return Record(seq, received_at, frames)


def _take_lock(directory: Path, timeout: float) -> BinaryIO:
    """Open and ``flock`` the lock file, polling until ``timeout`` while another process has it."""
    lock_file = open(directory / _LOCK, "a+b")  # noqa: SIM115 (held until close)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock_file
        except BlockingIOError:
            if time.monotonic() >= deadline:
                lock_file.close()
                raise WALLockedError(
                    f"write-ahead log {directory} is in use by another writer "
                    "(two queries or two sources must not share a WAL directory)"
                ) from None
            time.sleep(_LOCK_POLL)


def _verified(body: bytes, crc: int, seq: int) -> Record:
    """The record in ``body``; ValueError saying what is wrong when it is not record ``seq``."""
    if zlib.crc32(body) != crc:
        raise ValueError("its checksum does not match")
    try:
        record = _decode(body)
    except struct.error:
        raise ValueError("its frames run past its length") from None
    if record.seq != seq:
        raise ValueError(f"it holds record {record.seq}")
    return record


def _starts_record(present: bytes, length: int, seq: int) -> bool:
    """Whether ``present`` (shorter than ``length``) can be the start of the body of record
    ``seq`` that is ``length`` bytes long."""
    if not _BODY.size <= length <= _MAX_RECORD:
        return False
    if len(present) < _BODY.size:
        return present[: _SEQ.size] == _SEQ.pack(seq)[: len(present)]
    found, _, count = _BODY.unpack_from(present)
    if found != seq:
        return False
    end = _BODY.size
    for _ in range(count):
        if end + _FRAME.size > len(present):
            return end + _FRAME.size <= length
        (size,) = _FRAME.unpack_from(present, end)
        end += _FRAME.size + size
        if end > length:
            return False
        if end > len(present):
            return True
    return False  # every frame is there, and they end before ``length``: not this record


def _is_torn_tail(tail: bytes, seq: int) -> bool:
    """Whether ``tail``, the rest of a segment from where record ``seq`` belongs, is what a crash
    in the middle of writing it leaves: the start of that record, then nothing or zeros."""
    written = tail.rstrip(b"\0")
    if len(written) < _HEADER.size:
        return True
    length, _ = _HEADER.unpack_from(written)
    return len(written) < _HEADER.size + length and _starts_record(
        written[_HEADER.size :], length, seq
    )


def _read_record(stream: BinaryIO, path: Path, seq: int, size: int) -> Record | None:
    """Record ``seq``, read at the stream's position in a file of ``size`` bytes; None at the
    end of the file.  Raises :class:`_TornTail` when the rest of the file is a torn tail and
    :class:`WALCorruptError` when the bytes there are not record ``seq`` (see the module doc)."""
    offset = stream.tell()
    rest = size - offset
    if rest <= 0:
        return None
    reason = "its header is cut short"
    header = stream.read(_HEADER.size)
    if len(header) == _HEADER.size:
        length, crc = _HEADER.unpack(header)
        if length > rest - _HEADER.size:
            reason = f"its length, {length}, runs past the end of the file"
        else:
            try:
                return _verified(stream.read(length), crc, seq)
            except ValueError as exc:
                reason = str(exc)
    stream.seek(offset)
    if _is_torn_tail(stream.read(rest), seq):
        raise _TornTail
    raise WALCorruptError(
        f"write-ahead log {path}: record {seq} at offset {offset} is damaged ({reason})",
        path,
        offset,
    )


def _recover(path: Path, first_seq: int) -> tuple[int, int]:
    """Check segment ``path`` from its start and truncate a torn tail; return (records,
    bytes) it holds.  Raises :class:`WALCorruptError` for damage (nothing is truncated)."""
    with open(path, "r+b") as stream:
        size = os.fstat(stream.fileno()).st_size
        count = good_end = 0
        while True:
            try:
                if _read_record(stream, path, first_seq + count, size) is None:
                    return count, good_end
            except _TornTail:
                stream.truncate(good_end)  # never durable, never served
                return count, good_end
            count += 1
            good_end = stream.tell()


def read_range(directory: str | os.PathLike[str], after: int, upto: int) -> Iterator[Record]:
    """Records ``after < seq <= upto`` from the log in ``directory``, in order.

    Safe to call from any process while a writer appends, as long as ``upto`` was durable when
    it was chosen.  Raises :class:`WALCorruptError` when a wanted record is gone or damaged.
    """
    if upto <= after:
        return
    directory = Path(directory)
    wanted = after + 1
    segments = [(first, path) for first, path in _segments(directory) if first <= upto]
    start = max((i for i, (first, _) in enumerate(segments) if first <= wanted), default=None)
    if start is None:
        raise WALCorruptError(
            f"write-ahead log {directory}: record {wanted} is no longer in the log "
            "(trimmed, or the directory was replaced)"
        )
    for index, (first, path) in enumerate(segments[start:]):
        if index and first != wanted:
            raise WALCorruptError(
                f"write-ahead log {directory}: expected record {wanted}, "
                f"segment {path.name} starts at {first}"
            )
        with open(path, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            for _ in range(wanted - first):  # before the range: skip the bodies unread
                header = stream.read(_HEADER.size)
                if len(header) < _HEADER.size:
                    break
                stream.seek(_HEADER.unpack(header)[0], os.SEEK_CUR)
            while wanted <= upto:
                offset = stream.tell()
                try:
                    record = _read_record(stream, path, wanted, size)
                except _TornTail:
                    raise WALCorruptError(
                        f"write-ahead log {path}: record {wanted} at offset {offset} is cut short",
                        path,
                        offset,
                    ) from None
                if record is None:
                    break  # end of this segment; the next one goes on
                yield record
                wanted += 1
        if wanted > upto:
            return
    raise WALCorruptError(f"write-ahead log {directory}: records {wanted}..{upto} are missing")


class WriteAheadLog:
    """The writer side of a log directory: append, flush (durable), trim, close.

    ``fsync=True`` makes :meth:`flush` survive an operating-system crash or power loss;
    with ``fsync=False`` it survives the process (the data is in the page cache).  Opening waits
    up to ``lock_timeout`` seconds for a previous writer to let go (a process Spark is ending).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        fsync: bool = True,
        segment_bytes: int = 64 << 20,
        lock_timeout: float = 10.0,
    ) -> None:
        self.directory = Path(directory)
        self.fsync = fsync
        self.segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_file = _take_lock(self.directory, lock_timeout)
        segments = _segments(self.directory)
        if not segments:
            segments = [(1, self.directory / _segment_name(1))]
            segments[0][1].touch()
        first, path = segments[-1]
        try:
            count, good_end = _recover(path, first)
        except BaseException:
            self._lock_file.close()
            raise
        self._segments = segments
        self._active_records = count
        self._active_size = good_end
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 (stays open)
        self._next_seq = first + count
        #: Highest sequence number whose record is flushed (0 when nothing was ever logged).
        self.durable_seq = self._next_seq - 1

    def __repr__(self) -> str:
        return (
            f"<WriteAheadLog {self.directory} records {self.first_seq}..{self.durable_seq}, "
            f"{len(self._segments)} segments, {len(self._pending)} pending>"
        )

    @property
    def first_seq(self) -> int:
        """Lowest sequence number still held (``durable_seq + 1`` when empty)."""
        return self._segments[0][0]

    def append(self, frames: Sequence[bytes], received_at: int) -> int:
        """Queue a message (``received_at`` in µs since the epoch); durable after :meth:`flush`."""
        with self._lock:
            seq = self._next_seq
            self._pending.append(_encode(seq, received_at, frames))
            self._next_seq = seq + 1
            return seq

    def flush(self) -> int:
        """Write what :meth:`append` queued, make it durable, and return :attr:`durable_seq`."""
        with self._lock:
            if not self._pending:
                return self.durable_seq
            if self._active_size >= self.segment_bytes and self._active_records:
                self._roll()
            data = b"".join(self._pending)
            count = len(self._pending)
            try:
                view = memoryview(data)
                while view:
                    view = view[self._file.write(view) :]
                if self.fsync:
                    os.fsync(self._file.fileno())
            except BaseException:
                # Nothing of this flush counts: the segment ends at its last good record again
                # and the records stay pending (a later flush may write them).
                os.ftruncate(self._file.fileno(), self._active_size)
                raise
            self._pending.clear()
            self._active_size += len(data)
            self._active_records += count
            self.durable_seq += count
            return self.durable_seq

    def read(self, after: int, upto: int) -> Iterator[Record]:
        """Records ``after < seq <= upto`` (``upto`` at most :attr:`durable_seq`)."""
        if upto > self.durable_seq:
            raise ValueError(f"record {upto} is not durable yet (durable up to {self.durable_seq})")
        return read_range(self.directory, after, upto)

    def trim(self, upto: int) -> int:
        """Delete the segments whose records are all ``<= upto``; return how many."""
        with self._lock:
            if self._active_records and self.durable_seq <= upto:
                self._roll()
            dead = 0
            while len(self._segments) > 1 and self._segments[1][0] - 1 <= upto:
                self._segments[0][1].unlink()
                del self._segments[0]
                dead += 1
            return dead

    def close(self) -> None:
        """Flush what is pending, close the files and let go of the directory."""
        if self._file.closed:
            return
        self.flush()
        self._file.close()
        self._lock_file.close()  # releases the flock

    def __enter__(self) -> WriteAheadLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _roll(self) -> None:
        """Start a new segment at the next durable position (lock held)."""
        self._file.close()
        first = self.durable_seq + 1
        path = self.directory / _segment_name(first)
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 (stays open)
        self._segments.append((first, path))
        self._active_records = 0
        self._active_size = 0
        if self.fsync:  # the new name must survive a crash along with the records put in it
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


class LogReader:
    """Follows a log while its writer -- in this process or another -- appends to it.

    :meth:`read` returns the records after the last one it returned (at first, after
    ``after``) that are complete in the files now: it stops quietly at the end of the log or
    at a record still being written, and goes on from there on the next call, moving to the
    next segment when the writer starts one.  A wanted record that is damaged, or no longer in
    the log (trimmed), raises :class:`WALCorruptError`.  A record is read once it is written,
    which may be before the writer's ``fsync`` returns (then only an operating-system crash
    could take it back).
    """

    def __init__(self, directory: str | os.PathLike[str], after: int = 0) -> None:
        self.directory = Path(directory)
        self.next_seq = after + 1  # the next record read returns
        self._stream: BinaryIO | None = None
        self._path = self.directory
        self._at = 0  # the number of the record at the stream's position

    def read(self, max_records: int) -> list[Record]:
        records: list[Record] = []
        while len(records) < max_records:
            if self._stream is None and not self._open():
                break
            stream = self._stream
            assert stream is not None
            offset = stream.tell()
            try:
                record = _read_record(
                    stream, self._path, self._at, os.fstat(stream.fileno()).st_size
                )
            except _TornTail:  # still being written
                stream.seek(offset)
                break
            if record is None:  # the end of this segment: the writer may have started another
                if not (self.directory / _segment_name(self._at)).exists():
                    break
                self.close()
                continue
            self._at += 1
            if record.seq >= self.next_seq:
                records.append(record)
                self.next_seq = record.seq + 1
        return records

    def _open(self) -> bool:
        """Open the segment that holds (or will hold) ``next_seq``; False if there is none yet."""
        segments = _segments(self.directory)
        held = [(first, path) for first, path in segments if first <= self.next_seq]
        if not held:
            if segments:
                raise WALCorruptError(
                    f"write-ahead log {self.directory}: record {self.next_seq} is no longer in "
                    f"the log (it starts at {segments[0][0]})"
                )
            return False
        first, self._path = held[-1]
        self._stream = open(self._path, "rb")  # noqa: SIM115 (kept open between reads)
        self._at = first
        return True

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
