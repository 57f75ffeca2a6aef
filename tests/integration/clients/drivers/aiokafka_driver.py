"""aiokafka driver: the asyncio client behind a synchronous facade (one event loop per call).

aiokafka's admin client returns responses without raising on per-topic error codes, so the
driver checks them itself (``_raise_on_errors``). Its partitioner is Java's (murmur2 of the key).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from ..model import (
    CONSUME_TIMEOUT_S,
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

T = TypeVar("T")


class AiokafkaDriver:
    name = "aiokafka"

    def __init__(self, bootstrap: str) -> None:
        self.common = client_settings(bootstrap, self.name)

    def _run(self, what: str, work: Callable[[], Awaitable[T]], timeout: float) -> T:
        async def bounded() -> T:
            return await asyncio.wait_for(work(), timeout)

        try:
            return asyncio.run(bounded())
        except KafkaError as exc:
            raise ClientError(f"{what}: {exc!r}") from exc
        except TimeoutError as exc:
            raise ClientError(f"{what}: no result after {timeout:.0f}s") from exc

    async def _with_admin(self, use: Callable[[AIOKafkaAdminClient], Awaitable[T]]) -> T:
        admin = AIOKafkaAdminClient(**self.common)
        await admin.start()
        try:
            return await use(admin)
        finally:
            await admin.close()

    def create_topic(self, topic: str, partitions: int) -> None:
        async def work() -> None:
            response = await self._with_admin(lambda admin: admin.create_topics(
                [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                timeout_ms=REQUEST_TIMEOUT_MS,
            ))
            _raise_on_errors(f"create_topics({topic!r})", response.to_object())

        self._run(f"create_topics({topic!r})", work, REQUEST_TIMEOUT_S + 5)

    def partition_count(self, topic: str) -> int | None:
        async def work() -> int | None:
            async def describe(admin: AIOKafkaAdminClient) -> int | None:
                if topic not in await admin.list_topics():
                    return None
                (described,) = await admin.describe_topics([topic])
                if described["error_code"] != 0:
                    raise ClientError(f"describe_topics({topic!r}): {described}")
                return len(described["partitions"])

            return await self._with_admin(describe)

        return self._run(f"metadata({topic!r})", work, REQUEST_TIMEOUT_S + 5)

    def delete_topic(self, topic: str) -> None:
        async def work() -> None:
            response = await self._with_admin(
                lambda admin: admin.delete_topics([topic], timeout_ms=REQUEST_TIMEOUT_MS)
            )
            _raise_on_errors(f"delete_topics({topic!r})", response.to_object())

        self._run(f"delete_topics({topic!r})", work, REQUEST_TIMEOUT_S + 5)

    def produce(self, topic: str, records: Sequence[OutRecord],
                options: ProduceOptions = DEFAULT_PRODUCE) -> list[Delivery]:
        async def work() -> list[Delivery]:
            producer = AIOKafkaProducer(
                **self.common,
                acks="all",
                compression_type=options.compression_type,
                enable_idempotence=options.idempotent,
                linger_ms=20,
            )
            await producer.start()
            try:
                deliveries: list[Delivery] = []
                for batch in split_rounds(records, options.rounds):
                    futures = [
                        await producer.send(
                            topic,
                            key=r.key,
                            value=r.value,
                            headers=list(r.headers),
                            timestamp_ms=r.timestamp,
                        )
                        for r in batch
                    ]
                    results = await asyncio.gather(*futures)
                    deliveries.extend(Delivery(m.partition, m.offset) for m in results)
                return deliveries
            finally:
                await producer.stop()

        return self._run(f"produce to {topic!r}", work, REQUEST_TIMEOUT_S + 5)

    def _consumer(self) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            **self.common,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        )

    def consume(self, topic: str, end_offsets: Mapping[int, int]) -> list[ConsumedRecord]:
        reading = ReadToEnd(end_offsets)

        async def work() -> list[ConsumedRecord]:
            consumer = self._consumer()
            await consumer.start()
            try:
                partitions = [TopicPartition(topic, p) for p in end_offsets]
                consumer.assign(partitions)
                await consumer.seek_to_beginning(*partitions)
                while reading.short():
                    take_polled(await consumer.getmany(timeout_ms=200), reading)
                return reading.records
            finally:
                await consumer.stop()

        try:
            return self._run(f"consume {topic!r}", work, CONSUME_TIMEOUT_S)
        except ClientError as exc:
            raise ClientError(f"{exc}; {reading.progress()}") from exc

    def offsets_for_times(
        self, topic: str, timestamps: Mapping[int, int]
    ) -> dict[int, int | None]:
        async def work() -> dict[int, int | None]:
            consumer = self._consumer()
            await consumer.start()
            try:
                answers = await consumer.offsets_for_times(
                    {TopicPartition(topic, p): ts for p, ts in timestamps.items()}
                )
            finally:
                await consumer.stop()
            return found_offsets(answers)

        return self._run(f"offsets_for_times({topic!r})", work, REQUEST_TIMEOUT_S + 5)


def _raise_on_errors(what: str, response: Any) -> None:
    """Raise if any ``error_code`` anywhere in a decoded admin response is not 0."""
    errors: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("error_code", 0) != 0:
                errors.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list | tuple):
            for value in node:
                walk(value)

    walk(response)
    if errors:
        raise ClientError(f"{what}: {errors}")
