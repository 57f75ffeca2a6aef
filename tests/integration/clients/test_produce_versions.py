"""Produce and ListOffsets with real clients at the newest versions each one and Strata share.

Per client the negotiated version is read from the client's own debug log (librdkafka's
``Sent ProduceRequest (vN, ...)``, kafka-python's ``ProduceRequest(version=N``, aiokafka's
``ProduceRequest_vN(``), printed, and asserted to be ``min(client's newest, Strata's newest)``.
The clients' newest versions are their own: librdkafka 2.16 sends Produce up to v10 and
ListOffsets up to v7; kafka-python's producer caps Produce at v9 (``Sender``) and its consumer
uses ListOffsets up to ``ListOffsetsRequest.max_version``; aiokafka's are the newest structs in
its request unions. kafka-python's protocol classes also build v13 requests (topic ids), sent
through its own network client.

Behaviour checked on the way: MAX_TIMESTAMP answers the record holding the largest timestamp
(offset 1 for a batch with timestamps +100, +400, +250); a batch with keyless records on a
compacted topic fails as a whole with ``record_errors`` naming exactly those records, and the
client re-sends the others (librdkafka: ``_INVALID_DIFFERENT_RECORD``); v13 with an unknown
topic id answers UNKNOWN_TOPIC_ID.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import typing
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from strata.broker.handlers import served_versions
from strata.protocol import ApiKey
from strata.storage.records import RecordSpec, build_batch

from ..broker_process import BrokerProcess
from .wire import stored_batches

pytestmark = pytest.mark.integration

PRODUCE_MAX = served_versions()[ApiKey.PRODUCE].max_version
LIST_OFFSETS_MAX = served_versions()[ApiKey.LIST_OFFSETS].max_version
LIBRDKAFKA_PRODUCE_MAX = 10
LIBRDKAFKA_LIST_OFFSETS_MAX = 7
KAFKA_PYTHON_PRODUCER_MAX = 9
TIMEOUT_S = 30.0


def create_topic(broker: BrokerProcess, configs: dict[str, str] | None = None) -> str:
    name = f"versions.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1, config=configs or {})]).values():
        future.result(TIMEOUT_S)
    return name


def topic_id(broker: BrokerProcess, name: str) -> uuid.UUID:
    """The id the broker gave ``name`` (its topic registry file: Metadata v8 carries no ids)."""
    registry = json.loads((broker.data_dir / "__strata_topics.json").read_text())
    return uuid.UUID(registry["topics"][name]["topic_id"])


class LibrdkafkaLog:
    """librdkafka's protocol debug lines, through confluent-kafka's ``logger`` setting."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.logger = logging.getLogger(f"librdkafka.{uuid.uuid4().hex[:6]}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(_ListHandler(self.lines))

    def config(self) -> dict[str, Any]:
        return {"debug": "protocol", "logger": self.logger}

    def sent_versions(self, request: str) -> set[int]:
        pattern = re.compile(rf"Sent {request}Request \(v(\d+),")
        return {int(m.group(1)) for line in self.lines for m in pattern.finditer(line)}


