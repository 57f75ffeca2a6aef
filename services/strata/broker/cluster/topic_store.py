"""``ClusterTopicStore``: the ``TopicStore`` of a broker in a cluster, on the metadata store.

Reads answer from the ``MetadataCache``'s image (a metadata cache, as Kafka's brokers keep);
writes are transactions on the store (``cluster_image`` has the key layout), each guarded by a
compare on the keys it replaces, after which the writer waits until its own image shows the
write (``MetadataCache.wait_for_revision``). Any broker may write topics: the compares make
concurrent writers safe (one wins, the other is told the topic exists or changed), and the
controller only ever rewrites partition leadership.

A new topic's partitions are placed by ``replica_placement`` over the live brokers (or as the
request assigned them); each starts with ISR = its replicas and its first replica as leader,
at the leader's current broker epoch.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from strata.broker.cluster import image as ci
from strata.broker.cluster.image import (
    ClusterImage,
    PartitionRegistration,
    TopicRegistration,
)
from strata.broker.cluster.metadata_cache import MetadataCache
from strata.broker.cluster.replica_placement import PlacementBroker, assign_replicas
from strata.broker.topic_store import TopicExistsError, TopicRecord, UnknownTopicError
from strata.metadata.store import Compare, Delete, MetadataStore, Op, Put


class TopicChangedError(Exception):
    """A write lost a race with another writer of the same topic; the caller may retry."""


def topic_record(image: ClusterImage, topic: TopicRegistration) -> TopicRecord:
    partitions = image.topic_partitions(topic.name)
    return TopicRecord(topic.name, topic.topic_id, topic.replication_factor,
                       tuple(p.leader_epoch for _, p in partitions), topic.configs)


class ClusterTopicStore:
    def __init__(self, store: MetadataStore, cache: MetadataCache,
                 *, rng: Callable[[int], int] | None = None) -> None:
        self.store = store
        self.cache = cache
        self.existed = True
        self._rng = rng or (lambda n: random.randrange(n))
        self._records_of: tuple[int, Mapping[str, TopicRecord]] = (-1, {})

    # ---------------------------------------------------------------- reads
    def topics(self) -> Mapping[str, TopicRecord]:
        image = self.cache.image
        revision, records = self._records_of
        if revision != image.revision:
            records = MappingProxyType({name: topic_record(image, t)
                                        for name, t in image.topics.items()})
            self._records_of = (image.revision, records)
        return records

    def get(self, name: str) -> TopicRecord | None:
        return self.topics().get(name)

    def broker_configs(self, scope: str) -> Mapping[str, str]:
        return self.cache.image.broker_configs.get(scope, MappingProxyType({}))

    def all_broker_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self.cache.image.broker_configs

    # ---------------------------------------------------------------- writes
    def place(self, partitions: int, replication_factor: int, *,
              first_partition: int = 0) -> list[tuple[int, ...]]:
        """Replica lists for new partitions over the live brokers (``PlacementError``)."""
        brokers = [PlacementBroker(b.node_id, b.rack) for b in self.cache.image.brokers.values()]
        start = self._rng(len(brokers)) if brokers else 0
        return assign_replicas(brokers, partitions, replication_factor, start_index=start,
                               first_partition=first_partition)

    async def create_topic(self, record: TopicRecord,
                           assignment: Sequence[Sequence[int]] | None = None) -> None:
        image = self.cache.image
        if assignment is None:
            assignment = self.place(record.partitions, record.replication_factor)
        topic = TopicRegistration(record.name, record.topic_id, record.replication_factor,
                                  dict(record.configs))
        ops: list[Op] = [Put(ci.topic_key(record.name), topic.encode())]
        for index, replicas in enumerate(assignment):
            ops.append(Put(ci.partition_key(record.name, index),
                           self._new_partition(image, record, replicas).encode()))
        compares = [Compare(ci.topic_key(record.name), 0)]
        result = await self.store.transaction(compares, ops)
        if not result.succeeded:  # another broker created it: let our image catch up first
            await self.cache.wait_for_revision(result.revision)
            raise TopicExistsError(record.name)
        await self.cache.wait_for_revision(result.revision)

    @staticmethod
    def _new_partition(image: ClusterImage, record: TopicRecord,
                       replicas: Sequence[int]) -> PartitionRegistration:
        leader = replicas[0]
        broker = image.brokers.get(leader)
        return PartitionRegistration(record.topic_id, tuple(replicas), tuple(replicas), leader,
                                     leader_broker_epoch=broker.epoch if broker else 0)

    async def delete_topic(self, name: str) -> TopicRecord:
        image = self.cache.image
        topic = image.topics.get(name)
        if topic is None:
            raise UnknownTopicError(name)
        record = topic_record(image, topic)
        entries, _ = await self.store.list(ci.partitions_prefix(name))
        ops: list[Op] = [Delete(ci.topic_key(name))]
        ops += [Delete(e.key) for e in entries]
        result = await self.store.transaction(
            [Compare(ci.topic_key(name), image.topic_versions[name])], ops)
        if not result.succeeded:
            raise UnknownTopicError(name)
        await self.cache.wait_for_revision(result.revision)
        return record

    async def set_partition_count(self, name: str, count: int,
                                  assignment: Sequence[Sequence[int]] | None = None
                                  ) -> TopicRecord:
        image = self.cache.image
        topic = image.topics.get(name)
        if topic is None:
            raise UnknownTopicError(name)
        current = image.partition_count(name)
        if count < current:
            raise ValueError(f"{name} has {current} partitions; cannot shrink")
        record = topic_record(image, topic)
        if assignment is None:
            rf = len(image.partitions[(name, 0)].replicas) if current else \
                topic.replication_factor
            assignment = self.place(count - current, rf, first_partition=current)
        ops: list[Op] = [Put(ci.topic_key(name), topic.encode())]  # bumps its version: a fence
        for offset, replicas in enumerate(assignment):
            ops.append(Put(ci.partition_key(name, current + offset),
                           self._new_partition(image, record, replicas).encode()))
        await self._write(name, image, ops)
        return self._require(name)

    async def set_leader_epoch(self, name: str, partition: int, epoch: int) -> TopicRecord:
        raise NotImplementedError("leader epochs are the controller's in a cluster")

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicRecord:
        image = self.cache.image
        topic = image.topics.get(name)
        if topic is None:
            raise UnknownTopicError(name)
        updated = TopicRegistration(name, topic.topic_id, topic.replication_factor,
                                    dict(configs))
        await self._write(name, image, [Put(ci.topic_key(name), updated.encode())])
        return self._require(name)

    async def set_broker_configs(self, scope: str, configs: Mapping[str, str]) -> None:
        key = ci.broker_configs_key(scope)
        if configs:
            revision = await self.store.put(key, ci.encode_configs(configs))
        else:
            await self.store.delete(key)
            _, revision = await self.store.list(key)
        await self.cache.wait_for_revision(revision)

    async def _write(self, name: str, image: ClusterImage, ops: list[Op]) -> None:
        result = await self.store.transaction(
            [Compare(ci.topic_key(name), image.topic_versions[name])], ops)
        if not result.succeeded:
            raise TopicChangedError(f"topic {name} changed concurrently; retry")
        await self.cache.wait_for_revision(result.revision)

    def _require(self, name: str) -> TopicRecord:
        record = self.get(name)
        if record is None:
            raise UnknownTopicError(name)
        return record
