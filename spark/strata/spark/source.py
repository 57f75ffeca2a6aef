"""``StrataDataSource``: the PySpark Python Data Source named ``strata``.

Owns the entry points Spark calls on the driver: ``schema`` (Spark's Kafka source columns),
``reader`` / ``streamReader`` and ``writer`` / ``streamWriter``. Options are parsed and checked
here, at plan time, so a wrong or missing option fails ``load()`` / ``save()`` /
``start()`` with a message naming it, never a task. Usage::

    from strata.spark import StrataDataSource
    spark.dataSource.register(StrataDataSource)
    df = (spark.read.format("strata")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from strata.spark.options import parse_sink_options, parse_source_options
from strata.spark.reader import StrataBatchReader, StrataStreamReader
from strata.spark.schema import spark_schema
from strata.spark.writer import StrataBatchWriter, StrataStreamWriter, check_sink_schema


class StrataDataSource(DataSource):
    """Kafka-protocol topics as a Spark source and sink: ``format("strata")``."""

    @classmethod
    def name(cls) -> str:
        return "strata"

    def schema(self) -> StructType:
        # Called by load(): check the options now, so a wrong one fails before any query.
        return spark_schema(parse_source_options(self.options, streaming=None).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return StrataBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StrataStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options)
        return StrataBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options)
        return StrataStreamWriter(options)
