"""Writes through ``write.format("strata")`` and ``writeStream.format("strata")``, read back."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from .conftest import Record, new_topic, produce, values

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def read_back(spark: SparkSession, bootstrap: str, topic: str):
    return (spark.read.format("strata").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("includeHeaders", "true").load().collect())


def test_write_a_dataframe_then_read_it_back(spark: SparkSession, bootstrap: str) -> None:
    default_topic = new_topic(bootstrap, 2)
    routed_topic = new_topic(bootstrap, 3)
    rows = [(f"k{i}", f"v{i}".encode(), i % 2 if i < 10 else None,
             routed_topic if i % 3 == 0 else None,
             [("h", f"x{i}".encode())] if i % 2 else None) for i in range(40)]
    df = spark.createDataFrame(
        rows, "key string, value binary, partition int, topic string, "
              "headers array<struct<key:string,value:binary>>").repartition(3)
    (df.write.format("strata").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", default_topic).mode("append").save())

    got = read_back(spark, bootstrap, default_topic) + read_back(spark, bootstrap, routed_topic)
    by_value = {bytes(r.value): r for r in got}
    assert len(got) == len(rows) == len(by_value)
    for key, value, partition, topic, headers in rows:
        row = by_value[value]
        assert row.key == key.encode()
        assert row.topic == (topic or default_topic)
        if partition is not None:
            assert row.partition == partition
        assert ([(h.key, h.value) for h in row.headers] if row.headers else None) == headers


def test_a_dataframe_without_value_fails_at_plan_time(spark: SparkSession,
                                                      bootstrap: str) -> None:
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(AnalysisException, match="StrataOptionError: value:"):
        (df.write.format("strata").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", "x").mode("append").save())


def test_stream_from_one_topic_into_another(spark: SparkSession, bootstrap: str,
                                            tmp_path: Path) -> None:
    source, sink = new_topic(bootstrap, 2), new_topic(bootstrap, 1)
    records = [Record(i % 2, b"s%02d" % i, key=b"k", headers=(("n", b"%d" % i),))
               for i in range(25)]
    produce(bootstrap, source, records)
    query = (spark.readStream.format("strata").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("includeHeaders", "true").load()
             .select("key", "value", "headers")
             .writeStream.format("strata").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "c"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120)
    assert query.exception() is None
    got = read_back(spark, bootstrap, sink)
    assert values(got) == sorted(r.value for r in records)
    assert {bytes(r.value): r.headers[0].value for r in got} == {
        r.value: r.headers[0][1] for r in records}
