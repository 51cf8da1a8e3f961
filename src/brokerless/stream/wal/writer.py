"""The writer of a log directory (see the package doc)."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from .reader import read_range
from .records import (
    LOCK,
    LOCK_POLL,
    Record,
    TornTail,
    WALLockedError,
    encode,
    list_segments,
    read_record,
    segment_name,
)


def _take_lock(directory: Path, timeout: float) -> BinaryIO:
    """Open and ``flock`` the lock file, polling until ``timeout`` while another process has it."""
    lock_file = open(directory / LOCK, "a+b")  # noqa: SIM115 (held until close)
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
            time.sleep(LOCK_POLL)


def _recover(path: Path, first_seq: int) -> tuple[int, int]:
    """Check segment ``path`` from its start and truncate a torn tail; return (records,
    bytes) it holds.  Raises :class:`WALCorruptError` for damage (nothing is truncated)."""
    with open(path, "r+b") as stream:
        size = os.fstat(stream.fileno()).st_size
        count = good_end = 0
        while True:
            try:
                if read_record(stream, path, first_seq + count, size) is None:
                    return count, good_end
            except TornTail:
                stream.truncate(good_end)  # never durable, never served
                return count, good_end
            count += 1
            good_end = stream.tell()


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
        segments = list_segments(self.directory)
        if not segments:
            segments = [(1, self.directory / segment_name(1))]
            segments[0][1].touch()
        first, path = segments[-1]
        try:
            count, good_end = _recover(path, first)
        except BaseException:
            self._lock_file.close()
            raise
        self.segments = segments
        self._active_records = count
        self._active_size = good_end
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 (stays open)
        self._next_seq = first + count
        #: Highest sequence number whose record is flushed (0 when nothing was ever logged).
        self.durable_seq = self._next_seq - 1
        #: Bytes of records this writer has flushed (since it opened the log).
        self.flushed_bytes = 0

    def __repr__(self) -> str:
        return (
            f"<WriteAheadLog {self.directory} records {self.first_seq}..{self.durable_seq}, "
            f"{len(self.segments)} segments, {len(self._pending)} pending>"
        )

    @property
    def first_seq(self) -> int:
        """Lowest sequence number still held (``durable_seq + 1`` when empty)."""
        return self.segments[0][0]

    def append(self, frames: Sequence[bytes], received_at: int) -> int:
        """Queue a message (``received_at`` in µs since the epoch); durable after :meth:`flush`."""
        with self._lock:
            seq = self._next_seq
            self._pending.append(encode(seq, received_at, frames))
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
            self.flushed_bytes += len(data)
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
            while len(self.segments) > 1 and self.segments[1][0] - 1 <= upto:
                self.segments[0][1].unlink()
                del self.segments[0]
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
        path = self.directory / segment_name(first)
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 (stays open)
        self.segments.append((first, path))
        self._active_records = 0
        self._active_size = 0
        if self.fsync:  # the new name must survive a crash along with the records put in it
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
