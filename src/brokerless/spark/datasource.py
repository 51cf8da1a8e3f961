"""The ``brokerless`` Python data source: one name for the streaming source and the sink."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .options import OptionError
from .sink import BrokerlessStreamWriter, BrokerlessWriter, SinkConfig
from .source import SCHEMA, BrokerlessStreamReader, SourceConfig, SourceError

__all__ = ["BrokerlessDataSource"]


class BrokerlessDataSource(DataSource):
    """``format("brokerless")``: read from or write to brokerless (ZeroMQ) sockets."""

    @classmethod
    def name(cls) -> str:
        return "brokerless"

    def schema(self) -> StructType:
        SourceConfig.from_options(self.options)  # a bad option fails at load(), not at start()
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if schema != SCHEMA:
            raise SourceError(
                f"brokerless source: the schema is fixed ({SCHEMA.simpleString()}); "
                "do not pass .schema(...) to readStream"
            )
        return BrokerlessStreamReader(SourceConfig.from_options(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return BrokerlessStreamWriter(SinkConfig.from_options(self.options, schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError(
                'brokerless sink: mode("overwrite") cannot be: messages sent cannot be taken '
                'back; write with mode("append")'
            )
        return BrokerlessWriter(SinkConfig.from_options(self.options, schema))
