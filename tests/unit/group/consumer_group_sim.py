"""A test double of a KIP-848 consumer: heartbeats like librdkafka, holds what it was given."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from strata.broker.group.consumer_group import ConsumerGroup
from strata.broker.group.consumer_group_member import pairs_of
from strata.broker.group.consumer_group_membership import (
    ConsumerGroupMembership,
    HeartbeatRequest,
    HeartbeatResult,
)
from strata.broker.group.partition_assignor import TopicMetadata
from strata.protocol.error_codes import ErrorCode

TOPIC = TopicMetadata(uuid.UUID(int=7 << 70), "t", 12)
TOPICS = {TOPIC.name: TOPIC}


@dataclass
class Client:
    """One consumer: its member id, epoch, and the partitions it consumes now. Like a real
    client it applies an answer's assignment later (here: when it sends its next heartbeat,
    as if its revocation callback ran in between), and reports what it then holds."""

    member_id: str
    instance_id: str | None = None
    epoch: int = 0
    held: set[tuple[uuid.UUID, int]] = field(default_factory=set)
    joined: bool = False
    pending: set[tuple[uuid.UUID, int]] | None = None

    def heartbeat(self, membership: ConsumerGroupMembership, group: ConsumerGroup,
                  now: float, topics: dict[str, TopicMetadata] = TOPICS,
                  subscription: tuple[str, ...] = ("t",)) -> HeartbeatResult:
        first = not self.joined
        if self.pending is not None:
            self.held, self.pending = self.pending, None
        request = HeartbeatRequest(
            self.member_id, self.epoch, instance_id=self.instance_id,
            rebalance_timeout_ms=30_000 if first else -1,
            subscribed_topic_names=subscription if first else None,
            owned=None if first else sorted(self.held))
        result = membership.heartbeat(group, request, now, topics)
        if result.error == ErrorCode.none:
            self.joined = True
            self.epoch = result.member_epoch
            if result.assignment is not None:
                self.pending = pairs_of(result.assignment)
        return result

    def leave(self, membership: ConsumerGroupMembership, group: ConsumerGroup,
              epoch: int = -1) -> HeartbeatResult:
        result = membership.heartbeat(group, HeartbeatRequest(
            self.member_id, epoch, instance_id=self.instance_id), 0, TOPICS)
        self.held = set()
        self.pending = None
        self.joined = False
        self.epoch = 0
        return result

    def stop(self) -> None:
        """Fenced or crashed: it drops everything and may join again as a new member."""
        self.held, self.pending, self.joined, self.epoch = set(), None, False, 0

    @property
    def latest(self) -> set[tuple[uuid.UUID, int]]:
        """What the last answer assigned (held from its next heartbeat on)."""
        return self.pending if self.pending is not None else self.held
