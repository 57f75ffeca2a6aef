"""``ClassicGroup``: one classic consumer group — members, generation, leader, offsets.

Kafka's ``GroupMetadata``: the data of one group and the small operations on it that keep its
invariants (its members are ``group_member.GroupMember``). The protocol around it (who may join
when, what a heartbeat answers, when a rebalance completes) is ``group_membership``;
persistence is ``group_metadata_manager``. Invariants:

* ``state`` moves only through ``transition_to``, which enforces ``group_state``'s table and
  stamps ``current_state_timestamp`` (wall-clock ms, written to ``__consumer_offsets``; offsets
  of an Empty group expire ``offsets.retention.minutes`` after it).
* ``members`` keeps join order; the leader is a member (or None when there are none); after the
  leader leaves, the first remaining member leads. ``protocol_type`` is set by the first member
  and every member speaks it; ``supported_protocols`` counts, per protocol name, the members
  that support it, so the selectable protocols are those every member supports.
* ``num_members_awaiting_join`` counts members holding a parked JoinGroup (``awaiting_join``);
  a join completes when it equals the member count and no member is pending (KIP-394).
* ``static_members`` maps ``group.instance.id`` -> the member id currently holding it (KIP-345).
* deadlines are monotonic milliseconds of the injected clock: a member's session
  (``heartbeat_deadline``), a pending member's (``pending_members``), the delayed join
  (``join_deadline``; ``initial_join`` while it is the initial delay of an Empty group) and the
  pending-sync check (``sync_deadline``, for generation ``sync_generation``).
  ``group_membership`` sets and expires them.
* ``offsets`` are the committed offsets, as last written to (or replayed from) the log.

Pure (no I/O; member ids are random UUIDs). Mutated only by the coordinator on the event loop.
"""

from __future__ import annotations

import struct
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from strata.broker.group.member import (
    NO_GENERATION,
    GroupMember,
    JoinCallback,
    JoinedMember,
    JoinGroupResult,
    MemberSummary,
    Protocols,
    SyncCallback,
    SyncGroupResult,
)
from strata.broker.group.state import GroupState, IllegalGroupTransition, can_transition
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import Clock

CONSUMER_PROTOCOL_TYPE: Final = "consumer"

TopicPartition = tuple[str, int]


# ---------------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset. ``expire_timestamp`` only for OffsetCommit v2-v4 with a retention.
    ``record_offset``: where its commit record is in ``__consumer_offsets`` (-1 unknown), what
    decides between a transactional commit and a plain one (Kafka's
    ``CommitRecordMetadataAndOffset.appendedBatchOffset``); not part of its value."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None
    record_offset: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """What DescribeGroups says of a group."""

    state: str
    protocol_type: str
    protocol_name: str
    members: tuple[MemberSummary, ...]


DEAD_GROUP_SUMMARY: Final = GroupSummary(str(GroupState.DEAD), "", "", ())


# ----------------------------------------------------------------------------------- group


@dataclass(slots=True)
class InitialJoin:
    """The initial delayed join of an Empty group (``group.initial.rebalance.delay.ms``): it
    waits ``delay_ms``, then again while new members keep arriving, up to the rebalance
    timeout (``remaining_ms``)."""

    configured_delay_ms: int
    delay_ms: int
    remaining_ms: int


