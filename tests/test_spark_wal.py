"""The write-ahead log under the Spark source (``spark/wal.py``): numbering, segments, trim,
and recovery -- a torn tail is dropped, damage is reported, a number is never given twice."""

from __future__ import annotations

import os
import random
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokerless.stream import wal as wal_module
from brokerless.stream.wal import (
    Record,
    WALCorruptError,
    WALLockedError,
    WriteAheadLog,
    read_range,
)


def _fill(wal: WriteAheadLog, count: int, *, start: int = 0) -> None:
    for i in range(start, start + count):
        wal.append([b"topic", b"payload-%d" % i], 1_000 + i)
    wal.flush()


def _segment_files(path) -> list[str]:
    return sorted(name for name in os.listdir(path) if name.endswith(".wal"))


def test_wal_append_is_invisible_until_flush(tmp_path):
    with WriteAheadLog(tmp_path) as wal:
        assert (wal.durable_seq, wal.first_seq) == (0, 1)
        assert wal.append([b"a"], 7) == 1
        assert wal.append([b"b", b"c"], 8) == 2
        assert wal.durable_seq == 0
        with pytest.raises(ValueError, match="not durable"):
            list(wal.read(0, 1))
        assert wal.flush() == 2
        assert list(wal.read(0, 2)) == [Record(1, 7, [b"a"]), Record(2, 8, [b"b", b"c"])]
        assert list(wal.read(1, 2)) == [Record(2, 8, [b"b", b"c"])]
        assert list(wal.read(2, 2)) == []


def test_wal_reads_ranges_across_segments(tmp_path):
    with WriteAheadLog(tmp_path, segment_bytes=100) as wal:
        for i in range(20):
            _fill(wal, 1, start=i)
        assert len(_segment_files(tmp_path)) > 5
        for after, upto in [(0, 20), (3, 4), (5, 17), (19, 20)]:
            got = list(read_range(tmp_path, after, upto))
            assert [r.seq for r in got] == list(range(after + 1, upto + 1))
            assert [r.frames[1] for r in got] == [b"payload-%d" % (r.seq - 1) for r in got]


def test_wal_trim_drops_committed_segments_and_reopen_continues(tmp_path):
    with WriteAheadLog(tmp_path, segment_bytes=100) as wal:
        for i in range(10):
            _fill(wal, 1, start=i)
        before = _segment_files(tmp_path)
        wal.trim(4)
        assert wal.first_seq <= 5
        assert len(_segment_files(tmp_path)) < len(before)
        assert [r.seq for r in read_range(tmp_path, 4, 10)] == list(range(5, 11))
        with pytest.raises(WALCorruptError, match="no longer in the log"):
            list(read_range(tmp_path, 0, 10))
        wal.trim(10)  # everything committed: the active segment rolls, no data is left
        assert _segment_files(tmp_path) == [f"{11:020d}.wal"]
        assert wal.first_seq == 11
    with WriteAheadLog(tmp_path) as wal:
        assert (wal.first_seq, wal.durable_seq) == (11, 10)
        assert wal.append([b"x"], 1) == 11
        wal.flush()
        assert [r.seq for r in wal.read(10, 11)] == [11]


def test_wal_reopen_continues_after_the_last_record(tmp_path):
    with WriteAheadLog(tmp_path) as wal:
        _fill(wal, 5)
    with WriteAheadLog(tmp_path) as wal:
        assert wal.durable_seq == 5
        _fill(wal, 3, start=5)
        assert [r.frames[1] for r in wal.read(0, 8)] == [b"payload-%d" % i for i in range(8)]


def test_wal_close_flushes_pending_records(tmp_path):
    with WriteAheadLog(tmp_path) as wal:
        wal.append([b"late"], 1)
    assert list(read_range(tmp_path, 0, 1)) == [Record(1, 1, [b"late"])]


def test_wal_failed_flush_leaves_the_log_at_its_last_good_record(tmp_path, monkeypatch):
    with WriteAheadLog(tmp_path) as wal:
        _fill(wal, 2)
        (segment,) = _segment_files(tmp_path)
        size = (tmp_path / segment).stat().st_size
        wal.append([b"unlucky"], 3)

        def failing_fsync(fd: int) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(os, "fsync", failing_fsync)
        with pytest.raises(OSError, match="Input/output"):
            wal.flush()
        assert wal.durable_seq == 2
        assert (tmp_path / segment).stat().st_size == size
        monkeypatch.undo()
        assert wal.flush() == 3
    with WriteAheadLog(tmp_path) as wal:
        assert [r.frames for r in wal.read(0, 3)] == [
            [b"topic", b"payload-0"],
            [b"topic", b"payload-1"],
            [b"unlucky"],
        ]


