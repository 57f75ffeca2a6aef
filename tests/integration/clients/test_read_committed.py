"""Transactions on the partition side, with a real consumer: transactional batches produced by
hand (ProduceRequest v8 carrying a ``transactional_id``, batches from
``strata.storage.records.build_batch``), ended by WriteTxnMarkers sent as a transaction
coordinator would, read back by confluent-kafka (librdkafka) consumers.

read_committed sees exactly the committed records (and the plain ones) and stops at the LSO;
read_uncommitted sees everything; ListOffsets latest under read_committed answers the LSO; a
read_committed consumer waiting at the LSO receives an open transaction's records once its
COMMIT marker lands.

The markers are written by hand, with no transaction coordinator behind the producer ids, so
the broker runs with ``transaction.partition.verification.enable=false`` (with it, KIP-890's
check asks the coordinator first and refuses these batches; ``tests/integration/transactions``
tests that check).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from strata.protocol import ApiKey, ErrorCode
from strata.storage.records import RecordSpec, build_batch

from ..broker_process import BrokerProcess, running_broker
from .test_wire_idempotence import create_topic
from .wire import KafkaWire

pytestmark = pytest.mark.integration

TIMEOUT_MS = 10_000
ABORTED, COMMITTED, OPEN = 910_001, 910_002, 910_003


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("broker"),
                        {"transaction.partition.verification.enable": "false"}) as started:
        yield started


@pytest.fixture
def wire(broker: BrokerProcess) -> Iterator[KafkaWire]:
    with KafkaWire.to(broker.bootstrap, timeout=15) as connection:
        yield connection


def produce(wire: KafkaWire, topic: str, *values: bytes, producer_id: int = -1,
            sequence: int = 0) -> int:
    txn = producer_id >= 0
    records = build_batch([RecordSpec(key=None, value=v, timestamp=int(time.time() * 1000))
                           for v in values], producer_id=producer_id,
                          producer_epoch=0 if txn else -1, base_sequence=sequence if txn else -1,
                          is_transactional=txn)
    response = wire.request(ApiKey.PRODUCE, 8, {
        "transactional_id": f"tx-{producer_id}" if txn else None, "acks": -1,
        "timeout_ms": TIMEOUT_MS,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    (p,) = response.responses[0].partition_responses
    assert p.error_code == ErrorCode.none, p
    return int(p.base_offset)


def end_txn(wire: KafkaWire, topic: str, producer_id: int, commit: bool) -> None:
    response = wire.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
        "producer_id": producer_id, "producer_epoch": 0, "transaction_result": commit,
        "coordinator_epoch": 0, "topics": [{"name": topic, "partition_indexes": [0]}]}]})
    (p,) = response.markers[0].topics[0].partitions
    assert p.error_code == ErrorCode.none, p


def latest(wire: KafkaWire, topic: str, isolation_level: int) -> int:
    response = wire.request(ApiKey.LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": isolation_level, "topics": [{
            "name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                           "timestamp": -1}]}]})
    (p,) = response.topics[0].partitions
    assert p.error_code == ErrorCode.none, p
    return int(p.offset)


def consumer(broker: BrokerProcess, topic: str, isolation: str, offset: int = 0) -> Any:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"rc-{isolation}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, offset)])
    return c


def consume(c: Any, want: int, seconds: float) -> list[bytes]:
    """Up to ``want`` record values within ``seconds`` (fewer if no more come)."""
    got: list[bytes] = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        message = c.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message.value())
    return got


def test_read_committed_sees_exactly_the_committed_records(broker: BrokerProcess,
                                                           wire: KafkaWire) -> None:
    topic = create_topic(wire)
    produce(wire, topic, b"a1", b"a2", producer_id=ABORTED)
    produce(wire, topic, b"p1")
    produce(wire, topic, b"c1", producer_id=COMMITTED)
    end_txn(wire, topic, ABORTED, commit=False)
    produce(wire, topic, b"p2")
    produce(wire, topic, b"c2", producer_id=COMMITTED, sequence=1)
    end_txn(wire, topic, COMMITTED, commit=True)
    open_first = produce(wire, topic, b"o1", producer_id=OPEN)
    produce(wire, topic, b"p3")  # past the LSO: not readable under read_committed yet

    assert latest(wire, topic, 1) == open_first  # the LSO
    assert latest(wire, topic, 0) == open_first + 2  # the HW

    committed = consumer(broker, topic, "read_committed")
    uncommitted = consumer(broker, topic, "read_uncommitted")
    try:
        assert consume(uncommitted, 8, 20) == [b"a1", b"a2", b"p1", b"c1", b"p2", b"c2", b"o1",
                                               b"p3"]
        assert consume(committed, 4, 20) == [b"p1", b"c1", b"p2", b"c2"]
        assert consume(committed, 1, 1.5) == []  # the open transaction holds the LSO

        loop_start = time.monotonic()
        end_txn(wire, topic, OPEN, commit=True)  # the waiting consumer gets o1 and p3
        assert consume(committed, 2, 20) == [b"o1", b"p3"]
        assert time.monotonic() - loop_start < 20
        assert latest(wire, topic, 1) == latest(wire, topic, 0)
    finally:
        committed.close()
        uncommitted.close()
