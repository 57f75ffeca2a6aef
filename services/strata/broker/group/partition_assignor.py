"""The server-side assignor seam (KIP-848): what an assignor is given and must answer.

Kafka's ``ConsumerGroupPartitionAssignor`` with its ``GroupSpec`` and
``SubscribedTopicDescriber``, reduced to plain values. An assignor is a pure function of:

* ``members``: member id -> ``MemberSubscription`` (the topic ids it subscribes to, its rack,
  and its current *target* assignment, the base a sticky assignor keeps what it can of);
* ``topics``: topic id -> ``TopicMetadata`` of every subscribed topic that exists, with the
  racks of each partition's replicas when the broker knows them.

It answers member id -> ``Assignment`` for every member (empty for a member with nothing),
giving each partition of a subscribed topic to exactly one member subscribed to it. Assignors
are looked up by Kafka's names (``uniform``, ``range``) as ``group.consumer.assignors`` lists
them; the first is the default (``group.remote.assignor`` overrides it).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from strata.broker.group.consumer_group_member import Assignment


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic as the group sees it: id, name, partition count, and per partition the racks
    of its replicas (empty: unknown; Kafka's ``partitionMetadata``)."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int
    partition_racks: tuple[frozenset[str], ...] = ()

    def racks(self, index: int) -> frozenset[str]:
        racks = self.partition_racks
        return racks[index] if index < len(racks) else frozenset()


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What an assignor knows of one member."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    rack_id: str | None = None
    assigned: Assignment = field(default_factory=dict)


class PartitionAssignor(Protocol):
    """A server-side assignor (see the module docstring)."""

    @property
    def name(self) -> str: ...

    def assign(self, members: Mapping[str, MemberSubscription],
               topics: Mapping[uuid.UUID, TopicMetadata]) -> dict[str, Assignment]: ...


class PartitionAssignorError(Exception):
    """An assignor could not assign (Kafka's ``PartitionAssignorException``)."""


def rack_matches(member: MemberSubscription, topic: TopicMetadata, index: int) -> bool:
    """Whether a replica of the partition is on the member's rack (False when either is
    unknown)."""
    return member.rack_id is not None and member.rack_id in topic.racks(index)


def rack_aware(members: Mapping[str, MemberSubscription],
               topics: Mapping[uuid.UUID, TopicMetadata]) -> bool:
    """Whether racks can matter: some member has a rack and some partition's racks are known
    (with every replica on every rack, nothing to prefer either)."""
    racks = {m.rack_id for m in members.values() if m.rack_id is not None}
    if not racks:
        return False
    return any(r and not racks <= r for t in topics.values() for r in t.partition_racks)


def sorted_partitions(topics: Mapping[uuid.UUID, TopicMetadata],
                      topic_ids: Iterable[uuid.UUID]) -> list[tuple[uuid.UUID, int]]:
    """Every partition of ``topic_ids`` that exists, by topic name then index."""
    present = sorted((topics[t] for t in set(topic_ids) if t in topics), key=lambda m: m.name)
    return [(m.topic_id, p) for m in present for p in range(m.num_partitions)]
