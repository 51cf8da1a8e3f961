"""PySpark integration: topologies on Spark (``run_on_spark``, a barrier stage of workers;
see ``topology.py``) and ``format("brokerless")``, a Structured Streaming source and sink.

Importing this package registers the data source on the active Spark session, if there is one.
Otherwise (or for another session) call :func:`register`::

    spark = SparkSession.builder.getOrCreate()
    import brokerless.spark          # registers on `spark`, the active session
    brokerless.spark.register(spark)  # the same, explicitly; harmless to repeat

Spark's Python workers must be able to import ``brokerless`` (install it where they run).
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from .datasource import BrokerlessDataSource
from .sink import HEADER, MessageHeader, parse_header
from .topology import Phase, SparkRun, complete_on_spark, run_on_spark, session_builder, task_slots

__all__ = [
    "HEADER",
    "BrokerlessDataSource",
    "MessageHeader",
    "Phase",
    "SparkRun",
    "complete_on_spark",
    "parse_header",
    "register",
    "run_on_spark",
    "session_builder",
    "task_slots",
]


def register(spark: SparkSession | None = None) -> None:
    """Register ``format("brokerless")`` on ``spark`` (default: the active session)."""
    session = spark or SparkSession.getActiveSession()
    if session is None:
        raise RuntimeError(
            "brokerless.spark.register(): no active Spark session; create one first "
            "(SparkSession.builder.getOrCreate()) or pass it: register(spark)"
        )
    session.dataSource.register(BrokerlessDataSource)


if SparkSession.getActiveSession() is not None:
    register()
