"""Example job ``windowed-counts``: per-key event-time window aggregates of an event stream.

Reads JSON events from a topic with the ``strata`` source, e.g. (the record key is unused; the
event's own ``key`` is)::

    {"key": "user-1", "event_time": 1700000000000, "amount": 2.5}

``event_time`` is epoch milliseconds. Events are grouped per ``key`` in tumbling event-time
windows (``--window``, default ``1 minute``) with a watermark (``--watermark``, default
``30 seconds``): a window is emitted once, in append mode, when the watermark passes its end;
events later than the watermark are dropped. Each emitted row::

    {"key": "user-1", "window_start": "2026-11-24T10:00:00Z", "window_end": "...",
     "events": 3, "amount": 7.5}

goes to the ``--sink-topic`` (record key = ``key``, value = that JSON) and to Parquet under
``--parquet-path`` (a ``batch_id=N`` directory per micro-batch, overwritten when a batch is
replayed after a failure, so Parquet holds each window exactly once; the topic gets it at least
once). Offsets and the aggregation state live in ``--checkpoint``.

Runs with ``strata spark run windowed-counts --bootstrap-servers HOST:PORT ...`` (a local
Spark) or ``spark-submit <this file> --bootstrap-servers ...`` (any cluster whose Python has
``strata[spark]`` installed, e.g. the ``spark`` image on Kubernetes: the chart's
``sparkPipeline`` SparkApplication, ``charts/strata/templates/spark-application.yaml``).
``--available-now`` processes what is in the topic and stops; otherwise a micro-batch runs
every ``--trigger-interval``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from strata.spark.session import get_session

NAME = "windowed-counts"
EVENT_SCHEMA = StructType([
    StructField("key", StringType()),
    StructField("event_time", LongType()),
    StructField("amount", DoubleType()),
])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=NAME, description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True, help="Kafka bootstrap address")
    parser.add_argument("--source-topic", default="events")
    parser.add_argument("--sink-topic", default="event-counts")
    parser.add_argument("--parquet-path", default="./event-counts")
    parser.add_argument("--checkpoint", default="./event-counts-checkpoint")
    parser.add_argument("--window", default="1 minute")
    parser.add_argument("--watermark", default="30 seconds")
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--available-now", action="store_true",
                        help="process what the topic holds now, then stop")
    parser.add_argument("--trigger-interval", default="10 seconds")
    parser.add_argument("--master", default=None,
                        help="Spark master (default: spark-submit's, else local[*,3])")
    return parser.parse_args(argv)


def windowed_aggregates(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """``strata`` rows -> one row per (key, window): events, summed amount (append mode)."""
    parsed = (events
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.*")
              .where(F.col("key").isNotNull() & F.col("event_time").isNotNull())
              .withColumn("event_time", F.timestamp_millis(F.col("event_time"))))
    return (parsed
            .withWatermark("event_time", watermark)
            .groupBy(F.col("key"), F.window(F.col("event_time"), window))
            .agg(F.count(F.lit(1)).alias("events"),
                 F.sum(F.coalesce(F.col("amount"), F.lit(0.0))).alias("amount"))
            .select("key", F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "events", "amount"))


def start(spark: SparkSession, args: argparse.Namespace) -> StreamingQuery:
    """Start the job's streaming query (the caller waits for it)."""
    reader = (spark.readStream.format("strata")
              .option("kafka.bootstrap.servers", args.bootstrap_servers)
              .option("subscribe", args.source_topic)
              .option("startingOffsets", args.starting_offsets))
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    aggregates = windowed_aggregates(reader.load(), args.window, args.watermark)

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()
        try:
            (batch.write.mode("overwrite")
             .parquet(f"{args.parquet_path.rstrip('/')}/batch_id={batch_id}"))
            (batch.select(F.col("key").cast("binary").alias("key"),
                          F.to_json(F.struct(
                              "key",
                              F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'")
                              .alias("window_start"),
                              F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'")
                              .alias("window_end"),
                              "events", "amount")).cast("binary").alias("value"))
             .write.format("strata")
             .option("kafka.bootstrap.servers", args.bootstrap_servers)
             .option("topic", args.sink_topic).mode("append").save())
        finally:
            batch.unpersist()

    writer = (aggregates.writeStream.outputMode("append").foreachBatch(write_batch)
              .option("checkpointLocation", args.checkpoint).queryName(NAME))
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.trigger_interval)
    return writer.start()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job until it stops (``--available-now``) or is interrupted."""
    args = parse_args(argv)
    spark = get_session(NAME, master=args.master)
    query = start(spark, args)
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
