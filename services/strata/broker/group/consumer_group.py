"""``ConsumerGroup``: one group of the consumer protocol (KIP-848) — epochs, members, target.

Kafka's ``ConsumerGroup``, pure (no I/O; deadlines are numbers on the caller's monotonic
clock). Owns:

* the *group epoch*, bumped whenever what the assignment depends on changes (a member joins,
  leaves or changes its subscription; a subscribed topic appears, disappears or grows);
* the *target assignment* (member id -> ``Assignment``) and its *assignment epoch*: the group
  epoch it was computed for. The group is ASSIGNING while ``group_epoch > assignment_epoch``;
* the members (``ConsumerGroupMember`` values, replaced by ``update_member``) and the static
  members (``group.instance.id`` -> member id);
* the *partition epochs*: which member holds each partition (assigned or pending revocation)
  and at which member epoch. Invariant, checked by ``update_member`` (it raises
  ``IllegalGroupStateError`` rather than break it): no partition is held by two members;
* the subscription metadata (topic name -> ``TopicMetadata`` of every subscribed topic that
  exists), compared at each heartbeat with the broker's topics to see a topic change;
* the timers: each member's session deadline and, while a member of the consumer protocol
  must revoke partitions, its rebalance deadline (at the member epoch it was set for); a
  classic member (online migration) has instead a *join* deadline (told to rejoin, it must
  send JoinGroup within its rebalance timeout) and a *sync* deadline (after its JoinGroup, it
  must send SyncGroup within its rebalance timeout) — Kafka's join and sync timers. Every
  deadline of a member goes with it (``remove_member``).

Who mutates it: ``consumer_group_membership`` on the coordinator's event loop.
"""

from __future__ import annotations

import enum
import functools
import re
import uuid
from collections import Counter
from collections.abc import Iterable
from typing import Final

from strata.broker.group.consumer_group_member import (
    Assignment,
    ConsumerGroupMember,
)
from strata.broker.group.partition_assignor import TopicMetadata

CONSUMER_GROUP_TYPE: Final = "consumer"
"""Kafka's ``Group.GroupType.CONSUMER`` as ListGroups v5 names it."""
CONSUMER_PROTOCOL_TYPE: Final = "consumer"
"""The protocol type DescribeGroups and ListGroups report for a consumer group."""


class ConsumerGroupState(enum.Enum):
    """Kafka's ``ConsumerGroup.ConsumerGroupState``, with Kafka's display names.

    EMPTY: no members (offsets may remain); ASSIGNING: the group epoch moved past the target
    assignment's; RECONCILING: some member is not yet at the target epoch or still revokes or
    waits for partitions; STABLE: every member has its target; DEAD: deleted (never stored).
    """

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


class IllegalGroupStateError(Exception):
    """An update would give one partition to two members (a bug, never a client's fault)."""


class ConsumerGroup:
    """See the module docstring."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target_assignment: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.session_deadlines: dict[str, float] = {}
        self.rebalance_deadlines: dict[str, tuple[float, int]] = {}
        self.join_deadlines: dict[str, float] = {}
        self.sync_deadlines: dict[str, float] = {}
        self._partition_owners: dict[tuple[uuid.UUID, int], tuple[str, int]] = {}
        self.deleted = False

    # ----------------------------------------------------------------- queries
    @property
    def state(self) -> ConsumerGroupState:
        if self.deleted:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if all(m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    def partition_epoch(self, topic_id: uuid.UUID, index: int) -> int:
        """The epoch of the member holding the partition; -1 when no member holds it."""
        owner = self._partition_owners.get((topic_id, index))
        return -1 if owner is None else owner[1]

    def partition_owner(self, topic_id: uuid.UUID, index: int) -> str | None:
        owner = self._partition_owners.get((topic_id, index))
        return None if owner is None else owner[0]

    def member_by_instance_id(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def subscribed_topic_names(self, topic_names: Iterable[str],
                               replacing: ConsumerGroupMember | None = None) -> set[str]:
        """Every topic some member subscribes to (its names, and the existing ``topic_names``
        its regex fully matches); with ``replacing``, as if that member were updated."""
        members = dict(self.members)
        if replacing is not None:
            members[replacing.member_id] = replacing
        names = list(topic_names)
        subscribed: set[str] = set()
        for member in members.values():
            subscribed.update(member_topic_names(member, names))
        return subscribed

    def preferred_server_assignor(self, default: str) -> str:
        """The assignor most members ask for (ties: by name); ``default`` if none asks."""
        wanted = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if not wanted:
            return default
        return min(wanted.items(), key=lambda kv: (-kv[1], kv[0]))[0]

    # --------------------------------------------------------------- mutations
    def update_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace ``member``, moving partition ownership with it."""
        old = self.members.get(member.member_id)
        claimed = set(member.owned())
        for tp in claimed:
            owner = self._partition_owners.get(tp)
            if owner is not None and owner[0] != member.member_id:
                raise IllegalGroupStateError(
                    f"group {self.group_id}: partition {tp} of member {member.member_id} is "
                    f"still held by {owner[0]}")
        if old is not None:
            for tp in old.owned():
                self._partition_owners.pop(tp, None)
            if old.instance_id is not None and old.instance_id != member.instance_id:
                self.static_members.pop(old.instance_id, None)
        for tp in claimed:
            self._partition_owners[tp] = (member.member_id, member.member_epoch)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        """Forget a member: its partitions are released, its target and timers dropped."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        for tp in member.owned():
            if self._partition_owners.get(tp, ("", 0))[0] == member_id:
                self._partition_owners.pop(tp, None)
        if member.instance_id is not None and \
                self.static_members.get(member.instance_id) == member_id:
            self.static_members.pop(member.instance_id, None)
        self.target_assignment.pop(member_id, None)
        self.session_deadlines.pop(member_id, None)
        self.rebalance_deadlines.pop(member_id, None)
        self.join_deadlines.pop(member_id, None)
        self.sync_deadlines.pop(member_id, None)
        return member

    def set_target_assignment(self, epoch: int, assignment: dict[str, Assignment]) -> None:
        self.target_assignment = {m: a for m, a in assignment.items() if m in self.members}
        self.assignment_epoch = epoch


def member_topic_names(member: ConsumerGroupMember, topic_names: Iterable[str]) -> set[str]:
    """The topics ``member`` subscribes to: its names, and those of ``topic_names`` its regex
    fully matches (RE2/J's ``matches()``; Python's ``re`` accepts the patterns RE2/J does
    that clients use; internal topics are never matched)."""
    subscribed = set(member.subscribed_topic_names)
    pattern = compiled_regex(member.subscribed_topic_regex)
    if pattern is not None:
        subscribed.update(t for t in topic_names
                          if not t.startswith("__") and pattern.fullmatch(t))
    return subscribed


def compiled_regex(regex: str | None) -> re.Pattern[str] | None:
    if not regex:
        return None
    return _compile(regex)


@functools.lru_cache(maxsize=256)
def _compile(regex: str) -> re.Pattern[str]:
    return re.compile(regex)
