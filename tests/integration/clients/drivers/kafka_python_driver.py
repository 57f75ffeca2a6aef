"""kafka-python driver.

kafka-python infers the broker's version from the advertised ApiVersions ranges (Metadata max
< 4 would make it send old magic 0/1 messages) and enables idempotence by default; the driver
sets ``enable_idempotence`` explicitly either way. Its partitioner is Java's (murmur2 of the
key). Importing it emits a ``DeprecationWarning`` that the suite's ``filterwarnings = error``
would turn into a collection error, hence the guarded import.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

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
from .java_style import client_settings, found_offsets, take_polled

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaError



class KafkaPythonDriver:
    name = "kafka-python"

    def __init__(self, bootstrap: str) -> None:
        self.common = {**client_settings(bootstrap, self.name),
                       "reconnect_backoff_ms": 50, "reconnect_backoff_max_ms": 500}

    def _admin(self) -> Any:
        return KafkaAdminClient(**self.common)

    def create_topic(self, topic: str, partitions: int) -> None:
        admin = self._admin()
        try:
            admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}},
                                timeout_ms=REQUEST_TIMEOUT_MS)
        except KafkaError as exc:
            raise ClientError(f"create_topics({topic!r}): {exc!r}") from exc
        finally:
            admin.close()

    def partition_count(self, topic: str) -> int | None:
        admin = self._admin()
        try:
            if topic not in admin.list_topics():
                return None
            (described,) = admin.describe_topics([topic])
        finally:
            admin.close()
        if described["error_code"] != 0:
            raise ClientError(f"describe_topics({topic!r}): {described}")
        return len(described["partitions"])

    def delete_topic(self, topic: str) -> None:
        admin = self._admin()
        try:
            admin.delete_topics([topic], timeout_ms=REQUEST_TIMEOUT_MS)
        except KafkaError as exc:
            raise ClientError(f"delete_topics({topic!r}): {exc!r}") from exc
        finally:
            admin.close()

    def produce(self, topic: str, records: Sequence[OutRecord],
                options: ProduceOptions = DEFAULT_PRODUCE) -> list[Delivery]:
        producer = KafkaProducer(
            **self.common,
            acks="all",
            compression_type=options.compression_type,
            enable_idempotence=options.idempotent,
            linger_ms=20,
            max_block_ms=REQUEST_TIMEOUT_MS,
        )
        try:
            deliveries: list[Delivery] = []
            for batch in split_rounds(records, options.rounds):
                futures = [
                    producer.send(
                        topic,
                        key=r.key,
                        value=r.value,
                        headers=list(r.headers),
                        timestamp_ms=r.timestamp,
                    )
                    for r in batch
                ]
                producer.flush(timeout=REQUEST_TIMEOUT_S + 5)
                for future in futures:
                    try:
                        metadata = future.get(timeout=REQUEST_TIMEOUT_S)
                    except KafkaError as exc:
                        raise ClientError(
                            f"produce to {topic!r}, record {len(deliveries)}: {exc!r}"
                        ) from exc
                    deliveries.append(Delivery(metadata.partition, metadata.offset))
            return deliveries
        finally:
            producer.close(timeout=5)

    def _consumer(self) -> Any:
        return KafkaConsumer(
            **self.common,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )

    def consume(self, topic: str, end_offsets: Mapping[int, int]) -> list[ConsumedRecord]:
        consumer = self._consumer()
        try:
            partitions = [TopicPartition(topic, p) for p in end_offsets]
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            reading = ReadToEnd(end_offsets)
            while reading.short():
                reading.check_deadline()
                take_polled(consumer.poll(timeout_ms=200), reading)
            return reading.records
        finally:
            consumer.close()

    def offsets_for_times(
        self, topic: str, timestamps: Mapping[int, int]
    ) -> dict[int, int | None]:
        consumer = self._consumer()
        try:
            answers = consumer.offsets_for_times(
                {TopicPartition(topic, p): ts for p, ts in timestamps.items()}
            )
        except KafkaError as exc:
            raise ClientError(f"offsets_for_times({topic!r}): {exc!r}") from exc
        finally:
            consumer.close()
        return found_offsets(answers)
