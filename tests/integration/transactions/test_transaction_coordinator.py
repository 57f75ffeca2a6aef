"""The transaction coordinator of a real broker: confluent-kafka's transactional producer, and
the coordinator's wire APIs end to end (markers in the partitions, timeouts, fencing).

Before the coordinator existed a transactional producer waited out its 60 s of
FindCoordinator retries; here every step is bounded by seconds, and a read_committed consumer
sees exactly the committed records.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strata.protocol import ApiKey, ErrorCode

from ..broker_process import BrokerProcess
from ..clients.wire import KafkaWire, stored_batches

pytestmark = pytest.mark.integration

STEP_S: Final = 10.0
OVERRIDES: Final = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
                    "transaction.state.log.num.partitions": "5"}
MakeBroker = Callable[[Mapping[str, str] | None], BrokerProcess]


def create_topic(bootstrap: str, partitions: int = 2) -> str:
    topic = f"txn.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(STEP_S)
    return topic


def producer(bootstrap: str, transactional_id: str, **config: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                     "message.timeout.ms": 5_000, **config})


def describe(bootstrap: str, transactional_id: str) -> Any:
    with KafkaWire.to(bootstrap) as wire:
        found = wire.request(ApiKey.FIND_COORDINATOR, 3,
                             {"key": transactional_id, "key_type": 1})
        assert found.error_code == ErrorCode.none
        (state,) = wire.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                {"transactional_ids": [transactional_id]}).transaction_states
        return state


def listed_state(bootstrap: str, transactional_id: str) -> str | None:
    """The id's state as ListTransactions has it (DescribeTransactions answers an Empty id's
    start time -1, as Kafka does, which kio's decoder refuses)."""
    with KafkaWire.to(bootstrap) as wire:
        listed = wire.request(ApiKey.LIST_TRANSACTIONS, 1, {
            "state_filters": [], "producer_id_filters": [], "duration_filter": -1})
    assert listed.error_code == ErrorCode.none
    return next((t.transaction_state for t in listed.transaction_states
                 if t.transactional_id == transactional_id), None)


def wait_for_state(bootstrap: str, transactional_id: str, wanted: str,
                   timeout_s: float = STEP_S) -> Any:
    """Poll ListTransactions until the id is in state ``wanted``; its DescribeTransactions."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = listed_state(bootstrap, transactional_id)
        if state == wanted or time.monotonic() > deadline:
            assert state == wanted
            return describe(bootstrap, transactional_id)
        time.sleep(0.05)


def test_init_transactions_answers_at_once_and_a_second_producer_fences_the_first(
        make_broker: MakeBroker) -> None:
    broker = make_broker(OVERRIDES)
    topic = create_topic(broker.bootstrap)
    tid = f"fence-{uuid.uuid4().hex[:6]}"
    first = producer(broker.bootstrap, tid)
    started = time.monotonic()
    first.init_transactions(STEP_S)
    assert time.monotonic() - started < STEP_S
    assert listed_state(broker.bootstrap, tid) == "Empty"
    second = producer(broker.bootstrap, tid)
    second.init_transactions(STEP_S)
    first.begin_transaction()
    first.produce(topic, b"zombie", partition=0)
    with pytest.raises(KafkaException) as caught:
        first.commit_transaction(STEP_S)
    error: KafkaError = caught.value.args[0]
    assert error.fatal() and error.code() == KafkaError._FENCED
    # The new producer is unaffected.
    second.begin_transaction()
    second.abort_transaction(STEP_S)


def test_a_transaction_left_open_is_aborted_by_the_coordinator(make_broker: MakeBroker) -> None:
    broker = make_broker(OVERRIDES)
    topic = create_topic(broker.bootstrap)
    tid = f"timeout-{uuid.uuid4().hex[:6]}"
    with KafkaWire.to(broker.bootstrap) as wire:
        wire.request(ApiKey.FIND_COORDINATOR, 3, {"key": tid, "key_type": 1})
        init = wire.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": tid, "transaction_timeout_ms": 1_000, "producer_id": -1,
            "producer_epoch": -1})
        assert init.error_code == ErrorCode.none
        added = wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": tid,
            "v3_and_below_producer_id": init.producer_id,
            "v3_and_below_producer_epoch": init.producer_epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0, 1]}]})
        assert {p.partition_error_code for t in added.results_by_topic_v3_and_below
                for p in t.results_by_partition} == {ErrorCode.none}
        assert listed_state(broker.bootstrap, tid) == "Ongoing"
        aborted = wait_for_state(broker.bootstrap, tid, "CompleteAbort")
        assert aborted.producer_epoch == init.producer_epoch + 1  # the producer is fenced
        # One ABORT marker per partition, at the bumped epoch.
        markers = [h for h in stored_batches(broker.bootstrap, topic, 2) if h.is_control]
        assert [(h.producer_id, h.producer_epoch) for h in markers] == [
            (init.producer_id, init.producer_epoch + 1)] * 2
        late = wire.request(ApiKey.END_TXN, 3, {
            "transactional_id": tid, "producer_id": init.producer_id,
            "producer_epoch": init.producer_epoch, "committed": True})
        assert late.error_code == ErrorCode.producer_fenced


def test_commit_and_abort_write_markers_and_complete(make_broker: MakeBroker) -> None:
    broker = make_broker(OVERRIDES)
    topic = create_topic(broker.bootstrap)
    tid = f"wire-{uuid.uuid4().hex[:6]}"
    with KafkaWire.to(broker.bootstrap) as wire:
        wire.request(ApiKey.FIND_COORDINATOR, 3, {"key": tid, "key_type": 1})
        init = wire.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": tid, "transaction_timeout_ms": 60_000, "producer_id": -1,
            "producer_epoch": -1})
        pid, epoch = init.producer_id, init.producer_epoch
        for commit, wanted in ((True, "CompleteCommit"), (False, "CompleteAbort")):
            wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
                "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": [1]}]})
            started = time.monotonic()
            ended = wire.request(ApiKey.END_TXN, 3, {
                "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                "committed": commit})
            assert ended.error_code == ErrorCode.none
            wait_for_state(broker.bootstrap, tid, wanted)
            assert time.monotonic() - started < STEP_S
    markers = [h for h in stored_batches(broker.bootstrap, topic, 2) if h.is_control]
    assert [(h.producer_id, h.producer_epoch) for h in markers] == [(pid, epoch)] * 2


def test_confluent_kafka_commits_and_aborts(make_broker: MakeBroker) -> None:
    broker = make_broker(OVERRIDES)
    topic = create_topic(broker.bootstrap)
    tid = f"ck-{uuid.uuid4().hex[:6]}"
    p = producer(broker.bootstrap, tid)
    p.init_transactions(STEP_S)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, b"committed-%d" % i, partition=i % 2)
    started = time.monotonic()
    p.commit_transaction(STEP_S)
    assert time.monotonic() - started < STEP_S
    wait_for_state(broker.bootstrap, tid, "CompleteCommit")
    p.begin_transaction()
    p.produce(topic, b"aborted", partition=0)
    assert p.flush(STEP_S) == 0  # sent: the partition is in the transaction
    p.abort_transaction(STEP_S)
    wait_for_state(broker.bootstrap, tid, "CompleteAbort")
    # A read_committed consumer sees exactly the committed records.
    assert sorted(consume_committed(broker.bootstrap, topic, 4)) == [
        b"committed-%d" % i for i in range(4)]


def consume_committed(bootstrap: str, topic: str, expected: int,
                      partitions: int = 2) -> list[bytes]:
    """Values a read_committed consumer reads from ``topic`` until it has ``expected`` of them
    and has reached the end of every partition (so nothing more is visible)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + STEP_S
        while time.monotonic() < deadline and (len(values) < expected
                                             or len(at_end) < partitions):
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                raise KafkaException(message.error())
            at_end.discard(message.partition())
            values.append(message.value())
        return values
    finally:
        consumer.close()