class _ListHandler(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def client_log() -> Iterator[list[str]]:
    """DEBUG lines of kafka-python and aiokafka (their loggers, from any thread)."""
    lines: list[str] = []
    handler = _ListHandler(lines)
    loggers = [logging.getLogger(n) for n in ("kafka", "aiokafka")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    yield lines
    for lg, level in zip(loggers, levels, strict=True):
        lg.removeHandler(handler)
        lg.setLevel(level)


def versions_in(lines: list[str], pattern: str) -> set[int]:
    regex = re.compile(pattern)
    return {int(m.group(1)) for line in lines for m in regex.finditer(line)}


# ------------------------------------------------------------------------- confluent-kafka


def test_confluent_kafka_produce_and_max_timestamp(broker: BrokerProcess) -> None:
    topic = create_topic(broker)
    log = LibrdkafkaLog()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200,
                         **log.config()})
    base = int(time.time() * 1000) - 10_000
    for delta in (100, 400, 250):
        producer.produce(topic, b"v", key=b"k", timestamp=base + delta)
    assert producer.flush(TIMEOUT_S) == 0
    produce = log.sent_versions("Produce")
    print(f"confluent-kafka Produce v{sorted(produce)}")
    assert produce == {min(LIBRDKAFKA_PRODUCE_MAX, PRODUCE_MAX)}
    assert len(stored_batches(broker.bootstrap, topic, 1)) == 1  # the three in one batch

    admin_log = LibrdkafkaLog()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **admin_log.config()})
    tp = TopicPartition(topic, 0)
    (found,) = admin.list_offsets({tp: OffsetSpec.max_timestamp()}).values()
    info = found.result(TIMEOUT_S)
    admin.poll(0)  # the admin client hands its log lines over on poll
    list_offsets = admin_log.sent_versions("ListOffsets")
    print(f"confluent-kafka ListOffsets v{sorted(list_offsets)}")
    assert list_offsets == {min(LIBRDKAFKA_LIST_OFFSETS_MAX, LIST_OFFSETS_MAX)}
    assert (info.offset, info.timestamp) == (1, base + 400)
    (earliest,) = admin.list_offsets({tp: OffsetSpec.earliest()}).values()
    (latest,) = admin.list_offsets({tp: OffsetSpec.latest()}).values()
    assert (earliest.result(TIMEOUT_S).offset, latest.result(TIMEOUT_S).offset) == (0, 3)


def test_confluent_kafka_record_errors_on_a_compacted_topic(broker: BrokerProcess) -> None:
    topic = create_topic(broker, {"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 500,
                         "batch.num.messages": 1000})
    outcomes: dict[int, KafkaError | None] = {}

    def delivered(index: int) -> Any:
        return lambda err, _msg: outcomes.__setitem__(index, err)

    keyless = set(range(5, 100, 10))
    for i in range(100):
        producer.produce(topic, b"v%d" % i, key=None if i in keyless else b"k%d" % i,
                         on_delivery=delivered(i))
    assert producer.flush(TIMEOUT_S) == 0
    assert len(outcomes) == 100
    failed = {i for i, err in outcomes.items()
              if err is not None and err.code() == KafkaError.INVALID_RECORD}
    others = {i for i, err in outcomes.items()
              if err is not None and err.code() == KafkaError._INVALID_DIFFERENT_RECORD}
    assert failed == keyless  # exactly the records listed in record_errors
    assert others == set(range(100)) - keyless  # failed with them, not appended
    assert stored_batches(broker.bootstrap, topic, 1) == []
    # The application re-sends the others, as librdkafka's error tells it to.
    retried: list[KafkaError | None] = []
    for i in sorted(others):
        producer.produce(topic, b"v%d" % i, key=b"k%d" % i,
                         on_delivery=lambda err, _msg: retried.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    assert retried == [None] * 90
    assert sum(h.records_count for h in stored_batches(broker.bootstrap, topic, 1)) == 90


# ---------------------------------------------------------------------------- kafka-python


def kafka_python_client(broker: BrokerProcess) -> Any:
    from kafka.net.compat import KafkaNetClient

    client = KafkaNetClient(bootstrap_servers=broker.bootstrap)
    client._manager.bootstrap(timeout_ms=int(TIMEOUT_S * 1000))
    return client


def test_kafka_python_produce_and_list_offsets(broker: BrokerProcess,
                                               client_log: list[str]) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.protocol.consumer import ListOffsetsRequest

    topic = create_topic(broker)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for _ in range(2):
        producer.send(topic, b"v", key=b"k").get(TIMEOUT_S)
    producer.close()
    produce = versions_in(client_log, r"ProduceRequest\(version=(\d+)")
    print(f"kafka-python Produce v{sorted(produce)}")
    assert produce == {min(KAFKA_PYTHON_PRODUCER_MAX, PRODUCE_MAX)}

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = KpTopicPartition(topic, 0)
    assert consumer.end_offsets([tp]) == {tp: 2}
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    consumer.close()
    list_offsets = versions_in(client_log, r"ListOffsetsRequest\(version=(\d+)")
    print(f"kafka-python ListOffsets v{sorted(list_offsets)}")
    assert list_offsets == {min(ListOffsetsRequest.max_version, LIST_OFFSETS_MAX)}


def test_kafka_python_v13_by_topic_id_and_list_offsets_v11(broker: BrokerProcess) -> None:
    from kafka.protocol.consumer import ListOffsetsRequest
    from kafka.protocol.producer import ProduceRequest

    compacted = create_topic(broker, {"cleanup.policy": "compact"})
    known = topic_id(broker, compacted)
    data = ProduceRequest.TopicProduceData
    part = data.PartitionProduceData
    base = int(time.time() * 1000) - 10_000
    good = build_batch([RecordSpec(key=b"k", value=b"v", timestamp=base + d)
                        for d in (100, 400, 250)])
    bad = build_batch([RecordSpec(key=None if i in (3, 7) else b"k", value=b"v")
                       for i in range(10)])
    client = kafka_python_client(broker)
    try:
        def produce(tid: uuid.UUID, records: bytes) -> Any:
            request = ProduceRequest(
                transactional_id=None, acks=1, timeout_ms=5000, min_version=PRODUCE_MAX,
                max_version=PRODUCE_MAX,
                topic_data=[data(name="", topic_id=tid,
                                 partition_data=[part(index=0, records=records)])])
            response = client.send_and_receive(1, request, timeout_ms=int(TIMEOUT_S * 1000))
            assert response.version == PRODUCE_MAX
            ((topic_response,),) = [response.responses]
            assert topic_response.topic_id == tid
            (answer,) = topic_response.partition_responses
            return answer

        ok = produce(known, good)
        assert (ok.error_code, ok.base_offset, ok.log_start_offset) == (0, 0, 0)
        refused = produce(known, bad)
        assert refused.error_code == 87  # INVALID_RECORD
        assert [e.batch_index for e in refused.record_errors] == [3, 7]
        assert "2 record errors" in refused.error_message
        unknown = produce(uuid.uuid4(), good)
        assert unknown.error_code == 100  # UNKNOWN_TOPIC_ID
        print(f"kafka-python Produce v{PRODUCE_MAX} by topic id")

        partition = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
        request = ListOffsetsRequest(
            replica_id=-1, isolation_level=0, timeout_ms=5000,
            min_version=LIST_OFFSETS_MAX, max_version=LIST_OFFSETS_MAX,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=compacted, partitions=[
                partition(partition_index=0, current_leader_epoch=-1, timestamp=ts)
                for ts in (-3,)])])
        response = client.send_and_receive(1, request, timeout_ms=int(TIMEOUT_S * 1000))
        assert response.version == LIST_OFFSETS_MAX
        (answer,) = response.topics[0].partitions
        assert (answer.error_code, answer.offset, answer.timestamp) == (0, 1, base + 400)
        print(f"kafka-python ListOffsets v{LIST_OFFSETS_MAX} MAX_TIMESTAMP")
    finally:
        client.close()


