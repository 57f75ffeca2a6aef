"""Batch reads through ``format("strata")`` against a real broker: every column, every way of
choosing partitions and offsets, and option errors at plan time."""

from __future__ import annotations

import datetime
import json
import time

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from .conftest import Record, new_topic, produce, values

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def read(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    return (spark.read.format("strata").option("kafka.bootstrap.servers", bootstrap)
            .options(**options).load())


def test_batch_read_equals_what_was_produced_in_every_column(
    spark: SparkSession, bootstrap: str
) -> None:
    topic = new_topic(bootstrap, 3)
    now = int(time.time() * 1000)
    records = [
        Record(partition=i % 3, value=f"v{i}".encode(), key=None if i % 4 == 0 else b"k%d" % i,
               timestamp=now - 1000 * i,
               headers=((("h", b"x%d" % i), ("n", None)) if i % 2 else ()))
        for i in range(30)
    ]
    produce(bootstrap, topic, records)

    rows = read(spark, bootstrap, subscribe=topic, includeHeaders="true").collect()

    expected = {}
    next_offset = {0: 0, 1: 0, 2: 0}
    for record in records:
        offset = next_offset[record.partition]
        next_offset[record.partition] += 1
        expected[(record.partition, offset)] = (
            record.key, record.value, topic,
            datetime.datetime.fromtimestamp(record.timestamp / 1000, datetime.UTC)
            .replace(tzinfo=None),
            0, [(k, v) for k, v in record.headers] or None,
        )
    got = {
        (row.partition, row.offset): (
            row.key, row.value, row.topic, row.timestamp, row.timestampType,
            [(h.key, h.value) for h in row.headers] if row.headers is not None else None,
        )
        for row in rows
    }
    assert len(rows) == len(records)
    assert got == expected
    assert "headers" not in read(spark, bootstrap, subscribe=topic).columns


def test_assign_pattern_offsets_and_timestamps_select_exactly_the_expected_rows(
    spark: SparkSession, bootstrap: str
) -> None:
    first = new_topic(bootstrap, 2, prefix="sel")
    second = new_topic(bootstrap, 1, prefix="sel")
    other = new_topic(bootstrap, 1, prefix="other")
    base = int(time.time() * 1000) - 60_000
    produce(bootstrap, first, [Record(p, f"{first}/{p}/{i}".encode(), timestamp=base + i * 10)
                               for i in range(10) for p in (0, 1)])
    produce(bootstrap, second, [Record(0, f"{second}/0/{i}".encode()) for i in range(5)])
    produce(bootstrap, other, [Record(0, b"other")])

    def names(topic: str, partition: int, offsets: range) -> list[bytes]:
        return [f"{topic}/{partition}/{i}".encode() for i in offsets]

    assigned = read(spark, bootstrap, assign=json.dumps({first: [1], second: [0]})).collect()
    assert values(assigned) == sorted(names(first, 1, range(10)) + names(second, 0, range(5)))

    pattern = read(spark, bootstrap, subscribePattern=r"sel-[0-9a-f]+").collect()
    assert {row.topic for row in pattern} >= {first, second}
    assert other not in {row.topic for row in pattern}

    bounded = read(
        spark, bootstrap, subscribe=f"{first},{second}",
        startingOffsets=json.dumps({first: {"0": 3, "1": -2}, second: {"0": 4}}),
        endingOffsets=json.dumps({first: {"0": 5, "1": 2}, second: {"0": -1}}),
    ).collect()
    assert values(bounded) == sorted(names(first, 0, range(3, 5)) + names(first, 1, range(2))
                                     + names(second, 0, range(4, 5)))

    # The first record at or after base + 75 ms is i = 8 in both partitions.
    since = read(spark, bootstrap, subscribe=first, startingTimestamp=str(base + 75)).collect()
    assert values(since) == sorted(names(first, 0, range(8, 10)) + names(first, 1, range(8, 10)))

    split = read(spark, bootstrap, subscribe=first, minPartitions="6")
    assert split.rdd.getNumPartitions() >= 6
    assert values(split.collect()) == sorted(names(first, 0, range(10))
                                             + names(first, 1, range(10)))


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "subscribe/subscribePattern/assign"),
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "subscribe/subscribePattern/assign"),
        ({"subscribe": "a", "startingOffsets": "newest"}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": "latest"}, "startingOffsets"),
        ({"subscribe": "a", "failOnDataLoss": "perhaps"}, "failOnDataLoss"),
    ],
)
def test_a_wrong_option_fails_at_plan_time_naming_it(
    spark: SparkSession, bootstrap: str, options: dict[str, str], named: str
) -> None:
    with pytest.raises(AnalysisException, match=f"StrataOptionError: {named}:"):
        read(spark, bootstrap, **options).collect()


def test_ending_offsets_past_the_log_are_an_error_naming_the_option(
    spark: SparkSession, bootstrap: str
) -> None:
    topic = new_topic(bootstrap, 1)
    produce(bootstrap, topic, [Record(0, b"only")])
    with pytest.raises(AnalysisException, match="endingOffsets: offset 5"):
        read(spark, bootstrap, subscribe=topic,
             endingOffsets=json.dumps({topic: {"0": 5}})).collect()


def test_an_empty_topic_or_an_empty_offset_range_reads_no_rows(
    spark: SparkSession, bootstrap: str
) -> None:
    empty = new_topic(bootstrap, 2)
    assert read(spark, bootstrap, subscribe=empty).count() == 0

    topic = new_topic(bootstrap, 2)
    produce(bootstrap, topic, [Record(p, b"v") for p in (0, 1)])
    nothing = json.dumps({topic: {"0": 0, "1": 0}})
    assert read(spark, bootstrap, subscribe=topic, endingOffsets=nothing).collect() == []
    # Spark hands read() its placeholder partition when the plan has none: still no rows.
    assert read(spark, bootstrap, subscribePattern="no-such-topic-.*").count() == 0
