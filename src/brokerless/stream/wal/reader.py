"""Reading a log directory: a range told by its writer, or following the files (see the
package doc)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .records import (
    HEADER,
    Record,
    TornTail,
    WALCorruptError,
    list_segments,
    read_record,
    segment_name,
)


def read_range(directory: str | os.PathLike[str], after: int, upto: int) -> Iterator[Record]:
    """Records ``after < seq <= upto`` from the log in ``directory``, in order.

    Safe to call from any process while a writer appends, as long as ``upto`` was durable when
    it was chosen.  Raises :class:`WALCorruptError` when a wanted record is gone or damaged.
    """
    if upto <= after:
        return
    directory = Path(directory)
    wanted = after + 1
    segments = [(first, path) for first, path in list_segments(directory) if first <= upto]
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
                header = stream.read(HEADER.size)
                if len(header) < HEADER.size:
                    break
                stream.seek(HEADER.unpack(header)[0], os.SEEK_CUR)
            while wanted <= upto:
                offset = stream.tell()
                try:
                    record = read_record(stream, path, wanted, size)
                except TornTail:
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
                record = read_record(
                    stream, self._path, self._at, os.fstat(stream.fileno()).st_size
                )
            except TornTail:  # still being written
                stream.seek(offset)
                break
            if record is None:  # the end of this segment: the writer may have started another
                if not (self.directory / segment_name(self._at)).exists():
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
        segments = list_segments(self.directory)
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
