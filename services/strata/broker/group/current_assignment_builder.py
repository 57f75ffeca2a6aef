"""Per-member reconciliation (KIP-848): a member's next state towards its target assignment.

Kafka's ``CurrentAssignmentBuilder``, as one pure function, ``reconcile``. The rule that keeps
a partition from being consumed by two members at once is *revoke before assign*:

* a member first gives up what its target no longer holds (``partitions_pending_revocation``,
  state UNREVOKED_PARTITIONS, its epoch unchanged); it has revoked them when a later heartbeat
  reports owned partitions that no longer include any of them (a heartbeat without owned
  partitions proves nothing);
* only then does it move to the target epoch and get the new partitions of its target — and
  only those no other member still holds (the group's partition epochs: -1 means free). Those
  still held are *unreleased* (state UNRELEASED_PARTITIONS) and are given on a later
  heartbeat, once their previous owner revoked them.

Transitions (``member`` is the stored member, ``target_epoch`` the group's assignment epoch):

* STABLE: at the target epoch nothing changes; otherwise compute the next assignment;
* UNREVOKED_PARTITIONS: while it still owns a partition pending revocation, nothing changes;
  after, compute the next assignment (it may revoke more if the target moved meanwhile);
* UNRELEASED_PARTITIONS: compute the next assignment (picks up what was released).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Collection

from strata.broker.group.consumer_group_member import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
)

PartitionEpoch = Callable[[uuid.UUID, int], int]
"""The epoch of the member holding a partition (assigned or pending revocation); -1: free."""

OwnedPartitions = Collection[tuple[uuid.UUID, int]] | None
"""The partitions a member reports owning in its heartbeat (None: not reported)."""


def owns_any(owned: OwnedPartitions, partitions: Assignment) -> bool:
    """Whether the member may still own one of ``partitions`` (unknown counts as yes)."""
    if owned is None:
        return True
    return any(index in partitions.get(topic_id, ()) for topic_id, index in owned)


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              partition_epoch: PartitionEpoch, owned: OwnedPartitions) -> ConsumerGroupMember:
    """The member's next state (see the module docstring); ``member`` itself if unchanged."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target,
                                partition_epoch, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next_assignment(member, member.member_epoch + 1, target_epoch, target,
                                partition_epoch, owned)
    return _next_assignment(member, member.member_epoch, target_epoch, target,
                            partition_epoch, owned)


def _next_assignment(member: ConsumerGroupMember, member_epoch: int, target_epoch: int,
                     target: Assignment, partition_epoch: PartitionEpoch,
                     owned: OwnedPartitions) -> ConsumerGroupMember:
    has_unreleased = False
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    pending: dict[uuid.UUID, frozenset[int]] = {}
    current = member.assigned_partitions
    for topic_id in set(target) | set(current):
        wanted = target.get(topic_id, frozenset())
        held = current.get(topic_id, frozenset())
        kept = held & wanted
        revoked = held - wanted
        free = set()
        for index in wanted - held:
            if partition_epoch(topic_id, index) == -1:
                free.add(index)
            else:
                has_unreleased = True
        if kept:
            assigned[topic_id] = kept
        if revoked:
            revoking[topic_id] = revoked
        if free:
            pending[topic_id] = frozenset(free)
    if revoking and owns_any(owned, revoking):
        # Revoke first: the member stays at its epoch until it acknowledges.
        return _changed(member, MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned,
                        revoking)
    for topic_id, free_partitions in pending.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | free_partitions
    state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
    return _changed(member, state, target_epoch, assigned, {})


def _changed(member: ConsumerGroupMember, state: MemberState, epoch: int,
             assigned: Assignment, revoking: Assignment) -> ConsumerGroupMember:
    if (member.state is state and member.member_epoch == epoch
            and member.assigned_partitions == assigned
            and member.partitions_pending_revocation == revoking):
        return member
    return dataclasses.replace(member, state=state, member_epoch=epoch,
                               previous_member_epoch=member.member_epoch,
                               assigned_partitions=assigned,
                               partitions_pending_revocation=revoking)
