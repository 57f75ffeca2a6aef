"""Classic members of a consumer group: JoinGroup, SyncGroup, Heartbeat, LeaveGroup translated.

Kafka's ``classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``,
``classicGroupHeartbeatToConsumerGroup`` and ``classicGroupLeaveToConsumerGroup``, pure (the
clock is the ``now`` each call gets, the topics a mapping). After an online upgrade
(``consumer_group_migration``) the consumers still on ``group.protocol=classic`` stay members of
the consumer group; the broker computes their assignment like everyone's, and:

* **JoinGroup** is a full heartbeat: the member's subscription (topics, rack, owned
  partitions) is read from its ``ConsumerProtocolSubscription``; a new member or a changed
  subscription bumps the group epoch and the target is recomputed; the member is reconciled
  with the partitions it says it owns (an eager member owns none: it revoked them before
  rejoining). The answer comes at once: generation = the member epoch, protocol = its first,
  no leader (the broker assigns). A dynamic member without an id (v4+) gets
  MEMBER_ID_REQUIRED with a new id first. The protocol type must be ``consumer`` and one
  protocol name common to every classic member, else INCONSISTENT_GROUP_PROTOCOL.
* **SyncGroup** answers the member's assigned partitions (never those pending revocation or
  still held by another member) in its ``ConsumerProtocolAssignment`` version;
  ILLEGAL_GENERATION off its epoch, REBALANCE_IN_PROGRESS when the group moved past it.
* **Heartbeat** answers REBALANCE_IN_PROGRESS when the member must rejoin: the group epoch
  passed its epoch, it must revoke partitions, or partitions it waits for were released.
* **LeaveGroup** removes the members (the group epoch bumped, their partitions free).

Timers (Kafka's, for classic members only; a classic member has no rebalance timer): every
JoinGroup, SyncGroup and Heartbeat runs the member's session again from ``now`` with *its*
``session.timeout.ms`` (from its JoinGroup). A member answered REBALANCE_IN_PROGRESS (by a
Heartbeat or a SyncGroup) gets a *join* deadline, its rebalance timeout from then, unless it
has one already (``scheduleConsumerGroupJoinTimeoutIfAbsent``); its JoinGroup cancels it and
sets a *sync* deadline, the JoinGroup's rebalance timeout from then
(``scheduleConsumerGroupSyncTimeout``), which its SyncGroup cancels. At any deadline the member
is removed and the group epoch bumped (``ConsumerGroupMembership.expire_due``).

A partition is never held by two members: classic members go through the same
``ConsumerGroup.update_member`` and revoke-before-assign reconciliation as the others.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from typing import Final

from strata.broker.group.classic_group import CONSUMER_PROTOCOL_TYPE
from strata.broker.group.consumer_group import ConsumerGroup
from strata.broker.group.consumer_group_member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
    pairs_of,
)
from strata.broker.group.consumer_group_membership import ConsumerGroupMembership
from strata.broker.group.consumer_group_migration import named_pairs
from strata.broker.group.consumer_protocol import (
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
    version_of,
)
from strata.broker.group.current_assignment_builder import reconcile
from strata.broker.group.member import (
    UNKNOWN_MEMBER_ID,
    JoinGroupResult,
    SyncGroupResult,
)
from strata.broker.group.membership import JoinRequest
from strata.broker.group.partition_assignor import TopicMetadata
from strata.protocol.error_codes import ErrorCode

NO_LEADER: Final = ""


class ClassicMembers:
    """The classic protocol's requests on a ``ConsumerGroup`` (see the module docstring)."""

    def __init__(self, membership: ConsumerGroupMembership) -> None:
        self.membership = membership

    # ---------------------------------------------------------------- JoinGroup
    def join(self, group: ConsumerGroup, request: JoinRequest, now: float,
             topics: Mapping[str, TopicMetadata]) -> JoinGroupResult:
        unknown = request.member_id == UNKNOWN_MEMBER_ID
        member_id = str(uuid.uuid4()) if unknown else request.member_id
        error = self._protocol_error(group, request)
        if error is not None:
            return JoinGroupResult(error, request.member_id)
        try:
            subscription = decode_subscription(request.protocols[0][1])
        except ConsumerProtocolError:
            return JoinGroupResult(ErrorCode.inconsistent_group_protocol, request.member_id)
        found = self._member_for_join(group, request, member_id, unknown)
        if isinstance(found, ErrorCode):
            return JoinGroupResult(found, request.member_id)
        member, is_new = found
        if is_new and len(group.members) >= self.membership.config.max_size:
            return JoinGroupResult(ErrorCode.group_max_size_reached, request.member_id)
        if unknown and request.require_known_member_id and request.group_instance_id is None:
            return JoinGroupResult(ErrorCode.member_id_required, member_id)
        updated = dataclasses.replace(
            member, instance_id=request.group_instance_id,
            rack_id=subscription.rack_id or member.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            subscribed_topic_regex=None, client_id=request.client_id,
            client_host=request.client_host,
            classic=ClassicMemberMetadata(request.session_timeout_ms, request.protocols))
        bump = is_new or updated.subscribed_topic_names != member.subscribed_topic_names
        subscribed = group.subscribed_topic_names(topics, replacing=updated)
        metadata = {name: topics[name] for name in subscribed if name in topics}
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        group.update_member(updated)
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self.membership.compute_target_assignment(group, topics)
        owned = [(topics[t].topic_id, p) for t, p in subscription.owned_partitions
                 if t in topics]
        reconciled = reconcile(updated, group.assignment_epoch,
                               group.target_assignment.get(member_id, {}),
                               group.partition_epoch, owned)
        group.update_member(reconciled)
        self._heard_from(group, reconciled, now)
        group.join_deadlines.pop(member_id, None)
        group.sync_deadlines[member_id] = now + max(0, request.rebalance_timeout_ms)
        return JoinGroupResult(ErrorCode.none, member_id, reconciled.member_epoch,
                               CONSUMER_PROTOCOL_TYPE, request.protocols[0][0], NO_LEADER)

    def _protocol_error(self, group: ConsumerGroup, request: JoinRequest) -> ErrorCode | None:
        """Kafka's ``throwIfClassicProtocolIsNotSupported``."""
        if request.protocol_type != CONSUMER_PROTOCOL_TYPE or not request.protocols:
            return ErrorCode.inconsistent_group_protocol
        names = {name for name, _ in request.protocols}
        for member in group.members.values():
            if member.classic is not None and member.member_id != request.member_id:
                names &= {name for name, _ in member.classic.supported_protocols}
        return None if names else ErrorCode.inconsistent_group_protocol

    @staticmethod
    def _member_for_join(group: ConsumerGroup, request: JoinRequest, member_id: str,
                         unknown: bool) -> tuple[ConsumerGroupMember, bool] | ErrorCode:
        instance_id = request.group_instance_id
        if instance_id is None:
            existing = group.members.get(member_id)
            return (existing, False) if existing is not None else \
                (ConsumerGroupMember(member_id), True)
        previous = group.member_by_instance_id(instance_id)
        if previous is None:
            return ConsumerGroupMember(member_id, instance_id=instance_id), True
        if previous.member_id == member_id:
            return previous, False
        if not unknown:
            return ErrorCode.fenced_instance_id
        # A new instance of a static member takes over its place, assignment and target.
        target = group.target_assignment.get(previous.member_id)
        group.remove_member(previous.member_id)
        if target is not None:
            group.target_assignment[member_id] = target
        return dataclasses.replace(previous, member_id=member_id,
                                   partitions_pending_revocation={}), False

    # ---------------------------------------------------------------- SyncGroup
    def sync(self, group: ConsumerGroup, generation_id: int, member_id: str,
             instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
             topic_names: Mapping[uuid.UUID, str], now: float) -> SyncGroupResult:
        member = self._validated(group, member_id, instance_id)
        if isinstance(member, ErrorCode):
            return SyncGroupResult(member)
        classic = member.classic
        assert classic is not None  # _validated checks it
        if generation_id != member.member_epoch:
            return SyncGroupResult(ErrorCode.illegal_generation)
        first_name, first_metadata = classic.supported_protocols[0]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                (protocol_name is not None and protocol_name != first_name):
            return SyncGroupResult(ErrorCode.inconsistent_group_protocol)
        if group.group_epoch > member.member_epoch and \
                member.state is not MemberState.UNREVOKED_PARTITIONS:
            schedule_join_timeout_if_absent(group, member, now)
            return SyncGroupResult(ErrorCode.rebalance_in_progress)
        self._heard_from(group, member, now)
        group.sync_deadlines.pop(member.member_id, None)
        try:
            version = version_of(first_metadata)
        except ConsumerProtocolError:
            version = 0
        assignment = encode_assignment(named_pairs(member.assigned_partitions, topic_names),
                                       version)
        return SyncGroupResult(ErrorCode.none, assignment, protocol_type or CONSUMER_PROTOCOL_TYPE,
                               protocol_name or first_name)

    # ---------------------------------------------------------------- Heartbeat
    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                  generation_id: int, now: float) -> ErrorCode:
        member = self._validated(group, member_id, instance_id)
        if isinstance(member, ErrorCode):
            return member
        if generation_id != member.member_epoch:
            return ErrorCode.illegal_generation
        self._heard_from(group, member, now)
        if (member.member_epoch < group.group_epoch
                or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS
                    and not waiting_on_unreleased(group, member))):
            schedule_join_timeout_if_absent(group, member, now)
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # --------------------------------------------------------------- LeaveGroup
    def leave(self, group: ConsumerGroup, members: Sequence[tuple[str, str | None]],
              topics: Mapping[str, TopicMetadata]) -> tuple[ErrorCode, list[ErrorCode]]:
        errors: list[ErrorCode] = []
        for member_id, instance_id in members:
            if instance_id is not None and member_id == UNKNOWN_MEMBER_ID:
                static = group.member_by_instance_id(instance_id)
                member_id = static.member_id if static is not None else member_id
            member = self._validated(group, member_id, instance_id)
            if isinstance(member, ErrorCode):
                errors.append(member)
                continue
            self.membership.remove_member(group, member.member_id)
            errors.append(ErrorCode.none)
        if any(e == ErrorCode.none for e in errors):
            names = group.subscribed_topic_names(topics)
            group.subscription_metadata = {n: topics[n] for n in names if n in topics}
        return ErrorCode.none, errors

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _validated(group: ConsumerGroup, member_id: str, instance_id: str | None
                   ) -> ConsumerGroupMember | ErrorCode:
        """Kafka's ``validateConsumerGroupMember`` + ``throwIfMemberDoesNotUseClassicProtocol``."""
        if instance_id is not None:
            member = group.member_by_instance_id(instance_id)
            if member is None:
                return ErrorCode.unknown_member_id
            if member.member_id != member_id:
                return ErrorCode.fenced_instance_id
        else:
            found = group.members.get(member_id)
            if found is None:
                return ErrorCode.unknown_member_id
            member = found
        if member.classic is None:
            return ErrorCode.unknown_member_id
        return member

    def _heard_from(self, group: ConsumerGroup, member: ConsumerGroupMember, now: float) -> None:
        """The member's session runs again from now, for its own classic session timeout."""
        classic = member.classic
        timeout = classic.session_timeout_ms if classic is not None \
            else self.membership.timeouts(group.group_id).session_timeout_ms
        group.session_deadlines[member.member_id] = now + timeout


def schedule_join_timeout_if_absent(group: ConsumerGroup, member: ConsumerGroupMember,
                                    now: float) -> None:
    """Told to rejoin, the member must send JoinGroup within its rebalance timeout (the first
    such answer starts the clock; Kafka's ``scheduleConsumerGroupJoinTimeoutIfAbsent``)."""
    group.join_deadlines.setdefault(member.member_id,
                                    now + max(0, member.rebalance_timeout_ms))


def waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Whether a partition of the member's target is still held by another member."""
    held = pairs_of(member.assigned_partitions)
    for topic_id, index in pairs_of(group.target_assignment.get(member.member_id, {})):
        if (topic_id, index) not in held:
            owner = group.partition_owner(topic_id, index)
            if owner is not None and owner != member.member_id:
                return True
    return False
