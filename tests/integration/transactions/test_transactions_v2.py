"""KIP-890 on a real broker: the partition leader's verification of transactional produces
(no hanging transaction, part 1) and transactions v2 as a Java 4.x producer speaks it (part 2):
no AddPartitionsToTxn / AddOffsetsToTxn, Produce v12 and TxnOffsetCommit v5 add the partitions
through their leaders, EndTxn v5 bumps the epoch at every end.

Driven over the wire (``KafkaWire``) because no client installed here speaks transactions v2
(librdkafka, kafka-python, aiokafka and kafkajs stop at v1); the records are read back by
confluent-kafka consumers.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any, Final

import pytest
from confluent_kafka import Consumer, TopicPartition

from strata.protocol import ApiKey, ErrorCode
from strata.storage.records import RecordSpec, build_batch

from ..broker_process import BrokerProcess, running_broker
from ..clients.wire import KafkaWire
from .test_transaction_coordinator import OVERRIDES, create_topic, describe, wait_for_state

pytestmark = pytest.mark.integration

STEP_S: Final = 10.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("broker"), OVERRIDES) as started:
        yield started


def init_producer(wire: KafkaWire, tid: str) -> tuple[int, int]:
    """FindCoordinator, then InitProducerId v5 until the coordinator has loaded."""
    deadline = time.monotonic() + STEP_S
    while True:
        wire.request(ApiKey.FIND_COORDINATOR, 3, {"key": tid, "key_type": 1})
        init = wire.request(ApiKey.INIT_PRODUCER_ID, 5, {
            "transactional_id": tid, "transaction_timeout_ms": 60_000, "producer_id": -1,
            "producer_epoch": -1})
        if init.error_code == ErrorCode.none or time.monotonic() > deadline:
            assert init.error_code == ErrorCode.none
            return int(init.producer_id), int(init.producer_epoch)
        time.sleep(0.05)


def produce(wire: KafkaWire, version: int, tid: str, topic: str, partition: int, pid: int,
            epoch: int, sequence: int, *values: bytes) -> Any:
    records = build_batch([RecordSpec(key=None, value=v, timestamp=int(time.time() * 1000))
                           for v in values], producer_id=pid, producer_epoch=epoch,
                          base_sequence=sequence, is_transactional=True)
    response = wire.request(ApiKey.PRODUCE, version, {
        "transactional_id": tid, "acks": -1, "timeout_ms": 10_000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": records}]}]})
    (answer,) = response.responses[0].partition_responses
    return answer


def offsets(wire: KafkaWire, topic: str, partition: int, isolation_level: int) -> int:
    response = wire.request(ApiKey.LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": isolation_level, "topics": [{
            "name": topic, "partitions": [{"partition_index": partition,
                                           "current_leader_epoch": -1, "timestamp": -1}]}]})
    (p,) = response.topics[0].partitions
    assert p.error_code == ErrorCode.none
    return int(p.offset)


def read_committed(bootstrap: str, topic: str, partitions: int, want: int) -> list[bytes]:
    """Every record value a read_committed consumer gets, once ``want`` arrived (or 10 s)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + STEP_S
    try:
        while len(got) < want and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
        extra = consumer.poll(0.5)  # nothing beyond what was committed
        assert extra is None or extra.error() is not None
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize(("version", "error"), [
    (10, ErrorCode.invalid_txn_state),  # before KIP-890's error: INVALID_TXN_STATE
    (11, ErrorCode.transaction_abortable),
])
def test_a_produce_to_a_partition_not_in_the_transaction_is_refused(
        broker: BrokerProcess, version: int, error: ErrorCode) -> None:
    topic = create_topic(broker.bootstrap)
    tid = f"hang-{uuid.uuid4().hex[:6]}"
    with KafkaWire.to(broker.bootstrap, timeout=STEP_S) as wire:
        pid, epoch = init_producer(wire, tid)
        refused = produce(wire, version, tid, topic, 0, pid, epoch, 0, b"would hang")
        assert refused.error_code == error, refused
        # Nothing was appended, so nothing holds the last stable offset.
        assert offsets(wire, topic, 0, 0) == offsets(wire, topic, 0, 1) == 0
        added = wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        assert {p.partition_error_code for t in added.results_by_topic_v3_and_below
                for p in t.results_by_partition} == {ErrorCode.none}
        accepted = produce(wire, version, tid, topic, 0, pid, epoch, 0, b"in the txn")
        assert (accepted.error_code, accepted.base_offset) == (ErrorCode.none, 0)
        assert offsets(wire, topic, 0, 1) == 0  # the open transaction holds the LSO
        ended = wire.request(ApiKey.END_TXN, 4, {
            "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
            "committed": True})
        assert ended.error_code == ErrorCode.none
    assert read_committed(broker.bootstrap, topic, 1, 1) == [b"in the txn"]


