"""The ``windowed-counts`` example job end to end: events in, per-key window aggregates out to
a topic and to Parquet, checked against aggregates computed here."""

from __future__ import annotations

import calendar
import json
import time
from collections import defaultdict
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from strata.spark.pipelines import windowed_counts

from .conftest import Record, new_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.integration]

MINUTE_MS = 60_000


def test_windowed_counts_produces_the_expected_aggregates(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    source, sink = new_topic(bootstrap, 2, prefix="events"), new_topic(bootstrap, 1)
    base = (int(time.time() * 1000) // MINUTE_MS - 10) * MINUTE_MS  # a minute boundary
    events = [
        {"key": f"user-{i % 3}", "event_time": base + (i * 7_000) % (3 * MINUTE_MS),
         "amount": float(i)}
        for i in range(60)
    ]
    # Moves the watermark (30 s) far past every window above, so all of them are emitted.
    closer = {"key": "closer", "event_time": base + 10 * MINUTE_MS, "amount": 0.0}
    produce(bootstrap, source, [Record(i % 2, json.dumps(e).encode())
                                for i, e in enumerate([*events, closer])])

    expected: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0, 0.0])
    for event in events:
        window = event["event_time"] // MINUTE_MS * MINUTE_MS
        expected[(event["key"], window)][0] += 1
        expected[(event["key"], window)][1] += event["amount"]

    args = windowed_counts.parse_args([
        "--bootstrap-servers", bootstrap, "--source-topic", source, "--sink-topic", sink,
        "--parquet-path", str(tmp_path / "parquet"), "--checkpoint", str(tmp_path / "ckpt"),
        "--available-now",
    ])
    query = windowed_counts.start(spark, args)
    assert query.awaitTermination(180)
    assert query.exception() is None

    parquet = spark.read.parquet(str(tmp_path / "parquet")).collect()
    got_parquet = {(r.key, int(r.window_start.timestamp() * 1000)): [r.events, r.amount]
                   for r in parquet}
    assert got_parquet == dict(expected)
    assert len(parquet) == len(expected)

    topic_rows = (spark.read.format("strata").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", sink).load().collect())
    got_topic = {}
    for row in topic_rows:
        value = json.loads(row.value)
        assert row.key == value["key"].encode()
        start_ms = calendar.timegm(time.strptime(value["window_start"],
                                                 "%Y-%m-%dT%H:%M:%SZ")) * 1000
        got_topic[(value["key"], start_ms)] = [value["events"], value["amount"]]
    assert got_topic == dict(expected)
