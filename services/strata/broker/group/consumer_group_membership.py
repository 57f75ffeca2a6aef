"""ConsumerGroupHeartbeat on one ``ConsumerGroup`` (KIP-848): join, reconcile, leave, expire.

Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` and its timers, pure: the clock is the
``now`` (monotonic ms) each call is given, the broker's topics the ``topics`` mapping (name ->
``TopicMetadata``). One heartbeat, in order:

1. the request's own checks (``validate_request``: INVALID_REQUEST, UNSUPPORTED_ASSIGNOR,
   INVALID_REGULAR_EXPRESSION) — before the group is looked up;
2. the member: epoch 0 joins (a new member, or a static member replacing a previous instance
   that left with epoch -2; else UNRELEASED_INSTANCE_ID), GROUP_MAX_SIZE_REACHED when the group
   is full; any other epoch must name a known member (UNKNOWN_MEMBER_ID; a static one under its
   instance's current member id, else FENCED_INSTANCE_ID) at its epoch — or at its previous
   epoch while it owns nothing outside its assignment (its last answer was lost) — else
   FENCED_MEMBER_EPOCH;
3. its fields updated from the request (a null field keeps the stored value); a new member, a
   changed subscription, or a change of the subscribed topics bumps the group epoch;
4. if the group epoch passed the assignment epoch, the target assignment is recomputed by the
   preferred assignor (the one most members name in ``group.remote.assignor``, else the
   first of ``group.consumer.assignors``);
5. the member reconciled towards its target (``current_assignment_builder.reconcile``); its
   session deadline reset; a rebalance deadline set while it must revoke partitions.

The answer carries the member's epoch, ``group.consumer.heartbeat.interval.ms`` and its
assignment when it joined, sent a full request, or its assigned partitions changed.

Leaving: epoch -1 removes the member (group epoch bumped, its partitions free for the others);
epoch -2 (static members only) keeps it and its partitions until its session expires or its
instance rejoins. Timers (``expire_due``): a member whose session expired, or that did not
revoke within its rebalance timeout (a classic member: did not rejoin or sync within it,
``consumer_group_classic_members``), is removed and the group epoch bumped.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Final

from strata.broker.group.consumer_group import ConsumerGroup, member_topic_names
from strata.broker.group.consumer_group_member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
    MemberState,
    pairs_of,
)
from strata.broker.group.consumer_group_migration import MigrationPolicy
from strata.broker.group.current_assignment_builder import reconcile
from strata.broker.group.group_config import GroupConfigValues
from strata.broker.group.partition_assignor import (
    MemberSubscription,
    PartitionAssignor,
    TopicMetadata,
)
from strata.broker.group.range_assignor import RangeAssignor
from strata.broker.group.uniform_assignor import UniformAssignor
from strata.protocol.error_codes import ErrorCode

GroupConfigLookup = Callable[[str, GroupConfigValues], GroupConfigValues]
"""(group id, the broker's timeouts) -> the group's timeouts in force (its group configs)."""

ASSIGNORS: Final[Mapping[str, PartitionAssignor]] = {
    a.name: a for a in (UniformAssignor(), RangeAssignor())}
"""The server-side assignors this broker has, by Kafka's names."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """The broker's ``group.consumer.*`` settings (Kafka's names and defaults)."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2_147_483_647
    assignors: tuple[str, ...] = ("uniform", "range")
    """``group.consumer.assignors``: the first is the default (a member may name another,
    ``group.remote.assignor`` on the client)."""
    migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL
    """``group.consumer.migration.policy``: online upgrade / downgrade of groups with members."""
    classic_max_size: int = 2_147_483_647
    """``group.max.size``: a downgrade making a larger classic group is not done."""
    broker_rack: str | None = None
    """``broker.rack``: the rack of every replica when this broker is alone."""

    @property
    def default_assignor(self) -> str:
        return self.assignors[0]


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat, decoded (topic ids already mapped where the group needs)."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Collection[tuple[uuid.UUID, int]] | None = None
    client_id: str = ""
    client_host: str = ""

    @property
    def is_full(self) -> bool:
        return (self.rebalance_timeout_ms != -1 and self.owned is not None
                and (self.subscribed_topic_names is not None
                     or self.subscribed_topic_regex is not None))


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None
    message: str | None = None


def failed(request: HeartbeatRequest, error: ErrorCode, message: str | None = None
           ) -> HeartbeatResult:
    return HeartbeatResult(error, request.member_id, request.member_epoch, message=message)


class ConsumerGroupMembership:
    """See the module docstring."""

    def __init__(self, config: ConsumerGroupConfig,
                 assignors: Mapping[str, PartitionAssignor] = ASSIGNORS,
                 group_configs: GroupConfigLookup | None = None) -> None:
        self.config = config
        self.assignors = {n: assignors[n] for n in config.assignors if n in assignors}
        self._group_configs = group_configs
        self._broker_timeouts = GroupConfigValues(config.session_timeout_ms,
                                                  config.heartbeat_interval_ms)

    def timeouts(self, group_id: str) -> GroupConfigValues:
        """The session timeout and heartbeat interval of ``group_id``'s members: its group
        configs (KIP-848, ``group_config``) over the broker's ``group.consumer.*``."""
        if self._group_configs is None:
            return self._broker_timeouts
        return self._group_configs(group_id, self._broker_timeouts)

    # ---------------------------------------------------------------- checks
    def validate_request(self, group_id: str, request: HeartbeatRequest
                         ) -> tuple[ErrorCode, str] | None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        epoch = request.member_epoch
        if not group_id:
            return ErrorCode.invalid_request, "GroupId can't be empty."
        if not request.member_id:
            return ErrorCode.invalid_request, "MemberId can't be empty."
        if request.instance_id is not None and not request.instance_id:
            return ErrorCode.invalid_request, "InstanceId can't be empty."
        if request.rack_id is not None and not request.rack_id:
            return ErrorCode.invalid_request, "RackId can't be empty."
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            if request.rebalance_timeout_ms == -1:
                return (ErrorCode.invalid_request,
                        "RebalanceTimeoutMs must be provided in first request.")
            if request.owned:
                return ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining."
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                return (ErrorCode.invalid_request, "SubscribedTopicNames or SubscribedTopicRegex"
                        " must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.instance_id is None:
                return ErrorCode.invalid_request, "InstanceId can't be null."
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return ErrorCode.invalid_request, f"MemberEpoch is invalid: {epoch}"
        if request.server_assignor is not None and request.server_assignor not in self.assignors:
            return (ErrorCode.unsupported_assignor,
                    f"ServerAssignor {request.server_assignor} is not supported. Supported "
                    f"assignors: {', '.join(self.assignors)}.")
        if request.subscribed_topic_regex:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as exc:
                return (ErrorCode.invalid_regular_expression,
                        f"SubscribedTopicRegex is invalid: {exc}")
        return None

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str,
                               member_epoch: int) -> ErrorCode:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``: epoch < 0 commits only while the
        group has no members; else the member must exist at exactly that epoch."""
        if member_epoch < 0 and not group.members:
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:  # a classic member's epoch is its generation
            return ErrorCode.illegal_generation if member.uses_classic_protocol \
                else ErrorCode.stale_member_epoch
        return ErrorCode.none

    def validate_offset_fetch(self, group: ConsumerGroup, member_id: str | None,
                              member_epoch: int) -> ErrorCode:
        """Kafka's ``ConsumerGroup.validateOffsetFetch``: no member id and epoch < 0 (an
        admin) may always fetch; a member only at its epoch."""
        if member_epoch < 0 and not member_id:
            return ErrorCode.none
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    # -------------------------------------------------------------- heartbeat
    def heartbeat(self, group: ConsumerGroup, request: HeartbeatRequest, now: float,
                  topics: Mapping[str, TopicMetadata]) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat on ``group`` (see the module docstring)."""
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self.leave(group, request)
        found = self._member_for(group, request)
        if isinstance(found, HeartbeatResult):
            return found
        member, is_new = found
        updated = dataclasses.replace(
            member,
            instance_id=request.instance_id if request.instance_id is not None
            else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms
            if request.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(request.subscribed_topic_names)))
            if request.subscribed_topic_names is not None else member.subscribed_topic_names,
            subscribed_topic_regex=(request.subscribed_topic_regex or None)
            if request.subscribed_topic_regex is not None else member.subscribed_topic_regex,
            server_assignor=request.server_assignor if request.server_assignor is not None
            else member.server_assignor,
            client_id=request.client_id, client_host=request.client_host)
        bump = is_new or (updated.subscribed_topic_names != member.subscribed_topic_names
                          or updated.subscribed_topic_regex != member.subscribed_topic_regex)
        subscribed = group.subscribed_topic_names(topics, replacing=updated)
        metadata = {name: topics[name] for name in subscribed if name in topics}
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        group.update_member(updated)
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self.compute_target_assignment(group, topics)
        reconciled = reconcile(updated, group.assignment_epoch,
                               group.target_assignment.get(updated.member_id, {}),
                               group.partition_epoch, request.owned)
        group.update_member(reconciled)
        member_id = reconciled.member_id
        timeouts = self.timeouts(group.group_id)
        group.session_deadlines[member_id] = now + timeouts.session_timeout_ms
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
            pending = group.rebalance_deadlines.get(member_id)
            if pending is None or pending[1] != reconciled.member_epoch:
                group.rebalance_deadlines[member_id] = (
                    now + max(0, reconciled.rebalance_timeout_ms), reconciled.member_epoch)
        else:
            group.rebalance_deadlines.pop(member_id, None)
        changed = reconciled.assigned_partitions != member.assigned_partitions
        send = (request.member_epoch == JOIN_GROUP_MEMBER_EPOCH or request.is_full or changed)
        return HeartbeatResult(ErrorCode.none, member_id, reconciled.member_epoch,
                               timeouts.heartbeat_interval_ms,
                               reconciled.assigned_partitions if send else None)

    def _member_for(self, group: ConsumerGroup, request: HeartbeatRequest
                    ) -> tuple[ConsumerGroupMember, bool] | HeartbeatResult:
        """(the stored member or a new one, whether it is new), or the error answer."""
        member_id = request.member_id
        existing = group.members.get(member_id)
        if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if existing is not None:
                return existing, False
            if len(group.members) >= self.config.max_size:
                return failed(request, ErrorCode.group_max_size_reached,
                              f"The consumer group has reached its maximum capacity of "
                              f"{self.config.max_size} members.")
            instance_id = request.instance_id
            previous = None if instance_id is None else group.member_by_instance_id(instance_id)
            if previous is None:
                return ConsumerGroupMember(member_id, instance_id=instance_id), True
            if previous.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                return failed(request, ErrorCode.unreleased_instance_id,
                              f"Static member {previous.member_id} with instance id "
                              f"{instance_id} is not released.")
            # A static member's new instance takes over its assignment and target; the old
            # one goes without a new group epoch (unless the subscription changes).
            target = group.target_assignment.get(previous.member_id)
            group.remove_member(previous.member_id)
            if target is not None:
                group.target_assignment[member_id] = target
            return dataclasses.replace(
                previous, member_id=member_id, member_epoch=JOIN_GROUP_MEMBER_EPOCH,
                previous_member_epoch=JOIN_GROUP_MEMBER_EPOCH, state=MemberState.STABLE,
                partitions_pending_revocation={}), False
        if request.instance_id is not None:
            static = group.member_by_instance_id(request.instance_id)
            if static is None:
                return failed(request, ErrorCode.unknown_member_id,
                              f"Instance id {request.instance_id} is unknown.")
            if static.member_id != member_id:
                return failed(request, ErrorCode.fenced_instance_id,
                              f"Instance id {request.instance_id} is held by another member.")
        if existing is None:
            return failed(request, ErrorCode.unknown_member_id,
                          f"Member {member_id} is not a member of group {group.group_id}.")
        epoch = request.member_epoch
        if epoch > existing.member_epoch or (
                epoch < existing.member_epoch and not (
                    epoch == existing.previous_member_epoch
                    and request.owned is not None
                    and set(request.owned) <= pairs_of(existing.assigned_partitions))):
            return failed(request, ErrorCode.fenced_member_epoch,
                          f"The consumer group member has a smaller or larger member epoch "
                          f"({epoch}) than the one known by the group coordinator "
                          f"({existing.member_epoch}).")
        return existing, False

    def leave(self, group: ConsumerGroup, request: HeartbeatRequest) -> HeartbeatResult:
        """Epoch -1: the member leaves; -2: a static member leaves for now (keeps its place)."""
        member = group.members.get(request.member_id)
        if request.instance_id is not None:
            static = group.member_by_instance_id(request.instance_id)
            if static is None:
                return failed(request, ErrorCode.unknown_member_id,
                              f"Instance id {request.instance_id} is unknown.")
            if static.member_id != request.member_id:
                return failed(request, ErrorCode.fenced_instance_id,
                              f"Instance id {request.instance_id} is held by another member.")
            member = static
        if member is None:
            return failed(request, ErrorCode.unknown_member_id,
                          f"Member {request.member_id} is not a member of group "
                          f"{group.group_id}.")
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            group.update_member(dataclasses.replace(
                member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                previous_member_epoch=member.member_epoch))
            group.rebalance_deadlines.pop(member.member_id, None)
        else:
            self.remove_member(group, member.member_id)
        return HeartbeatResult(ErrorCode.none, member.member_id, request.member_epoch)

    def remove_member(self, group: ConsumerGroup, member_id: str) -> None:
        """Fence or remove a member: its partitions are released and the group epoch bumped
        (the others get them at the next target assignment)."""
        if group.remove_member(member_id) is not None:
            group.group_epoch += 1

    # ------------------------------------------------------------- assignment
    def compute_target_assignment(self, group: ConsumerGroup,
                                  topics: Mapping[str, TopicMetadata]) -> None:
        """A new target for the group epoch, by the preferred assignor."""
        names = list(topics)
        by_id = {m.topic_id: m for m in group.subscription_metadata.values()}
        members = {
            member_id: MemberSubscription(
                frozenset(topics[n].topic_id for n in member_topic_names(member, names)
                          if n in topics and topics[n].topic_id in by_id),
                member.rack_id, group.target_assignment.get(member_id, {}))
            for member_id, member in group.members.items()}
        name = group.preferred_server_assignor(self.config.default_assignor)
        assignor = self.assignors.get(name) or self.assignors[self.config.default_assignor]
        group.set_target_assignment(group.group_epoch, assignor.assign(members, by_id))

    # ------------------------------------------------------------------ timers
    def expire_due(self, group: ConsumerGroup, now: float) -> list[str]:
        """Remove the members whose session, rebalance, join or sync deadline passed (a
        classic member's join and sync timers); their ids."""
        expired = [m for m, deadline in group.session_deadlines.items() if deadline <= now]
        for member_id, (deadline, epoch) in list(group.rebalance_deadlines.items()):
            if deadline > now:
                continue
            member = group.members.get(member_id)
            if member is not None and member.member_epoch == epoch \
                    and member.state is MemberState.UNREVOKED_PARTITIONS:
                if member_id not in expired:
                    expired.append(member_id)
            else:  # the member moved on (a classic member's is never cancelled): drop it
                del group.rebalance_deadlines[member_id]
        for deadlines in (group.join_deadlines, group.sync_deadlines):
            expired.extend(m for m, deadline in deadlines.items()
                           if deadline <= now and m not in expired)
        for member_id in expired:
            self.remove_member(group, member_id)
        return expired

    def next_deadline(self, group: ConsumerGroup) -> float | None:
        deadlines = list(group.session_deadlines.values())
        deadlines.extend(d for d, _ in group.rebalance_deadlines.values())
        deadlines.extend(group.join_deadlines.values())
        deadlines.extend(group.sync_deadlines.values())
        return min(deadlines, default=None)
