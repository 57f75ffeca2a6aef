"""Idempotent produce at the byte level, through Strata's own codec over a raw socket.

A real client only resends a batch when a response is lost, which a test cannot arrange with a
real client; here the exact same bytes are sent twice. The batch is built with
``strata.storage.records.build_batch`` under a producer id from InitProducerId, and sent as a
ProduceRequest v8 (what librdkafka and kafka-python use). Kafka's rule: a batch whose
(producer id, epoch, sequence) is one of the last five appended is a duplicate, answered with
error NONE and the base offset of the original, and not appended again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from strata.protocol import ApiKey, ErrorCode
from strata.storage import record_batch as rb
from strata.storage.records import RecordSpec, build_batch, iter_records

from ..broker_process import BrokerProcess
from .wire import KafkaWire, fetch

pytestmark = pytest.mark.integration

TIMEOUT_MS = 10_000
PRODUCE_VERSION = 8


@pytest.fixture
def wire(broker: BrokerProcess) -> Iterator[KafkaWire]:
    with KafkaWire.to(broker.bootstrap) as connection:
        yield connection


def create_topic(wire: KafkaWire, partitions: int = 1) -> str:
    topic = f"wire.idempotence.{uuid.uuid4().hex[:8]}"
    response = wire.request(ApiKey.CREATE_TOPICS, 4, {
        "topics": [{
            "name": topic, "num_partitions": partitions, "replication_factor": 1,
            "assignments": [], "configs": [],
        }],
        "timeout_ms": TIMEOUT_MS,
        "validate_only": False,
    })
    (result,) = response.topics
    assert result.error_code == ErrorCode.none, f"CreateTopics v4 {topic}: {result}"
    return topic


def init_producer_id(wire: KafkaWire) -> tuple[int, int]:
    response = wire.request(ApiKey.INIT_PRODUCER_ID, 1, {
        "transactional_id": None, "transaction_timeout_ms": 2_147_483_647,
    })
    assert response.error_code == ErrorCode.none, f"InitProducerId v1: {response}"
    assert response.producer_id >= 0 and response.producer_epoch >= 0, response
    return int(response.producer_id), int(response.producer_epoch)


def produce(wire: KafkaWire, topic: str, batch: bytes) -> Any:
    """ProduceRequest v8, acks=-1, one batch to partition 0; the partition's response."""
    response = wire.request(ApiKey.PRODUCE, PRODUCE_VERSION, {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": TIMEOUT_MS,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    })
    (topic_response,) = response.responses
    (partition,) = topic_response.partition_responses
    return partition


def fetch_log(wire: KafkaWire, topic: str) -> tuple[int, list[rb.BatchHeader], bytes]:
    """(high watermark, batch headers, raw records) of partition 0 read from offset 0."""
    partition = fetch(wire, topic, 0)
    records = bytes(partition.records or b"")
    headers = [header for _, header in rb.iter_headers(records)]
    return int(partition.high_watermark), headers, records


def idempotent_batch(pid: int, epoch: int, base_sequence: int, count: int) -> bytes:
    return build_batch(
        [
            RecordSpec(
                key=f"k{base_sequence + i}".encode(),
                value=f"v{base_sequence + i}".encode(),
                headers=(("seq", str(base_sequence + i).encode()),),
                timestamp=1_700_000_000_000 + base_sequence + i,
            )
            for i in range(count)
        ],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=base_sequence,
    )


def test_duplicate_batch_is_appended_once_and_answered_with_its_offset(wire: KafkaWire) -> None:
    topic = create_topic(wire)
    pid, epoch = init_producer_id(wire)
    batch = idempotent_batch(pid, epoch, base_sequence=0, count=5)

    first = produce(wire, topic, batch)
    assert first.error_code == ErrorCode.none, f"first Produce v8: {first}"
    again = produce(wire, topic, batch)
    assert again.error_code == ErrorCode.none, f"resent duplicate Produce v8: {again}"
    assert again.base_offset == first.base_offset, (
        f"duplicate answered with base offset {again.base_offset}, "
        f"the original was appended at {first.base_offset}"
    )
    with KafkaWire(*wire.sock.getpeername()) as other:  # a resend on a new connection too
        third = produce(other, topic, batch)
    assert (third.error_code, third.base_offset) == (ErrorCode.none, first.base_offset), third

    high_watermark, headers, records = fetch_log(wire, topic)
    assert high_watermark == 5, f"high watermark {high_watermark}: the batch was appended again"
    assert [(h.base_offset, h.records_count, h.producer_id) for h in headers] == [
        (0, 5, pid)
    ], f"log holds batches {headers}"
    assert [r.value for r in iter_records(records)] == [f"v{i}".encode() for i in range(5)]

    # The next sequence is appended after it.
    following = produce(wire, topic, idempotent_batch(pid, epoch, base_sequence=5, count=3))
    assert (following.error_code, following.base_offset) == (ErrorCode.none, 5), following
    assert fetch_log(wire, topic)[0] == 8


def test_sequence_gap_is_out_of_order(wire: KafkaWire) -> None:
    topic = create_topic(wire)
    pid, epoch = init_producer_id(wire)
    assert produce(wire, topic, idempotent_batch(pid, epoch, 0, 2)).error_code == ErrorCode.none
    gap = produce(wire, topic, idempotent_batch(pid, epoch, base_sequence=7, count=2))
    assert gap.error_code == ErrorCode.out_of_order_sequence_number, (
        f"Produce v8 with sequence 7 after 0..1: {gap}"
    )
    assert fetch_log(wire, topic)[0] == 2, "the out-of-order batch must not be appended"
