"""The log's format: records, segments, and reading one record back (see the package doc)."""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, NamedTuple

HEADER = struct.Struct(">II")  # body length, crc32 of the body
_BODY = struct.Struct(">QqI")  # seq, received_at (µs), number of frames
_FRAME = struct.Struct(">I")  # frame length
_SEQ = struct.Struct(">Q")  # the start of a body
SUFFIX = ".wal"
LOCK = ".lock"
#: The largest record body; a length field above it is damage, not a record.
_MAX_RECORD = 1 << 31
LOCK_POLL = 0.05  # seconds between attempts to take a lock another process holds


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


class TornTail(Exception):
    """(internal) The rest of the segment is a record cut short by a crash."""


class Record(NamedTuple):
    seq: int
    received_at: int  # microseconds since the epoch, UTC
    frames: list[bytes]


def segment_name(first_seq: int) -> str:
    return f"{first_seq:020d}{SUFFIX}"


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    """The segment files, oldest first, as (first sequence number, path)."""
    found = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith(SUFFIX) and name[: -len(SUFFIX)].isdigit():
            found.append((int(name[: -len(SUFFIX)]), Path(entry.path)))
    found.sort()
    return found


def encode(seq: int, received_at: int, frames: Sequence[bytes]) -> bytes:
    parts = [_BODY.pack(seq, received_at, len(frames))]
    for frame in frames:
        parts.append(_FRAME.pack(len(frame)))
        parts.append(frame)
    body = b"".join(parts)
    if len(body) > _MAX_RECORD:
        raise ValueError(f"a message of {len(body)} bytes is larger than a log record can be")
    return HEADER.pack(len(body), zlib.crc32(body)) + body


def decode(body: bytes) -> Record:
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


def _verified(body: bytes, crc: int, seq: int) -> Record:
    """The record in ``body``; ValueError saying what is wrong when it is not record ``seq``."""
    if zlib.crc32(body) != crc:
        raise ValueError("its checksum does not match")
    try:
        record = decode(body)
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
    if len(written) < HEADER.size:
        return True
    length, _ = HEADER.unpack_from(written)
    return len(written) < HEADER.size + length and _starts_record(
        written[HEADER.size :], length, seq
    )


def read_record(stream: BinaryIO, path: Path, seq: int, size: int) -> Record | None:
    """Record ``seq``, read at the stream's position in a file of ``size`` bytes; None at the
    end of the file.  Raises :class:`TornTail` when the rest of the file is a torn tail and
    :class:`WALCorruptError` when the bytes there are not record ``seq`` (see the module doc)."""
    offset = stream.tell()
    rest = size - offset
    if rest <= 0:
        return None
    reason = "its header is cut short"
    header = stream.read(HEADER.size)
    if len(header) == HEADER.size:
        length, crc = HEADER.unpack(header)
        if length > rest - HEADER.size:
            reason = f"its length, {length}, runs past the end of the file"
        else:
            try:
                return _verified(stream.read(length), crc, seq)
            except ValueError as exc:
                reason = str(exc)
    stream.seek(offset)
    if _is_torn_tail(stream.read(rest), seq):
        raise TornTail
    raise WALCorruptError(
        f"write-ahead log {path}: record {seq} at offset {offset} is damaged ({reason})",
        path,
        offset,
    )
