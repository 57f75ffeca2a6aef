"""The row schema of the ``strata`` source: Spark's Kafka source columns, in Spark and Arrow.

Owns the column names, order and types. Invariant: :func:`arrow_schema` is derived from
:func:`spark_schema` with PySpark's own converter (``timezone="UTC"``), which is exactly the
schema Spark checks every Arrow batch from ``read()`` against, so the two cannot drift.

=============  ====================================  ==========================================
column         Spark type                            meaning
=============  ====================================  ==========================================
key            binary                                record key (null when the record has none)
value          binary                                record value
topic          string                                topic name
partition      int                                   partition number
offset         long                                  offset in the partition
timestamp      timestamp                             record timestamp (CreateTime or
                                                     LogAppendTime, per the topic's
                                                     ``message.timestamp.type``)
timestampType  int                                   0 CreateTime, 1 LogAppendTime
headers        array<struct<key:string,              only with ``includeHeaders=true``; null
               value:binary>>                        when the record has no headers
=============  ====================================  ==========================================
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))


def spark_schema(include_headers: bool) -> StructType:
    """The DataFrame schema, as Spark's Kafka source has it."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema every record batch from ``read()`` has."""
    return to_arrow_schema(spark_schema(include_headers), timezone="UTC")