def test_wal_damaged_record_inside_the_range_is_reported(tmp_path):
    with WriteAheadLog(tmp_path) as wal:
        _fill(wal, 3)
        (segment,) = _segment_files(tmp_path)
        with open(tmp_path / segment, "r+b") as f:
            f.seek(-2, os.SEEK_END)
            f.write(b"??")
        with pytest.raises(WALCorruptError, match=r"record 3 at offset \d+ is damaged"):
            list(wal.read(0, 3))


def test_wal_has_one_writer(tmp_path):
    with (
        WriteAheadLog(tmp_path),
        pytest.raises(WALLockedError, match="in use by another writer"),
    ):
        WriteAheadLog(tmp_path, lock_timeout=0)


def test_wal_writer_waits_for_the_previous_one(tmp_path):
    holder = WriteAheadLog(tmp_path)
    _fill(holder, 2)
    opened: list[WriteAheadLog] = []
    waiter = threading.Thread(target=lambda: opened.append(WriteAheadLog(tmp_path)))
    waiter.start()
    holder.close()
    waiter.join(timeout=10)
    assert opened, "the second writer never got the log"
    with opened[0] as wal:
        assert wal.durable_seq == 2


_frames = st.lists(st.binary(max_size=40), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(st.lists(_frames, min_size=1, max_size=6), min_size=1, max_size=8),
    segment_bytes=st.integers(min_value=1, max_value=400),
    data=st.data(),
)
def test_wal_round_trip(tmp_path_factory, batches, segment_bytes, data):
    path = tmp_path_factory.mktemp("wal")
    sent = [frames for batch in batches for frames in batch]
    with WriteAheadLog(path, fsync=False, segment_bytes=segment_bytes) as wal:
        for batch in batches:
            for frames in batch:
                wal.append(frames, len(frames))
            wal.flush()
        trimmed = data.draw(st.integers(min_value=0, max_value=len(sent)), label="trim")
        wal.trim(trimmed)
    with WriteAheadLog(path, fsync=False) as wal:
        assert wal.durable_seq == len(sent)
        after = data.draw(st.integers(min_value=trimmed, max_value=len(sent)), label="after")
        upto = data.draw(st.integers(min_value=after, max_value=len(sent)), label="upto")
        got = list(wal.read(after, upto))
    assert got == [Record(s, len(sent[s - 1]), sent[s - 1]) for s in range(after + 1, upto + 1)]


# -- recovery: torn tails are dropped, damage is reported ---------------------------------------


def _only_segment(directory: Path) -> Path:
    (segment,) = _segment_files(directory)
    return directory / segment


def _record_starts(data: bytes) -> list[int]:
    """Where each record of a segment starts, and where the last one ends."""
    starts = [0]
    while starts[-1] < len(data):
        (length,) = struct.unpack_from(">I", data, starts[-1])
        starts.append(starts[-1] + 8 + length)
    return starts


@pytest.mark.parametrize("after", ["nothing", "zeros"])
def test_wal_a_torn_tail_is_dropped_and_the_numbering_goes_on_from_it(tmp_path, after):
    """Whatever part of the last write a crash let through -- cut anywhere in either of its two
    records, with nothing after it or with zeros (a file that grew but was never written) --
    reopening keeps every record before the cut and gives the torn record's number to the next
    message."""
    with WriteAheadLog(tmp_path) as wal:
        _fill(wal, 3)
        _fill(wal, 2, start=3)  # one write: records 4 and 5
    path = _only_segment(tmp_path)
    data = path.read_bytes()
    starts = _record_starts(data)
    padding = bytes(100) if after == "zeros" else b""
    for cut in range(starts[3] + 1, len(data)):
        path.write_bytes(data[:cut] + padding)
        kept = 4 if cut >= starts[4] else 3
        with WriteAheadLog(tmp_path, fsync=False) as wal:
            assert wal.durable_seq == kept, f"cut at {cut}"
            assert path.stat().st_size == starts[kept]
            assert wal.append([b"after"], 9) == kept + 1
        got = list(read_range(tmp_path, 0, kept + 1))
        assert [r.seq for r in got] == list(range(1, kept + 2))
        assert got[kept - 1].frames == [b"topic", b"payload-%d" % (kept - 1)]
        assert got[kept].frames == [b"after"]