def test_transactions_v2_add_partitions_and_offsets_through_their_leaders(
        broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap)
    tid, group = f"v2-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    with KafkaWire.to(broker.bootstrap, timeout=STEP_S) as wire:
        versions = wire.request(ApiKey.API_VERSIONS, 4, {
            "client_software_name": "strata-tests", "client_software_version": "1"})
        assert {f.name: f.max_version_level for f in versions.finalized_features} == {
            "transaction.version": 2}
        pid, epoch = init_producer(wire, tid)
        # No AddPartitionsToTxn: Produce v12 has the leader add each partition.
        for partition, value in ((0, b"c0"), (1, b"c1")):
            answer = produce(wire, 12, tid, topic, partition, pid, epoch, 0, value)
            assert answer.error_code == ErrorCode.none, answer
        state = describe(broker.bootstrap, tid)
        assert state.transaction_state == "Ongoing"
        assert {(t.topic, p) for t in state.topics for p in t.partitions} == {
            (topic, 0), (topic, 1)}
        # No AddOffsetsToTxn: TxnOffsetCommit v5 has the group coordinator add its partition.
        wire.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        committed = wire.request(ApiKey.TXN_OFFSET_COMMIT, 5, {
            "transactional_id": tid, "group_id": group, "producer_id": pid,
            "producer_epoch": epoch, "generation_id": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
        assert [p.error_code for t in committed.topics for p in t.partitions] == [
            ErrorCode.none]
        assert any(t.topic == "__consumer_offsets" for t in describe(broker.bootstrap,
                                                                      tid).topics)
        ended = wire.request(ApiKey.END_TXN, 5, {
            "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
            "committed": True})
        assert ended.error_code == ErrorCode.none
        # Transactions v2: every end bumps the epoch, and the answer carries it.
        assert (ended.producer_id, ended.producer_epoch) == (pid, epoch + 1)
        wait_for_state(broker.bootstrap, tid, "CompleteCommit")
        fetched = wire.request(ApiKey.OFFSET_FETCH, 7, {
            "group_id": group, "require_stable": True,
            "topics": [{"name": topic, "partition_indexes": [0]}]})
        (p,) = fetched.topics[0].partitions
        assert (p.error_code, p.committed_offset) == (ErrorCode.none, 42)
        # The old epoch is fenced; the next transaction runs at the bumped one and aborts.
        stale = produce(wire, 12, tid, topic, 0, pid, epoch, 1, b"zombie")
        assert stale.error_code == ErrorCode.invalid_producer_epoch, stale
        answer = produce(wire, 12, tid, topic, 0, pid, epoch + 1, 0, b"aborted")
        assert answer.error_code == ErrorCode.none, answer
        aborted = wire.request(ApiKey.END_TXN, 5, {
            "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch + 1,
            "committed": False})
        assert (aborted.error_code, aborted.producer_epoch) == (ErrorCode.none, epoch + 2)
        wait_for_state(broker.bootstrap, tid, "CompleteAbort")
        assert offsets(wire, topic, 0, 1) == offsets(wire, topic, 0, 0)  # LSO = HW
    assert sorted(read_committed(broker.bootstrap, topic, 2, 2)) == [b"c0", b"c1"]
