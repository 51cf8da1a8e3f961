"""PySpark integration: topologies on Spark (``run_on_spark``, a barrier stage of workers;
see ``topology.py``) and ``format("brokerless")``, a Structured Streaming source and sink, with
``ReliableSender`` for the source's acknowledged ingestion (``ingest.py``).

Importing this package registers the data source on the active Spark session, if there is one.
Otherwise (or for another session) call :func:`register`::

    spark = SparkSession.builder.getOrCreate()
    import brokerless.spark          # registers on `spark`, the active session
    brokerless.spark.register(spark)  # the same, explicitly; harmless to repeat

Spark's Python workers must be able to import ``brokerless`` (install it where they run).  The
names below are imported when first used, so the parts that need no Spark -- a
``ReliableSender`` feeding a source on another machine, the write-ahead log -- import without
pyspark installed.  The errors a Spark user meets are here too: ``TopologyError`` and
``WorkerProcessError`` (from :mod:`brokerless.stream`, raised by ``run_on_spark``),
``SourceError`` (the source cannot go on) and ``WALCorruptError`` (its write-ahead log is
damaged).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from brokerless.stream import TopologyError, WorkerProcessError

    from .datasource import BrokerlessDataSource
    from .ingest import ReliableSender
    from .sink import HEADER, MessageHeader, parse_header
    from .source_config import SourceError
    from .topology import (
        Phase,
        SparkRun,
        complete_on_spark,
        run_on_spark,
        session_builder,
        task_slots,
    )
    from .wal import WALCorruptError

__all__ = [
    "HEADER",
    "BrokerlessDataSource",
    "MessageHeader",
    "Phase",
    "ReliableSender",
    "SourceError",
    "SparkRun",
    "TopologyError",
    "WALCorruptError",
    "WorkerProcessError",
    "complete_on_spark",
    "parse_header",
    "register",
    "run_on_spark",
    "session_builder",
    "task_slots",
]

_HOMES = {
    "BrokerlessDataSource": ".datasource",
    "ReliableSender": ".ingest",
    "HEADER": ".sink",
    "MessageHeader": ".sink",
    "parse_header": ".sink",
    "Phase": ".topology",
    "SparkRun": ".topology",
    "complete_on_spark": ".topology",
    "run_on_spark": ".topology",
    "session_builder": ".topology",
    "task_slots": ".topology",
    # the errors the runs, the source and its log raise, from where they are defined
    "SourceError": ".source_config",
    "WALCorruptError": ".wal",
    "TopologyError": "brokerless.stream",
    "WorkerProcessError": "brokerless.stream",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def register(spark: SparkSession | None = None) -> None:
    """Register ``format("brokerless")`` on ``spark`` (default: the active session).  On a
    local master its Python workers run this interpreter (unless ``PYSPARK_PYTHON`` says
    otherwise), which imports brokerless."""
    from pyspark.sql import SparkSession

    from .datasource import BrokerlessDataSource
    from .session import python_workers_on_this_interpreter

    session = spark or SparkSession.getActiveSession()
    if session is None:
        raise RuntimeError(
            "brokerless.spark.register(): no active Spark session; create one first "
            "(SparkSession.builder.getOrCreate()) or pass it: register(spark)"
        )
    python_workers_on_this_interpreter(session.sparkContext)
    session.dataSource.register(BrokerlessDataSource)


def _register_on_the_active_session() -> None:
    try:
        from pyspark.sql import SparkSession
    except ImportError:  # no Spark here: the Spark-free parts still import
        return
    if SparkSession.getActiveSession() is not None:
        register()


_register_on_the_active_session()