@pytest.mark.parametrize("record", [5, 10], ids=["mid-segment", "last"])
def test_wal_a_damaged_record_is_reported_with_file_and_offset_and_nothing_is_dropped(
    tmp_path, record
):
    """One flipped byte anywhere in a record of the last segment -- its length, its checksum,
    its number or its frames -- whether records follow it or not: opening the log raises
    WALCorruptError naming the segment and the record's offset, and changes nothing, so no
    durable record is dropped and no number is given twice."""
    with WriteAheadLog(tmp_path) as wal:
        _fill(wal, 10)
    path = _only_segment(tmp_path)
    data = path.read_bytes()
    starts = _record_starts(data)
    begin, end = starts[record - 1], starts[record]
    for at in range(begin, end):
        damaged = bytearray(data)
        damaged[at] ^= 0x01
        path.write_bytes(damaged)
        with pytest.raises(WALCorruptError, match=f"record {record} at offset {begin} ") as info:
            WriteAheadLog(tmp_path, fsync=False, lock_timeout=0)
        assert (info.value.path, info.value.offset) == (path, begin)
        assert path.read_bytes() == damaged, f"byte {at}: the segment was changed"
    path.write_bytes(data)
    with WriteAheadLog(tmp_path, lock_timeout=0) as wal:  # the failed opens let go of the lock
        assert wal.durable_seq == 10


def test_wal_foreign_bytes_after_the_last_record_are_damage_not_a_torn_tail(tmp_path):
    """Bytes that are not the start of the next record (here: random ones) are not what a
    crash leaves; they are reported rather than cut off."""
    with WriteAheadLog(tmp_path) as wal:
        _fill(wal, 4)
    path = _only_segment(tmp_path)
    end = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\xff" * 3 + os.urandom(34))
    with pytest.raises(WALCorruptError, match=f"record 5 at offset {end} is damaged"):
        WriteAheadLog(tmp_path, lock_timeout=0)
    assert path.stat().st_size == end + 37


_WRITER = """
import io, sys
sys.path.insert(0, sys.argv[1])
from brokerless.stream.wal import writer as wal

class Segment(io.FileIO):  # says "w" as a write starts: the test kills the process then
    def write(self, data):
        print("w", flush=True)
        return super().write(data)

wal.open = lambda path, mode, *args, **kwargs: (
    Segment(path, mode) if mode == "ab" else open(path, mode, *args, **kwargs)
)
log = wal.WriteAheadLog(sys.argv[2], fsync=False, segment_bytes=16 << 20)
while True:
    for _ in range(64):
        seq = log._next_seq
        log.append([b"%d" % seq, bytes([seq % 251]) * (seq % 97 * 2000)], seq)
    print("durable", log.flush(), flush=True)
"""


def _payload(seq: int) -> list[bytes]:
    return [b"%d" % seq, bytes([seq % 251]) * (seq % 97 * 2000)]


def test_wal_survives_sigkill_in_the_middle_of_writes(tmp_path):
    """A writer process killed with SIGKILL at random points, again and again on one log:
    every reopen succeeds (a cut-short write is a torn tail, never damage), keeps every record
    the writer had reported durable, and numbers on from the last record that is there."""
    rng = random.Random(1234)
    src = str(Path(wal_module.__file__).resolve().parents[3])  # the brokerless being tested
    durable = torn = 0
    for _ in range(16):
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, src, str(tmp_path)],
            stdout=subprocess.PIPE,
        )
        try:
            writes = rng.randrange(1, 8)
            while writes:
                line = writer.stdout.readline()
                assert line, "the writer ended by itself"
                if line.startswith(b"durable"):
                    durable = int(line.split()[1])
                else:
                    writes -= 1
            writer.send_signal(signal.SIGKILL)  # as it writes up to 8 MiB
        finally:
            writer.kill()
            writer.wait(timeout=30)
            writer.stdout.close()
        segment = tmp_path / _segment_files(tmp_path)[-1]
        size = segment.stat().st_size
        with WriteAheadLog(tmp_path, fsync=False, lock_timeout=30) as wal:
            assert wal.durable_seq >= durable
            last = wal.durable_seq
        torn += segment.stat().st_size < size
        got = list(read_range(tmp_path, 0, last))
        assert [r.seq for r in got] == list(range(1, last + 1))
        for r in got:
            assert r.frames == _payload(r.seq)
        durable = last
    assert torn, "no kill landed in the middle of a write: the trial showed nothing"
