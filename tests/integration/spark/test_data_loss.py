"""Offsets lost to the log start moving (DeleteRecords, as retention does): an error with
``failOnDataLoss=true``, skipped with a warning with ``failOnDataLoss=false``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import SparkSession

from .conftest import TIMEOUT_S, Record, new_topic, produce, values
from .test_streaming import run_to_end, sink_rows, start_query

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def delete_records_before(bootstrap: str, topic: str, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, 0, offset)],
                                   request_timeout=TIMEOUT_S, operation_timeout=TIMEOUT_S)
    for future in futures.values():
        assert future.result(TIMEOUT_S).low_watermark == offset


def test_batch_read_below_the_log_start(spark: SparkSession, bootstrap: str) -> None:
    topic = new_topic(bootstrap, 1)
    produce(bootstrap, topic, [Record(0, b"%02d" % i) for i in range(10)])
    delete_records_before(bootstrap, topic, 4)
    start = json.dumps({topic: {"0": 1}})

    def read(fail: str):
        return (spark.read.format("strata").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).option("startingOffsets", start)
                .option("failOnDataLoss", fail).load().collect())

    with pytest.raises(AnalysisException, match=r"offsets 1\.\.3 were removed"):
        read("true")
    assert values(read("false")) == [b"%02d" % i for i in range(4, 10)]


def test_streaming_restart_after_records_were_deleted(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    topic = new_topic(bootstrap, 1)
    produce(bootstrap, topic, [Record(0, b"a%02d" % i) for i in range(10)])
    checkpoint, sink = tmp_path / "checkpoint", tmp_path / "sink"
    run_to_end(start_query(spark, bootstrap, topic, checkpoint, sink))
    produce(bootstrap, topic, [Record(0, b"b%02d" % i) for i in range(10)])
    delete_records_before(bootstrap, topic, 15)

    failing = start_query(spark, bootstrap, topic, checkpoint, sink, failOnDataLoss="true")
    with pytest.raises(StreamingQueryException, match=r"offsets 10\.\.14 were removed"):
        failing.awaitTermination(120)

    run_to_end(start_query(spark, bootstrap, topic, checkpoint, sink, failOnDataLoss="false"))
    assert values(sink_rows(spark, sink)) == sorted(
        [b"a%02d" % i for i in range(10)] + [b"b%02d" % i for i in range(5, 10)])
