"""The Spark source's write-ahead log, ``brokerless.stream.wal`` (the log itself needs no Spark,
and ``WALSpout`` in the stream layer reads it): the names its users import from here."""

from brokerless.stream import wal as _wal
from brokerless.stream.wal import *  # noqa: F403  (this module is that package under another name)

__all__ = _wal.__all__
