"""The Spark source's write-ahead log, ``brokerless.stream.wal`` (the log itself needs no Spark,
and ``WALSpout`` in the stream layer reads it): the names its users import from here."""

from brokerless.stream.wal import (
    LogReader,
    Record,
    WALCorruptError,
    WALError,
    WALLockedError,
    WriteAheadLog,
    read_range,
)

__all__ = [
    "LogReader",
    "Record",
    "WALCorruptError",
    "WALError",
    "WALLockedError",
    "WriteAheadLog",
    "read_range",
]
