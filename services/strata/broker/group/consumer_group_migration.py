"""Online migration between a classic group and a consumer group (KIP-848's upgrade path).

Kafka's ``ConsumerGroupMigrationPolicy``, ``ConsumerGroup.fromClassicGroup`` and
``ClassicGroup.fromConsumerGroup``, pure (the clock is given, no I/O):

* ``MigrationPolicy``: ``group.consumer.migration.policy`` — BIDIRECTIONAL (the default),
  UPGRADE, DOWNGRADE, DISABLED, parsed case-insensitively; any other value is a config error;
* ``from_classic_group``: the consumer group a live classic group becomes when a member joins
  it with ConsumerGroupHeartbeat. The group epoch and the assignment epoch are the classic
  generation; every classic member becomes a member *using the classic protocol* (its
  ``ClassicMemberMetadata``), STABLE at that epoch, its subscription read from its JoinGroup
  metadata and its assigned partitions (and target) from its last SyncGroup assignment;
* ``to_classic_group``: the classic group a consumer group becomes when its last member of
  the consumer protocol leaves while classic members remain: Stable at generation = the group
  epoch, the members with their JoinGroup protocols, each assignment its target (the caller
  then starts a rebalance, so the members rejoin at once).

Both keep no offsets; the coordinator moves the offsets holder (``consumer_group_coordinator``).
``ConsumerProtocolError`` when a member's embedded protocol bytes do not parse, and
``IllegalGroupStateError`` when the classic assignments give a partition twice: the group is
then not converted.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping

from strata.broker.group.classic_group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from strata.broker.group.consumer_group import ConsumerGroup
from strata.broker.group.consumer_group_member import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
    assignment_of,
    pairs_of,
)
from strata.broker.group.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    version_of,
)
from strata.broker.group.member import GroupMember
from strata.broker.group.partition_assignor import TopicMetadata
from strata.storage.clock import Clock


class MigrationPolicy(enum.Enum):
    """Kafka's ``ConsumerGroupMigrationPolicy`` (``group.consumer.migration.policy``)."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def parse(cls, value: str) -> MigrationPolicy:
        """Case-insensitive, as Kafka's; ValueError for anything else."""
        try:
            return cls(value.strip().lower())
        except ValueError:
            names = ", ".join(p.name for p in cls)
            raise ValueError(f"group.consumer.migration.policy {value!r} is not one of "
                             f"{names}") from None

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)

    def __str__(self) -> str:
        return self.name


def from_classic_group(classic: ClassicGroup, topics: Mapping[str, TopicMetadata]
                       ) -> ConsumerGroup:
    """The consumer group ``classic`` becomes (see the module docstring)."""
    group = ConsumerGroup(classic.group_id)
    generation = classic.generation_id
    group.group_epoch = group.assignment_epoch = generation
    protocol = classic.protocol_name
    for member in classic.members.values():
        name = protocol if protocol is not None else member.protocol_names[0]
        subscription = decode_subscription(member.metadata(name))
        assigned = assignment_of(
            (topics[t].topic_id, p) for t, p in decode_assignment(member.assignment).partitions
            if t in topics and 0 <= p < topics[t].num_partitions) if member.assignment else {}
        group.update_member(ConsumerGroupMember(
            member.member_id, instance_id=member.group_instance_id,
            rack_id=subscription.rack_id or None, client_id=member.client_id,
            client_host=member.client_host, rebalance_timeout_ms=member.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            state=MemberState.STABLE, member_epoch=generation, previous_member_epoch=generation,
            assigned_partitions=assigned,
            classic=ClassicMemberMetadata(member.session_timeout_ms, member.protocols)))
        group.target_assignment[member.member_id] = assigned
    names = group.subscribed_topic_names(topics)
    group.subscription_metadata = {n: topics[n] for n in names if n in topics}
    return group


def to_classic_group(group: ConsumerGroup, clock: Clock,
                     topic_names: Mapping[uuid.UUID, str]) -> tuple[ClassicGroup,
                                                                     dict[str, bytes]]:
    """The classic group ``group`` (every member classic) becomes, and each member's
    assignment bytes (see the module docstring)."""
    members: list[GroupMember] = []
    for member in group.members.values():
        classic = member.classic
        if classic is None:
            raise ValueError(f"member {member.member_id} does not use the classic protocol")
        members.append(GroupMember(
            member.member_id, member.instance_id, member.client_id, member.client_host,
            member.rebalance_timeout_ms, classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
            classic.supported_protocols))
    converted = ClassicGroup.load(
        group.group_id, clock, protocol_type=CONSUMER_PROTOCOL_TYPE,
        generation_id=group.group_epoch, protocol_name=None, leader_id=None,
        current_state_timestamp=clock.milliseconds(), members=members)
    converted.protocol_name = converted.select_protocol()
    assignments: dict[str, bytes] = {}
    for classic_member in converted.members.values():
        target = group.target_assignment.get(classic_member.member_id, {})
        metadata = classic_member.metadata(converted.protocol_name)
        classic_member.assignment = assignments[classic_member.member_id] = encode_assignment(
            named_pairs(target, topic_names), version_of(metadata))
    return converted, assignments


def named_pairs(assignment: Assignment, topic_names: Mapping[uuid.UUID, str]
                ) -> list[tuple[str, int]]:
    """``(topic name, partition)`` pairs of an assignment (topics no longer known dropped)."""
    return [(topic_names[t], p) for t, p in sorted(pairs_of(assignment), key=str)
            if t in topic_names]

