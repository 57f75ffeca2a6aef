"""confluent-kafka (librdkafka) driver.

librdkafka's own partitioner (``consistent_random``: CRC32 of the key) picks partitions; its
consumer needs a ``group.id`` even for ``assign()``, but with no subscribe and no commit it never
joins the group. It fetches with ``isolation.level=read_committed`` by default, kept on purpose:
the broker's last stable offset must be right for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from ..model import (
    DEFAULT_PRODUCE,
    FETCH_MAX_WAIT_MS,
    REQUEST_TIMEOUT_MS,
    REQUEST_TIMEOUT_S,
    ClientError,
    ConsumedRecord,
    Delivery,
    OutRecord,
    ProduceOptions,
    ReadToEnd,
    split_rounds,
)


class ConfluentKafkaDriver:
    name = "confluent-kafka"

    def __init__(self, bootstrap: str) -> None:
        self.common: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "client.id": "strata-matrix-confluent",
            "socket.timeout.ms": REQUEST_TIMEOUT_MS,
            "socket.connection.setup.timeout.ms": REQUEST_TIMEOUT_MS,
            "topic.metadata.refresh.interval.ms": 1000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "retry.backoff.ms": 50,
        }
        self._admin_client: AdminClient | None = None

    def _admin(self) -> AdminClient:
        # One per driver: an AdminClient dropped while its futures are pending destroys its
        # handle and fails them (_DESTROY).
        if self._admin_client is None:
            self._admin_client = AdminClient(self.common)
        return self._admin_client

    def create_topic(self, topic: str, partitions: int) -> None:
        futures = self._admin().create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
            operation_timeout=REQUEST_TIMEOUT_S,
            request_timeout=REQUEST_TIMEOUT_S,
        )
        _result(futures[topic], f"create_topics({topic!r})")

    def partition_count(self, topic: str) -> int | None:
        metadata = self._admin().list_topics(timeout=REQUEST_TIMEOUT_S)
        found = metadata.topics.get(topic)
        if found is None:
            return None
        if found.error is not None:
            raise ClientError(f"metadata for {topic!r}: {found.error}")
        return len(found.partitions)

    def delete_topic(self, topic: str) -> None:
        futures = self._admin().delete_topics(
            [topic], operation_timeout=REQUEST_TIMEOUT_S, request_timeout=REQUEST_TIMEOUT_S
        )
        _result(futures[topic], f"delete_topics({topic!r})")

    def produce(self, topic: str, records: Sequence[OutRecord],
                options: ProduceOptions = DEFAULT_PRODUCE) -> list[Delivery]:
        producer = Producer({
            **self.common,
            "acks": "all",
            "compression.type": options.compression,
            "enable.idempotence": options.idempotent,
            "linger.ms": 20,  # let the records of a round share a batch per partition
            "message.timeout.ms": REQUEST_TIMEOUT_MS,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
        })
        reports: list[Delivery | str | None] = [None] * len(records)

        def on_delivery(index: int) -> Any:
            def report(err: KafkaError | None, msg: Message) -> None:
                if err is not None:
                    reports[index] = f"record {index}: {err}"
                else:
                    reports[index] = delivery_of(msg)

            return report

        index = 0
        for batch in split_rounds(records, options.rounds):
            for r in batch:
                producer.produce(
                    topic,
                    key=r.key,
                    value=r.value,
                    headers=list(r.headers),
                    timestamp=r.timestamp,
                    on_delivery=on_delivery(index),
                )
                index += 1
            left = producer.flush(REQUEST_TIMEOUT_S + 5)
            if left:
                raise ClientError(f"{left} records still undelivered after flush")
        failures = [rep for rep in reports if not isinstance(rep, Delivery)]
        if failures:
            raise ClientError(f"produce to {topic!r} failed: {failures[:5]}")
        return [rep for rep in reports if isinstance(rep, Delivery)]

    def _consumer(self) -> Consumer:
        return Consumer({
            **self.common,
            "group.id": "strata-matrix-unused",  # required by the client; never joined
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.wait.max.ms": FETCH_MAX_WAIT_MS,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        })

    def consume(self, topic: str, end_offsets: Mapping[int, int]) -> list[ConsumedRecord]:
        consumer = self._consumer()
        try:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in end_offsets])
            reading = ReadToEnd(end_offsets)
            while reading.short():
                reading.check_deadline()
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    raise ClientError(f"consume {topic!r}: {msg.error()}")
                _, timestamp = msg.timestamp()
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                reading.add(ConsumedRecord(
                    partition=partition,
                    offset=offset,
                    key=_bytes(msg.key()),
                    value=_bytes(msg.value()),
                    headers=tuple((k, _bytes(v)) for k, v in (msg.headers() or [])),
                    timestamp=timestamp,
                ))
            return reading.records
        finally:
            consumer.close()

    def offsets_for_times(
        self, topic: str, timestamps: Mapping[int, int]
    ) -> dict[int, int | None]:
        consumer = self._consumer()
        try:
            answers = consumer.offsets_for_times(
                [TopicPartition(topic, p, ts) for p, ts in timestamps.items()],
                timeout=REQUEST_TIMEOUT_S,
            )
        except KafkaException as exc:
            raise ClientError(f"offsets_for_times({topic!r}): {exc}") from exc
        finally:
            consumer.close()
        result: dict[int, int | None] = {}
        for tp in answers:
            if tp.error is not None:
                raise ClientError(f"offsets_for_times {topic!r}[{tp.partition}]: {tp.error}")
            result[tp.partition] = tp.offset if tp.offset >= 0 else None
        return result


def delivery_of(msg: Message) -> Delivery:
    """The (partition, offset) of a delivery report whose error was None."""
    partition, offset = msg.partition(), msg.offset()
    assert partition is not None and offset is not None, "delivery report without a position"
    return Delivery(partition, offset)


def _bytes(data: str | bytes | None) -> bytes | None:
    """Keys, values and header values come back as bytes (no deserializer is configured)."""
    assert not isinstance(data, str)
    return data


def _result(future: Any, what: str) -> None:
    try:
        future.result(timeout=REQUEST_TIMEOUT_S + 5)
    except KafkaException as exc:
        raise ClientError(f"{what}: {exc}") from exc
