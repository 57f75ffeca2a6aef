"""The ``strata`` source and sink against real Kafka transactions.

Source: two confluent-kafka transactional producers interleave committed and aborted
transactions in three partitions and leave one transaction open; Spark reads them with
``kafka.isolation.level`` ``read_committed`` (only committed rows, never past the last stable
offset, batch and availableNow streaming) and ``read_uncommitted`` (every data record, no
transaction marker). Sink: ``kafka.transactional.id.prefix`` makes each write task one
transaction: a task that fails mid-way leaves nothing visible to ``read_committed`` readers,
though ``read_uncommitted`` shows its rows were written, then aborted.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, udf

from strata.protocol import ApiKey
from strata.spark.broker_connection import BrokerConnection

from ..broker_process import BrokerProcess
from .conftest import TIMEOUT_S, new_topic, values

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PARTITIONS = 3
QUERY_TIMEOUT_S = 120
# Abort markers are written asynchronously: how long the LSO may take to reach the end.
LSO_SETTLE_S = 10.0
ZOMBIE_TIMEOUT_MS = 3_000  # transaction.timeout.ms of the failing write's producers
ABORT_SCAN_S = 10.0  # the broker's transaction.abort.timed.out.transaction.cleanup.interval.ms


@dataclass(frozen=True)
class TransactionalData:
    """A topic holding committed, aborted and (still) open transactions."""

    topic: str
    committed: list[bytes]
    aborted: list[bytes]
    open: list[bytes]
    # Per partition, the offset of the open transaction's first record: the LSO.
    last_stable: dict[int, int]
    # The producer whose transaction is still open; the test that ends it closes it.
    open_producer: Producer


def transactional_producer(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                         "transaction.timeout.ms": 600_000,
                         "transactional.id": f"tx-{uuid.uuid4().hex[:10]}"})
    producer.init_transactions(TIMEOUT_S)
    return producer


def send(producer: Producer, topic: str, batch: list[tuple[int, bytes]]) -> list[tuple[int, int]]:
    """Produce ``(partition, value)`` pairs in the open transaction; ``(partition, offset)``
    of each, in delivery order."""
    offsets: list[tuple[int, int]] = []

    def delivered(error: object, message: object) -> None:
        assert error is None, error
        offsets.append((message.partition(), message.offset()))  # type: ignore[attr-defined]

    for partition, value in batch:
        producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
    assert producer.flush(TIMEOUT_S) == 0
    return offsets


@pytest.fixture(scope="module")
def tx_data(spark_broker: BrokerProcess) -> Iterator[TransactionalData]:
    bootstrap = spark_broker.bootstrap
    topic = new_topic(bootstrap, PARTITIONS, "tx")
    first, second = transactional_producer(bootstrap), transactional_producer(bootstrap)
    committed: list[bytes] = []
    aborted: list[bytes] = []

    def rows(tag: str, count: int) -> list[tuple[int, bytes]]:
        return [(i % PARTITIONS, f"{tag}-{i}".encode()) for i in range(count)]

    for round_ in range(3):
        # Both transactions are open at once, so their batches interleave in every partition.
        first.begin_transaction()
        second.begin_transaction()
        for step in range(2):
            keep = rows(f"c{round_}{step}", 4 + round_)
            drop = rows(f"a{round_}{step}", 3)
            send(first, topic, keep)
            send(second, topic, drop)
            committed += [v for _p, v in keep]
            aborted += [v for _p, v in drop]
        first.commit_transaction(TIMEOUT_S)
        second.abort_transaction(TIMEOUT_S)
    second.begin_transaction()
    pending = rows("open", 6)
    open_offsets = send(second, topic, pending)
    last_stable = {p: min(o for q, o in open_offsets if q == p) for p in range(PARTITIONS)}
    yield TransactionalData(topic, committed, aborted, [v for _p, v in pending], last_stable,
                            second)
    second.abort_transaction(TIMEOUT_S)


def read(spark: SparkSession, bootstrap: str, topic: str, level: str | None = None) -> list:
    reader = (spark.read.format("strata").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    if level is not None:
        reader = reader.option("kafka.isolation.level", level)
    return reader.load().collect()


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw",
                         "isolation.level": "read_uncommitted"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S,
                                                  cached=False)[1] for p in range(partitions)}
    finally:
        consumer.close()


def last_stable_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """The read_committed end offsets, once they reach the high watermarks (or at the
    deadline)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso",
                         "isolation.level": "read_committed"})
    deadline = time.monotonic() + LSO_SETTLE_S
    try:
        while True:
            stable = {p: consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                        timeout=TIMEOUT_S, cached=False)[1]
                      for p in range(partitions)}
            if stable == high_watermarks(bootstrap, topic, partitions) \
                    or time.monotonic() > deadline:
                return stable
            time.sleep(0.2)
    finally:
        consumer.close()