class ClassicGroup:
    """One group. Build with ``ClassicGroup(group_id, clock)`` or ``ClassicGroup.load``."""

    def __init__(self, group_id: str, clock: Clock,
                 state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.clock = clock
        self.state = state
        self.current_state_timestamp: int | None = clock.milliseconds()
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, GroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: dict[str, float] = {}
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.num_members_awaiting_join = 0
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None
        self.join_deadline: float | None = None
        self.initial_join: InitialJoin | None = None
        self.sync_deadline: float | None = None
        self.sync_generation = NO_GENERATION
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}

    def __repr__(self) -> str:
        return (f"ClassicGroup({self.group_id!r}, {self.state}, generation={self.generation_id}, "
                f"members={len(self.members)})")

    @classmethod
    def load(cls, group_id: str, clock: Clock, *, protocol_type: str, generation_id: int,
             protocol_name: str | None, leader_id: str | None,
             current_state_timestamp: int | None,
             members: Iterable[GroupMember]) -> ClassicGroup:
        """A group as its last metadata record describes it: Stable with members, else Empty
        (Kafka's ``GroupMetadata.loadGroup``)."""
        loaded = list(members)
        group = cls(group_id, clock, GroupState.STABLE if loaded else GroupState.EMPTY)
        group.current_state_timestamp = current_state_timestamp
        group.generation_id = generation_id
        group.protocol_type = protocol_type or None
        group.protocol_name = protocol_name
        group.leader_id = leader_id
        for member in loaded:
            group.members[member.member_id] = member
            group.supported_protocols.update(member.protocol_names)
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    # ------------------------------------------------------------------ state
    def transition_to(self, target: GroupState) -> None:
        if not can_transition(self.state, target):
            raise IllegalGroupTransition(
                f"group {self.group_id} cannot move from {self.state} to {target}")
        self.state = target
        self.current_state_timestamp = self.clock.milliseconds()

    @property
    def can_rebalance(self) -> bool:
        return can_transition(self.state, GroupState.PREPARING_REBALANCE)

    def deadline_after(self, ms: float) -> float:
        """The monotonic time ``ms`` from now."""
        return self.clock.monotonic_ms() + ms

    # ---------------------------------------------------------------- members
    @property
    def size(self) -> int:
        return len(self.members)

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> GroupMember:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """Kafka's format: ``<group.instance.id or client.id>-<uuid>``."""
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    def add(self, member: GroupMember, join_callback: JoinCallback | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        member.awaiting_join = join_callback
        if join_callback is not None:
            self.num_members_awaiting_join += 1
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> GroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names)
            self.supported_protocols += Counter()  # drop counts that reached zero
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            instance = member.group_instance_id
            if instance is not None and self.static_members.get(instance) == member_id:
                del self.static_members[instance]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(self, member: GroupMember, protocols: Protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int, join_callback: JoinCallback | None) -> None:
        """New metadata and timeouts for a rejoining member, parking its JoinGroup."""
        self.supported_protocols.subtract(member.protocol_names)
        member.protocols = protocols
        self.supported_protocols.update(member.protocol_names)
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        displaced = member.awaiting_join
        if join_callback is not None and displaced is None:
            self.num_members_awaiting_join += 1
        elif join_callback is None and displaced is not None:
            self.num_members_awaiting_join -= 1
        member.awaiting_join = join_callback
        if displaced is not None and join_callback is not None:
            # A second JoinGroup of the same member (a retry on a new connection): the older
            # request is answered so no connection waits forever; the client rejoins.
            displaced(JoinGroupResult(ErrorCode.rebalance_in_progress, member.member_id))

    def maybe_invoke_join_callback(self, member: GroupMember, result: JoinGroupResult) -> bool:
        callback = member.awaiting_join
        if callback is None:
            return False
        member.awaiting_join = None
        self.num_members_awaiting_join -= 1
        callback(result)
        return True

    def set_sync_callback(self, member: GroupMember, callback: SyncCallback) -> None:
        displaced = member.awaiting_sync
        member.awaiting_sync = callback
        if displaced is not None:
            displaced(SyncGroupResult(ErrorCode.rebalance_in_progress))

    def maybe_invoke_sync_callback(self, member: GroupMember, result: SyncGroupResult) -> bool:
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        callback(result)
        return True

    @property
    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout among the members: how long a join may wait."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------- pending members (KIP-394)
    def add_pending_member(self, member_id: str, deadline: float) -> None:
        self.pending_members[member_id] = deadline

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    # ------------------------------------------------------- static members (KIP-345)
    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str) -> GroupMember:
        """Move the member holding ``group_instance_id`` to ``new_member_id``. A parked
        JoinGroup or SyncGroup of the old id is answered FENCED_INSTANCE_ID at once."""
        member = self.members.pop(old_member_id)
        self.maybe_invoke_join_callback(
            member, JoinGroupResult(ErrorCode.fenced_instance_id, old_member_id))
        self.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    # --------------------------------------------------------------- protocols
    def supports_protocols(self, protocol_type: str, names: Sequence[str]) -> bool:
        """Whether a member speaking ``protocol_type`` with ``names`` may join: an Empty group
        takes any non-empty type and protocol list; otherwise the type must match and one of
        the names must be supported by every current member."""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        count = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == count for name in names)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those all members support;
        the most votes wins (ties: the first voted, in join order)."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for group {self.group_id} without members")
        count = len(self.members)
        candidates = {name for name, n in self.supported_protocols.items() if n == count}
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return votes.most_common(1)[0][0]

    # --------------------------------------------------------------- rebalance
    @property
    def has_all_members_joined(self) -> bool:
        return (len(self.members) == self.num_members_awaiting_join
                and not self.pending_members)

    def not_yet_rejoined_members(self) -> list[GroupMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else promote any member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def init_next_generation(self) -> None:
        """Bump the generation: CompletingRebalance with a selected protocol, or Empty."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> tuple[JoinedMember, ...]:
        """Every member with its metadata for the selected protocol (the leader's input)."""
        protocol = self.protocol_name
        if protocol is None:
            raise ValueError(f"group {self.group_id} has no selected protocol")
        return tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(protocol))
                     for m in self.members.values())

    # ------------------------------------------------------------ subscriptions
    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics a consumer group's members subscribe to, read from their metadata for the
        selected protocol; None when unknown (not a consumer group, or unreadable metadata)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            subscribed = consumer_subscription_topics(member.metadata(self.protocol_name))
            if subscribed is None:
                return None
            topics.update(subscribed)
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # ----------------------------------------------------------------- offsets
    def has_offsets(self) -> bool:
        return bool(self.offsets)

    def remove_offsets(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        removed = []
        for tp in partitions:
            if self.offsets.pop(tp, None) is not None:
                removed.append(tp)
        return removed

    def remove_all_offsets(self) -> list[TopicPartition]:
        return self.remove_offsets(list(self.offsets))

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Offsets past ``offsets.retention.minutes`` (Kafka's rule, KIP-211):

        * a group with a protocol type, Empty: ``retention_ms`` after it became Empty (after
          the commit, for metadata without that timestamp);
        * a Stable consumer group whose subscriptions are known: offsets of topics no member
          subscribes to, ``retention_ms`` after their commit;
        * a group without a protocol type (only commits, ``assign()``): ``retention_ms`` after
          each commit;
        * any other group keeps its offsets.

        An offset committed with an explicit retention (OffsetCommit v2-v4) expires at its own
        ``expire_timestamp`` instead.
        """
        if self.protocol_type is not None and self.state is GroupState.EMPTY:
            state_ts = self.current_state_timestamp

            def base(o: OffsetAndMetadata) -> int:
                return state_ts if state_ts is not None else o.commit_timestamp
            subscribed: frozenset[str] = frozenset()
        elif (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None
              and self.state is GroupState.STABLE):
            def base(o: OffsetAndMetadata) -> int:
                return o.commit_timestamp
            subscribed = self.subscribed_topics
        elif self.protocol_type is None:
            def base(o: OffsetAndMetadata) -> int:
                return o.commit_timestamp
            subscribed = frozenset()
        else:
            return []
        expired = []
        for tp, committed in self.offsets.items():
            if tp[0] in subscribed:
                continue
            if committed.expire_timestamp is not None:
                if now_ms >= committed.expire_timestamp:
                    expired.append(tp)
            elif now_ms - base(committed) >= retention_ms:
                expired.append(tp)
        return expired

    # ------------------------------------------------------------------ describe
    def summary(self) -> GroupSummary:
        """DescribeGroups: member metadata and assignments only once Stable (Kafka's rule)."""
        stable = self.state is GroupState.STABLE
        protocol = self.protocol_name if stable else None
        return GroupSummary(str(self.state), self.protocol_type or "", protocol or "",
                            tuple(m.summary(protocol) for m in self.members.values()))


# ------------------------------------------------------------------- consumer protocol

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def consumer_subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a ``ConsumerProtocolSubscription`` (any version: they all start with
    ``version int16, topics [string]``, non-flexible); None if the bytes do not parse."""
    try:
        (version,) = _INT16.unpack_from(metadata, 0)
        if version < 0:
            return None
        (count,) = _INT32.unpack_from(metadata, 2)
        if count < 0 or count > len(metadata):
            return None
        pos = 6
        topics = []
        for _ in range(count):
            (length,) = _INT16.unpack_from(metadata, pos)
            pos += 2
            if length < 0 or pos + length > len(metadata):
                return None
            topics.append(metadata[pos:pos + length].decode("utf-8"))
            pos += length
    except (struct.error, UnicodeDecodeError):
        return None
    return topics