def test_confluent_kafka_transaction_past_its_timeout_is_aborted(
        make_broker: MakeBroker) -> None:
    broker = make_broker(OVERRIDES)
    topic = create_topic(broker.bootstrap)
    tid = f"ck-timeout-{uuid.uuid4().hex[:6]}"
    p = producer(broker.bootstrap, tid, **{"transaction.timeout.ms": 1_500,
                                           "message.timeout.ms": 1_500})
    p.init_transactions(STEP_S)
    p.begin_transaction()
    p.produce(topic, b"left-open", partition=0)
    assert p.flush(STEP_S) == 0
    wait_for_state(broker.bootstrap, tid, "CompleteAbort")
    with pytest.raises(KafkaException):  # the coordinator fenced the producer's epoch
        p.commit_transaction(STEP_S)
    assert consume_committed(broker.bootstrap, topic, 0) == []


def test_offsets_sent_to_a_transaction_are_committed_with_it(make_broker: MakeBroker) -> None:
    """Consume-transform-produce: AddOffsetsToTxn, TxnOffsetCommit, then the COMMIT marker on
    ``__consumer_offsets`` (written in-process) makes the group's offsets committed."""
    from confluent_kafka import TopicPartition

    broker = make_broker(OVERRIDES)
    source, sink = create_topic(broker.bootstrap, 1), create_topic(broker.bootstrap, 1)
    seed = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        seed.produce(source, b"in-%d" % i, partition=0)
    assert seed.flush(STEP_S) == 0
    group = f"ctp-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(source, 0, 0)])
        inputs = []
        deadline = time.monotonic() + STEP_S
        while len(inputs) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                inputs.append(message)
        assert len(inputs) == 3
        p = producer(broker.bootstrap, f"ctp-{uuid.uuid4().hex[:6]}")
        p.init_transactions(STEP_S)
        p.begin_transaction()
        for message in inputs:
            p.produce(sink, message.value().replace(b"in", b"out"), partition=0)
        p.send_offsets_to_transaction([TopicPartition(source, 0, 3)],
                                      consumer.consumer_group_metadata(), STEP_S)
        p.commit_transaction(STEP_S)
        deadline = time.monotonic() + STEP_S
        committed = -1
        while committed != 3 and time.monotonic() < deadline:
            (position,) = consumer.committed([TopicPartition(source, 0)], STEP_S)
            committed = position.offset
            time.sleep(0.05)
        assert committed == 3
    finally:
        consumer.close()
    assert sorted(consume_committed(broker.bootstrap, sink, 3, partitions=1)) == [
        b"out-%d" % i for i in range(3)]
