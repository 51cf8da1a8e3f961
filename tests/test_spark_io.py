"""The Spark SQL source and sink (``format("brokerless")``) and the write-ahead log under it."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokerless.spark.wal import (
    Record,
    WALCorruptError,
    WALLockedError,
    WriteAheadLog,
    read_range,
)

# -- the write-ahead log, no Spark ---------------------------------------------------------------


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


@pytest.mark.parametrize("damage", ["cut mid-record", "cut mid-header", "garbage", "zeros"])
def test_wal_torn_tail_is_dropped_on_reopen(tmp_path, damage):
    with WriteAheadLog(tmp_path) as wal:
        _fill(wal, 4)
    (segment,) = _segment_files(tmp_path)
    path = tmp_path / segment
    size = path.stat().st_size
    if damage == "cut mid-record":
        os.truncate(path, size - 5)
    elif damage == "cut mid-header":
        record = size // 4
        os.truncate(path, 3 * record + 3)
    else:
        with open(path, "ab") as f:
            f.write(os.urandom(37) if damage == "garbage" else bytes(64))
    with WriteAheadLog(tmp_path) as wal:
        kept = 4 if damage in ("garbage", "zeros") else 3
        assert wal.durable_seq == kept
        assert path.stat().st_size == (size if kept == 4 else 3 * (size // 4))
        assert wal.append([b"after"], 9) == kept + 1
        wal.flush()
        got = list(wal.read(0, kept + 1))
    assert [r.seq for r in got] == list(range(1, kept + 2))
    assert got[-1].frames == [b"after"]


def test_wal_damaged_record_inside_the_range_is_reported(tmp_path):
    with WriteAheadLog(tmp_path) as wal:
        _fill(wal, 3)
        (segment,) = _segment_files(tmp_path)
        with open(tmp_path / segment, "r+b") as f:
            f.seek(-2, os.SEEK_END)
            f.write(b"??")
        with pytest.raises(WALCorruptError, match="record 3 is damaged"):
            list(wal.read(0, 3))


def test_wal_has_one_writer(tmp_path):
    with (
        WriteAheadLog(tmp_path),
        pytest.raises(WALLockedError, match="in use by another writer"),
    ):
        WriteAheadLog(tmp_path)
    WriteAheadLog(tmp_path).close()


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