# -------------------------------------------------------------------------------- aiokafka


def aiokafka_max(union: Any) -> int:
    return max(member.API_VERSION for member in typing.get_args(union))


def test_aiokafka_produce_and_list_offsets(broker: BrokerProcess,
                                           client_log: list[str]) -> None:
    import aiokafka
    from aiokafka.protocol.offset import OffsetRequestStruct
    from aiokafka.protocol.produce import ProduceRequestStruct

    topic = create_topic(broker)

    async def run() -> tuple[int, int]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"v", key=b"k")
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition(topic, 0)
            first = await consumer.beginning_offsets([tp])
            last = await consumer.end_offsets([tp])
            return first[tp], last[tp]
        finally:
            await consumer.stop()

    assert asyncio.run(asyncio.wait_for(run(), TIMEOUT_S)) == (0, 1)
    produce = versions_in(client_log, r"ProduceRequest_v(\d+)\(")
    list_offsets = versions_in(client_log, r"OffsetRequest_v(\d+)\(")
    print(f"aiokafka Produce v{sorted(produce)} ListOffsets v{sorted(list_offsets)}")
    assert produce == {min(aiokafka_max(ProduceRequestStruct), PRODUCE_MAX)}
    assert list_offsets == {min(aiokafka_max(OffsetRequestStruct), LIST_OFFSETS_MAX)}
