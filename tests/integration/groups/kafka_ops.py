"""The test's own side of the group tests: create topics, produce, read a group's commits.

Done in-process with confluent-kafka (fast, and independent of the client under test): records
are produced with acks=all to explicit partitions, round robin, so each partition's end offset is
known exactly; committed offsets are read with OffsetFetch through a Consumer that never joins
the group; group members come from DescribeGroups through the AdminClient.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Final

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TP = tuple[str, int]
TIMEOUT_S: Final = 20.0


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)],
                                  operation_timeout=TIMEOUT_S)
    futures[topic].result(TIMEOUT_S)


def fresh_topic(bootstrap: str, label: str, partitions: int,
                records: int) -> tuple[str, str, set[TP]]:
    """A new topic ``label-<random>`` holding ``records`` records (``produce``), a group id of
    its own, and the set of the topic's partitions."""
    tag = uuid.uuid4().hex[:8]
    topic = f"{label}-{tag}"
    create_topic(bootstrap, topic, partitions)
    produce(bootstrap, topic, partitions, records)
    return topic, f"{label}-group-{tag}", {(topic, p) for p in range(partitions)}


def produce(bootstrap: str, topic: str, partitions: int, count: int, *,
            start: int = 0) -> None:
    """Records ``start .. start+count-1`` (value = the number), record ``i`` to partition
    ``i % partitions``; raises unless every one is acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True})
    failures: list[str] = []

    def report(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    for i in range(start, start + count):
        while True:
            try:
                producer.produce(topic, str(i).encode(), partition=i % partitions,
                                 on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
    left = producer.flush(TIMEOUT_S)
    assert left == 0 and not failures, f"{left} undelivered, failures: {failures[:5]}"


def end_offsets(topic: str, partitions: int, produced: int) -> dict[TP, int]:
    """Per partition, the end offset after ``produce`` wrote ``produced`` records in all."""
    return {(topic, p): len(range(p, produced, partitions)) for p in range(partitions)}


def committed(bootstrap: str, group: str, tps: Iterable[TP]) -> dict[TP, int]:
    """The group's committed offsets (OffsetFetch); -1001 (librdkafka's INVALID) for none."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        answer = consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=TIMEOUT_S)
    finally:
        consumer.close()
    for tp in answer:
        if tp.error is not None:
            raise KafkaException(tp.error)
    return {(tp.topic, tp.partition): tp.offset for tp in answer}


def describe(bootstrap: str, group: str) -> tuple[str, dict[str, set[TP]]]:
    """The group's state name and, per member id, its assigned partitions."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group],
                                                 request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
    members = {
        m.member_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
        for m in description.members
    }
    return description.state.name, members
