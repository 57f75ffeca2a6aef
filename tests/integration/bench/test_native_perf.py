"""``build/strata_perf`` (the native load generator, ``bench/native/strata_perf.c``) against a
real broker: built by ``make native-perf`` (a no-op when up to date; ``make test`` depends on it,
so Debian's librdkafka-dev and a compiler are there — the build failing fails this test, it
never skips), then 10,000 records produced, consumed, and produced in transactions, with the
counts checked against the broker's own high watermarks.

Counts only, never rates: the machine may be loaded.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench import native_perf
from bench.native_perf import Produce

from ..broker_process import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[3]
RECORDS = 10_000
PARTITIONS = 3
STEP_S = 60.0


@pytest.fixture(scope="module")
def binary() -> Path:
    done = subprocess.run(["make", "-s", "native-perf"], cwd=ROOT, capture_output=True,
                          text=True, timeout=170, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert native_perf.BINARY.exists()
    return native_perf.BINARY


def _topic(bootstrap: str) -> str:
    topic = f"native-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(STEP_S)
    return topic


def _high_watermarks(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "native-perf-check"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=STEP_S)[1]
                   for p in range(PARTITIONS))
    finally:
        consumer.close()


def test_produce_then_consume_every_record(broker: BrokerProcess, binary: Path) -> None:
    topic = _topic(broker.bootstrap)
    produced = native_perf.run(
        native_perf.produce_args(broker.bootstrap, Produce(topic, RECORDS, acks="all",
                                                           idempotence=True), STEP_S),
        binary=binary, timeout_s=STEP_S)
    assert (produced.records, produced.failed) == (RECORDS, 0)
    assert produced.latency_ms is not None and produced.latency_ms.max > 0
    assert produced.client_cpu_s is not None and produced.client_cpu_s > 0
    assert _high_watermarks(broker.bootstrap, topic) == RECORDS  # round-robin, none twice

    consumed = native_perf.run(native_perf.consume_args(broker.bootstrap, topic, RECORDS, 30),
                               binary=binary, timeout_s=STEP_S)
    assert (consumed.mode, consumed.records, consumed.failed) == ("consume", RECORDS, 0)


def test_transactional_produce_commits_one_transaction_per_n_records(
        broker: BrokerProcess, binary: Path) -> None:
    topic = _topic(broker.bootstrap)
    produced = native_perf.run(
        native_perf.produce_args(broker.bootstrap, Produce(
            topic, RECORDS, acks="all", partitioner="rr", transactional_id=f"perf-{topic}",
            transaction_records=1000), STEP_S), binary=binary, timeout_s=STEP_S)
    assert produced.complete
    assert (produced.records, produced.transactions) == (RECORDS, RECORDS // 1000)
    assert produced.commit_ms is not None and produced.commit_ms.p50 > 0
    # Every transaction wrote to every partition: one COMMIT marker each, after the records.
    assert _high_watermarks(broker.bootstrap, topic) == RECORDS + PARTITIONS * RECORDS // 1000

    committed = native_perf.run(
        native_perf.consume_args(broker.bootstrap, topic, RECORDS, 30, "read_committed"),
        binary=binary, timeout_s=STEP_S)
    assert (committed.records, committed.failed) == (RECORDS, 0)