def _ask_broker(bootstrap: str, api_key: int, fields: dict) -> object:
    host, _, port = bootstrap.rpartition(":")
    connection = BrokerConnection(host, int(port), "test")
    try:
        return connection.request(api_key, 0, fields)
    finally:
        connection.close()


def describe_producers(bootstrap: str, topic: str, partitions: int) -> object:
    return _ask_broker(bootstrap, ApiKey.DESCRIBE_PRODUCERS, {"topics": [
        {"name": topic, "partition_indexes": list(range(partitions))}]})


def describe_transaction(bootstrap: str, txid: str) -> object:
    return _ask_broker(bootstrap, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [txid]})


def test_a_read_committed_batch_read_returns_exactly_the_committed_records(
    spark: SparkSession, bootstrap: str, tx_data: TransactionalData
) -> None:
    rows = read(spark, bootstrap, tx_data.topic, "read_committed")
    assert values(rows) == sorted(tx_data.committed)
    for partition, stable in tx_data.last_stable.items():
        assert all(r.offset < stable for r in rows if r.partition == partition)


def test_read_uncommitted_is_the_default_and_returns_every_data_record(
    spark: SparkSession, bootstrap: str, tx_data: TransactionalData
) -> None:
    everything = sorted(tx_data.committed + tx_data.aborted + tx_data.open)
    default = read(spark, bootstrap, tx_data.topic)
    assert values(default) == everything  # no transaction marker comes out as a row
    assert values(read(spark, bootstrap, tx_data.topic, "read_uncommitted")) == everything
    offsets = {(r.partition, r.offset) for r in default}
    assert len(offsets) == len(everything)


def test_an_available_now_stream_stops_before_the_open_transaction_then_resumes(
    spark: SparkSession, bootstrap: str, tx_data: TransactionalData, tmp_path: Path
) -> None:
    checkpoint, sink = tmp_path / "checkpoint", tmp_path / "sink"

    def run() -> list[dict]:
        query = (spark.readStream.format("strata").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", tx_data.topic).option("startingOffsets", "earliest")
                 .option("kafka.isolation.level", "read_committed").load()
                 .select("value", "partition", "offset")
                 .writeStream.format("parquet").option("path", str(sink))
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(QUERY_TIMEOUT_S), "availableNow query did not finish"
        assert query.exception() is None
        return [p for p in query.recentProgress if p["numInputRows"] > 0]

    progress = run()
    assert values(spark.read.parquet(str(sink)).collect()) == sorted(tx_data.committed)
    assert json.loads(progress[-1]["sources"][0]["endOffset"]) == {
        tx_data.topic: {str(p): o for p, o in tx_data.last_stable.items()}}

    tx_data.open_producer.commit_transaction(TIMEOUT_S)
    tx_data.open_producer.begin_transaction()  # the fixture's teardown aborts this one
    run()
    assert values(spark.read.parquet(str(sink)).collect()) == sorted(
        tx_data.committed + tx_data.open)


def write(df, bootstrap: str, topic: str, prefix: str, **options: str) -> None:
    (df.write.format("strata").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).option("kafka.transactional.id.prefix", prefix)
     .options(**options).mode("append").save())


