"""``ConsumerGroupMember``: one member of a consumer group (KIP-848), an immutable value.

Kafka's ``ConsumerGroupMember``. A member is replaced, never mutated: the heartbeat logic
(``consumer_group_membership``) builds the next value and hands it to
``ConsumerGroup.update_member``, which keeps the group's partition-ownership invariant.

Fields:

* identity: ``member_id`` (chosen by the client from ConsumerGroupHeartbeat v1),
  ``instance_id`` (``group.instance.id``: a static member), ``rack_id``, client id and host;
* subscription: ``subscribed_topic_names`` and/or ``subscribed_topic_regex`` (a full match
  over topic names, evaluated by the broker), ``server_assignor`` (None: the group's
  default), ``rebalance_timeout_ms`` (how long it may take to revoke partitions);
* reconciliation (``current_assignment_builder``): ``state``, ``member_epoch`` and
  ``previous_member_epoch`` (the epoch before the last change, so that a member whose last
  answer was lost is not fenced), ``assigned_partitions`` (what it may use now) and
  ``partitions_pending_revocation`` (what it must give up before it gets anything new);
* ``classic``: set for a member that speaks the classic protocol (JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup) inside a consumer group — online migration — with its session
  timeout and its JoinGroup protocols (Kafka's ``ClassicMemberMetadata``); None for a member
  of the consumer protocol.

An assignment is a mapping topic id -> frozenset of partition indexes, with no empty sets.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

Assignment = Mapping[uuid.UUID, frozenset[int]]
"""Topic id -> partition indexes (never an empty set)."""

EMPTY_ASSIGNMENT: Final[Assignment] = {}

JOIN_GROUP_MEMBER_EPOCH: Final = 0
"""ConsumerGroupHeartbeat ``member_epoch`` of a member joining (or rejoining)."""
LEAVE_GROUP_MEMBER_EPOCH: Final = -1
"""``member_epoch`` of a member leaving the group."""
LEAVE_GROUP_STATIC_MEMBER_EPOCH: Final = -2
"""``member_epoch`` of a static member leaving for now: it keeps its place and assignment
until its session times out or an instance with the same ``group.instance.id`` rejoins."""


class MemberState(enum.Enum):
    """Where a member is in its reconciliation (Kafka's ``MemberState``).

    STABLE: it has every partition of its target assignment it may have, at the target epoch;
    UNREVOKED_PARTITIONS: it must first revoke ``partitions_pending_revocation`` (acknowledged
    by leaving them out of the owned partitions of a later heartbeat); it stays at its epoch;
    UNRELEASED_PARTITIONS: it is at the target epoch but some partitions of its target are still
    held by other members; they are given to it once released.
    """

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a classic member brought in its JoinGroup (Kafka's ``ClassicMemberMetadata``)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]
    """(name, ``ConsumerProtocolSubscription`` bytes) in the member's order of preference."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """See the module docstring."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def owned(self) -> Iterable[tuple[uuid.UUID, int]]:
        """Every partition this member holds: assigned and pending revocation."""
        for assignment in (self.assigned_partitions, self.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for index in partitions:
                    yield topic_id, index


def assignment_of(pairs: Iterable[tuple[uuid.UUID, int]]) -> dict[uuid.UUID, frozenset[int]]:
    """An ``Assignment`` from ``(topic id, partition)`` pairs."""
    by_topic: dict[uuid.UUID, set[int]] = {}
    for topic_id, index in pairs:
        by_topic.setdefault(topic_id, set()).add(index)
    return {t: frozenset(p) for t, p in by_topic.items() if p}


def pairs_of(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    """The ``(topic id, partition)`` pairs of an assignment."""
    return {(t, p) for t, parts in assignment.items() for p in parts}
