"""Streaming reads through ``readStream.format("strata")``: availableNow, restarts from the
checkpoint, a failed batch replayed with the same offsets, and ``maxOffsetsPerTrigger``.

The sink is Spark's Parquet file sink, which commits each batch once (``_spark_metadata``), so
"no gap, no duplicate" is checked on exactly what a downstream reader sees.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, udf
from pyspark.sql.streaming import StreamingQuery

from .conftest import Record, new_topic, produce, values

pytestmark = [pytest.mark.spark, pytest.mark.integration]

QUERY_TIMEOUT_S = 120


def start_query(spark: SparkSession, bootstrap: str, topic: str, checkpoint: Path, sink: Path,
                transform=None, **options: str) -> StreamingQuery:
    df = (spark.readStream.format("strata").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest")
          .options(**options).load())
    df = df.select("value", "partition", "offset")
    if transform is not None:
        df = transform(df)
    return (df.writeStream.format("parquet").option("path", str(sink))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def run_to_end(query: StreamingQuery) -> list[dict]:
    assert query.awaitTermination(QUERY_TIMEOUT_S), "availableNow query did not finish in time"
    assert query.exception() is None
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def sink_rows(spark: SparkSession, sink: Path) -> list:
    return spark.read.parquet(str(sink)).collect()


def test_available_now_then_more_data_then_restart_reads_only_new_rows(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    topic = new_topic(bootstrap, 3)
    first = [Record(i % 3, b"a%02d" % i) for i in range(20)]
    produce(bootstrap, topic, first)
    checkpoint, sink = tmp_path / "checkpoint", tmp_path / "sink"

    progress = run_to_end(start_query(spark, bootstrap, topic, checkpoint, sink))
    assert sum(p["numInputRows"] for p in progress) == 20
    assert values(sink_rows(spark, sink)) == sorted(r.value for r in first)
    assert json.loads(progress[-1]["sources"][0]["endOffset"]) == {
        topic: {"0": 7, "1": 7, "2": 6}}

    second = [Record(i % 2, b"b%02d" % i) for i in range(10)]
    produce(bootstrap, topic, second)
    progress = run_to_end(start_query(spark, bootstrap, topic, checkpoint, sink))
    assert sum(p["numInputRows"] for p in progress) == 10
    assert values(sink_rows(spark, sink)) == sorted(r.value for r in first + second)


def test_max_offsets_per_trigger_bounds_every_batch(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    topic = new_topic(bootstrap, 3)
    records = [Record(0, b"p0-%02d" % i) for i in range(14)] + \
        [Record(1, b"p1-%02d" % i) for i in range(6)] + [Record(2, b"p2-0")]
    produce(bootstrap, topic, records)
    progress = run_to_end(start_query(spark, bootstrap, topic, tmp_path / "c", tmp_path / "s",
                                      maxOffsetsPerTrigger="5"))
    sizes = [p["numInputRows"] for p in progress]
    assert sizes == [5, 5, 5, 5, 1]
    assert values(sink_rows(spark, tmp_path / "s")) == sorted(r.value for r in records)


def test_a_failed_batch_is_replayed_with_the_same_offsets(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    topic = new_topic(bootstrap, 2)
    records = [Record(i % 2, b"r%02d" % i) for i in range(24)]
    produce(bootstrap, topic, records)
    checkpoint, sink = tmp_path / "checkpoint", tmp_path / "sink"
    broken = tmp_path / "broken"
    broken.touch()
    marker = str(broken)

    def fail_on_r13(value: bytes) -> bytes:
        import os

        if value == b"r13" and os.path.exists(marker):
            raise RuntimeError("injected failure")
        return value

    check = udf(fail_on_r13, "binary", useArrow=False)

    def transform(df):
        return df.withColumn("value", check(col("value")))

    query = start_query(spark, bootstrap, topic, checkpoint, sink, transform,
                        maxOffsetsPerTrigger="8")
    with pytest.raises(StreamingQueryException, match="injected failure"):
        query.awaitTermination(QUERY_TIMEOUT_S)
    offsets_dir = checkpoint / "offsets"
    failed_batch = max(int(p.name) for p in offsets_dir.iterdir() if p.name.isdigit())
    planned = (offsets_dir / str(failed_batch)).read_text()
    committed_before = {int(p.name) for p in (checkpoint / "commits").iterdir()
                        if p.name.isdigit()}
    assert failed_batch not in committed_before
    rows_before = sink_rows(spark, sink) if (sink / "_spark_metadata").exists() else []
    assert len(rows_before) == 8 * failed_batch  # the batches before it, each full

    broken.unlink()
    progress = run_to_end(start_query(spark, bootstrap, topic, checkpoint, sink, transform,
                                      maxOffsetsPerTrigger="8"))
    assert progress[0]["batchId"] == failed_batch
    assert (offsets_dir / str(failed_batch)).read_text() == planned
    rows = sink_rows(spark, sink)
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        [(0, o) for o in range(12)] + [(1, o) for o in range(12)])
    assert values(rows) == sorted(r.value for r in records)


def test_the_stream_reader_keeps_its_consumer_out_of_what_spark_pickles(bootstrap: str) -> None:
    from pyspark import cloudpickle
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from strata.spark.options import parse_source_options
    from strata.spark.reader import StrataStreamReader

    topic = new_topic(bootstrap, 2)
    produce(bootstrap, topic, [Record(p, b"v") for p in (0, 1, 1)])
    reader = StrataStreamReader(parse_source_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=True))
    copy = None
    try:
        start = reader.initialOffset()
        kept = reader._consumer  # the driver's consumer, made by the first planning call
        assert kept is not None

        copy = cloudpickle.loads(cloudpickle.dumps(reader))  # a librdkafka client cannot pickle
        assert copy._consumer is None

        end = {topic: {"0": 1, "1": 2}}
        assert reader.latestOffset(start, ReadAllAvailable()) == end
        assert reader._consumer is kept  # kept between triggers, not made anew
        assert copy.latestOffset(start, ReadAllAvailable()) == end
    finally:
        for planner in (reader, copy):
            if planner is not None:
                planner.stop()
    assert reader._consumer is None
    reader.stop()  # stopping twice is harmless