def test_a_transactional_write_is_fully_visible_to_read_committed(
    spark: SparkSession, bootstrap: str
) -> None:
    topic = new_topic(bootstrap, 1, "txw")
    rows = [(f"w{i:02d}".encode(),) for i in range(30)]
    write(spark.createDataFrame(rows, "value binary").repartition(3), bootstrap, topic,
          f"job-{uuid.uuid4().hex[:8]}")
    assert values(read(spark, bootstrap, topic, "read_committed")) == sorted(r[0] for r in rows)
    # Three tasks, three transactions: 30 records and one commit marker per task.
    assert high_watermarks(bootstrap, topic, 1) == {0: 33}


def test_a_failed_task_leaves_nothing_visible_to_read_committed(
    spark: SparkSession, bootstrap: str
) -> None:
    topic = new_topic(bootstrap, 2, "txf")

    def fail_late(value: bytes) -> bytes:
        """Raise at row 900, once the write task's earlier rows are on the broker (rows are
        1 KiB, so Spark's 64 KiB buffers reach the writer's Python worker before that)."""
        if not value.startswith(b"f0900"):
            return value
        import time

        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
        deadline = time.monotonic() + 15
        try:
            while time.monotonic() < deadline and sum(
                    consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10,
                                                   cached=False)[1] for p in (0, 1)) < 1:
                time.sleep(0.05)
        finally:
            consumer.close()
        raise RuntimeError("injected failure")

    check = udf(fail_late, "binary", useArrow=False)
    pad = b"." * 1024
    df = (spark.createDataFrame([(b"f%04d%s" % (i, pad),) for i in range(1000)], "value binary")
          .coalesce(1).withColumn("value", check(col("value"))))
    prefix = f"job-{uuid.uuid4().hex[:8]}"
    previous = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        with pytest.raises(PySparkException, match="injected failure"):
            write(df, bootstrap, topic, prefix,
                  **{"kafka.transaction.timeout.ms": str(ZOMBIE_TIMEOUT_MS)})
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous)
    assert read(spark, bootstrap, topic, "read_committed") == []
    written = values(read(spark, bootstrap, topic, "read_uncommitted"))
    assert written, "the failed task wrote nothing before failing: nothing was proved"
    assert set(written) <= {b"f%04d%s" % (i, pad) for i in range(900)}
    # Every attempt's transaction ends aborted: the driver's abort fences the failed task's
    # id, and a writer worker that outlived the failed job and opened its transaction after
    # that fence (seen under load) is aborted by the coordinator once transaction.timeout.ms
    # passes; either way the last stable offset reaches the high watermark.
    deadline = time.monotonic() + ZOMBIE_TIMEOUT_MS / 1000 + ABORT_SCAN_S + LSO_SETTLE_S
    while True:
        stable = last_stable_offsets(bootstrap, topic, 2)
        high = high_watermarks(bootstrap, topic, 2)
        if stable == high or time.monotonic() > deadline:
            break
    txid = f"{prefix}-0"
    assert stable == high, (
        f"LSO {stable} below high watermark {high} for {txid}; coordinator: "
        f"{describe_transaction(bootstrap, txid)}; partitions: "
        f"{describe_producers(bootstrap, topic, 2)}")


def test_a_transactional_stream_writes_one_micro_batch(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    source, sink = new_topic(bootstrap, 2, "txs"), new_topic(bootstrap, 1, "txt")
    seed = [(f"s{i:02d}".encode(),) for i in range(20)]
    write(spark.createDataFrame(seed, "value binary").repartition(2), bootstrap, source,
          f"seed-{uuid.uuid4().hex[:8]}")
    query = (spark.readStream.format("strata").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("kafka.isolation.level", "read_committed").load().select("value")
             .writeStream.format("strata").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink)
             .option("kafka.transactional.id.prefix", f"stream-{uuid.uuid4().hex[:8]}")
             .option("checkpointLocation", str(tmp_path / "c"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(QUERY_TIMEOUT_S)
    assert query.exception() is None
    assert values(read(spark, bootstrap, sink, "read_committed")) == sorted(r[0] for r in seed)
