"""``ConsumerGroupCoordinator``: the consumer groups (KIP-848) a ``GroupCoordinator`` holds.

The runtime around the pure ``consumer_group`` / ``consumer_group_membership``, owned by the
classic coordinator (``GroupCoordinator.consumer_groups``), whose checks (``_group_status``:
group id, coordinator active, partition loaded and led here), clock, topics and timers it
uses. Owns:

* the consumer groups by id, and the rule that a group id is either a classic group or a
  consumer group (Kafka's ``getOrMaybeCreateConsumerGroup`` / ``classicGroupJoin``): a
  ConsumerGroupHeartbeat to an empty classic group (offsets only) makes it a consumer group;
  a JoinGroup to an empty consumer group makes it a classic group again;
* online migration (``group.consumer.migration.policy``; the conversions are
  ``consumer_group_conversion``'s, over the pure ``consumer_group_migration``): a
  ConsumerGroupHeartbeat joining a classic group with members *upgrades* it (when the policy
  allows, the group speaks the ``consumer`` embedded protocol and fits
  ``group.consumer.max.size``; else GROUP_ID_NOT_FOUND, "is not a consumer group"): parked
  JoinGroup/SyncGroup requests are answered REBALANCE_IN_PROGRESS, the classic members become
  classic members of the consumer group (``consumer_group_classic_members`` answers their
  JoinGroup, SyncGroup, Heartbeat and LeaveGroup), and the classic group's metadata record is
  deleted in the same batch as the consumer group's records are written. When the last
  member of the consumer protocol leaves (or is fenced) and classic members remain, the group
  is *downgraded* (when the policy allows): the consumer group's records are deleted and a
  classic group metadata record written at generation = the group epoch before the leave,
  then the classic group rebalances (its members rejoin with JoinGroup); when a static
  classic member's JoinGroup replaces it, at once at the group epoch, with no rebalance;
* the committed offsets of a consumer group: they stay where every offset API finds them, in
  a classic group of the same id with no members (the *offsets holder*, protocol type
  ``consumer``), which ListGroups, DescribeGroups and DeleteGroups never show as a classic
  group. Commits and fetches are first checked against the consumer group's member epochs
  (``offset_commit_error`` / ``offset_fetch_error``);
* ConsumerGroupHeartbeat and ConsumerGroupDescribe entry points, and the timers (session and
  rebalance deadlines) the coordinator's timer task runs through ``tick`` / ``next_deadline``;
* persistence: after every change a group's records (``consumer_group_records``, Kafka's
  formats) are appended to its ``__consumer_offsets`` partition — only those that differ from
  what was last written, tombstones for what is gone; each group's ``RecordCache`` keeps the
  encodings, so a heartbeat re-encodes only the records of what it changed. A heartbeat whose
  records cannot be appended is answered with the append's error (NOT_COORDINATOR when
  leadership moved). A new coordinator replays them (``on_loaded``): members keep their
  epochs and assignments, and every member's session starts again from the load (Kafka's
  ``onLoaded``);
* reporting to the group metrics (``GroupCoordinator.metrics``, when set) after each request
  and expiry: the group epoch before and the member concerned (``group_metrics`` counts the
  rebalances and times the reconciliations).

Event-loop only; no locks.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strata.broker.config import BrokerConfig, ConfigError
from strata.broker.coordinator_partition import partition_for
from strata.broker.group.classic_group import ClassicGroup, TopicPartition
from strata.broker.group.consumer_group import (
    CONSUMER_GROUP_TYPE,
    CONSUMER_PROTOCOL_TYPE,
    ConsumerGroup,
)
from strata.broker.group.consumer_group_classic_members import ClassicMembers
from strata.broker.group.consumer_group_conversion import GroupConversion
from strata.broker.group.consumer_group_member import MemberState
from strata.broker.group.consumer_group_membership import (
    ASSIGNORS,
    ConsumerGroupConfig,
    ConsumerGroupMembership,
    HeartbeatRequest,
    HeartbeatResult,
    failed,
)
from strata.broker.group.consumer_group_migration import (
    MigrationPolicy,
)
from strata.broker.group.consumer_group_records import (
    RecordCache,
    changes,
    records_of,
    replay,
)
from strata.broker.group.group_config_resource import values_for
from strata.broker.group.member import JoinGroupResult, SyncGroupResult
from strata.broker.group.membership import JoinRequest
from strata.broker.group.metadata_codec import GroupRecordError
from strata.broker.group.metadata_manager import append_error
from strata.broker.group.partition_assignor import TopicMetadata
from strata.broker.group.state import GroupState
from strata.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from strata.broker.group.coordinator import GroupCoordinator

logger = logging.getLogger(__name__)

SESSION_TIMEOUT_BOUNDS = ("group.consumer.min.session.timeout.ms",
                          "group.consumer.max.session.timeout.ms")
HEARTBEAT_INTERVAL_BOUNDS = ("group.consumer.min.heartbeat.interval.ms",
                             "group.consumer.max.heartbeat.interval.ms")


def consumer_group_config(config: BrokerConfig) -> ConsumerGroupConfig:
    """The ``group.consumer.*`` settings; a timeout outside its min/max bounds is brought
    within them (Kafka refuses to start; a broker here logs and serves). An unknown
    ``group.consumer.migration.policy`` is a ``ConfigError`` (Kafka refuses it too)."""
    def bounded(key: str, bounds: tuple[str, str]) -> int:
        value = config.get_int(key)
        low, high = (config.get_int(b) for b in bounds)
        if not low <= value <= high:
            logger.warning("%s=%d is outside [%d, %d]; using the nearest bound",
                           key, value, low, high)
        return min(max(value, low), high)

    configured = [assignor_name(a) for a in config.get_list("group.consumer.assignors")]
    unknown = [n for n in configured if n not in ASSIGNORS]
    if unknown:
        logger.warning("group.consumer.assignors: no assignor %s (known: %s)",
                       ", ".join(unknown), ", ".join(ASSIGNORS))
    assignors = tuple(dict.fromkeys(n for n in configured if n in ASSIGNORS)) \
        or tuple(ASSIGNORS)
    return ConsumerGroupConfig(
        session_timeout_ms=bounded("group.consumer.session.timeout.ms",
                                   SESSION_TIMEOUT_BOUNDS),
        heartbeat_interval_ms=bounded("group.consumer.heartbeat.interval.ms",
                                      HEARTBEAT_INTERVAL_BOUNDS),
        max_size=config.get_int("group.consumer.max.size"),
        assignors=assignors, migration_policy=migration_policy(config),
        classic_max_size=config.get_int("group.max.size"),
        broker_rack=config.get("broker.rack") or None)


def migration_policy(config: BrokerConfig) -> MigrationPolicy:
    try:
        return MigrationPolicy.parse(config.get("group.consumer.migration.policy")
                                     or str(MigrationPolicy.BIDIRECTIONAL))
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def assignor_name(configured: str) -> str:
    """``uniform`` for ``uniform`` or Kafka's ``org.apache...assignor.UniformAssignor``."""
    simple = configured.rsplit(".", 1)[-1]
    return simple.removesuffix("Assignor").lower() if simple.endswith("Assignor") else simple


@dataclass(frozen=True, slots=True)
class ConsumerGroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


class ConsumerGroupCoordinator:
    """See the module docstring."""

    def __init__(self, coordinator: GroupCoordinator, config: ConsumerGroupConfig) -> None:
        self._coordinator = coordinator
        store = coordinator.topic_store
        self.membership = ConsumerGroupMembership(
            config, group_configs=lambda group_id, broker: values_for(store, group_id, broker))
        self.classic_members = ClassicMembers(self.membership)
        self.conversion = GroupConversion(coordinator, self)
        self._groups: dict[str, ConsumerGroup] = {}
        # the racks of a partition's replicas: set by the cluster (its metadata image); a
        # single broker holds every replica, on its own ``broker.rack``
        rack = frozenset({config.broker_rack}) if config.broker_rack else frozenset()
        self.partition_racks: Callable[[str, int], frozenset[str]] = lambda _t, _i: rack
        # records to write before a group's own in its next batch (an upgrade's tombstone)
        self._prefix: dict[str, list[tuple[bytes, bytes | None]]] = {}
        self._stored: dict[str, dict[bytes, bytes]] = {}  # group id -> records last written
        self._encoded: dict[str, RecordCache] = {}  # group id -> its records, encoded

    def __contains__(self, group_id: object) -> bool:
        return group_id in self._groups

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    def groups(self) -> list[ConsumerGroup]:
        return list(self._groups.values())

    def topics(self, racks: bool = False) -> dict[str, TopicMetadata]:
        """The broker's topics as the groups see them (name -> id, partition count), with
        ``racks`` the racks of each partition's replicas (for rack-aware assignment)."""
        lookup = self.partition_racks if racks else None
        return {name: TopicMetadata(
                    record.topic_id, name, record.partitions,
                    tuple(lookup(name, i) for i in range(record.partitions)) if lookup else ())
                for name, record in self._coordinator.topic_store.topics().items()}

    def _topics_for(self, group: ConsumerGroup, rack_id: str | None) -> dict[str, TopicMetadata]:
        """``topics``, with racks once a member of ``group`` (or the one asking) has a rack."""
        return self.topics(racks=rack_id is not None
                           or any(m.rack_id is not None for m in group.members.values()))

    # ---------------------------------------------------------------- requests
    def heartbeat(self, group_id: str, request: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat (see ``consumer_group_membership``)."""
        invalid = self.membership.validate_request(group_id, request)
        if invalid is not None:
            return failed(request, *invalid)
        error = self._coordinator._group_status(group_id, allow_empty=False)
        if error is not None:
            return failed(request, error)
        group = self._groups.get(group_id)
        if group is None:
            if request.member_epoch != 0:
                return failed(request, ErrorCode.group_id_not_found,
                              f"Consumer group {group_id} not found.")
            classic = self._coordinator.group(group_id)
            if classic is not None and classic.state not in (GroupState.EMPTY, GroupState.DEAD):
                upgraded = self.conversion.upgrade(classic)
                if upgraded is None:
                    return failed(request, ErrorCode.group_id_not_found,
                                  f"Group {group_id} is not a consumer group")
                group = upgraded
            else:
                group = ConsumerGroup(group_id)
                self._groups[group_id] = group
                if classic is not None:
                    classic.protocol_type = CONSUMER_PROTOCOL_TYPE
                logger.info("created consumer group %s", group_id)
        now = self._coordinator.clock.monotonic_ms()
        epoch_before, had_consumer_members = group.group_epoch, _has_consumer_members(group)
        result = self.membership.heartbeat(group, request, now,
                                           self._topics_for(group, request.rack_id))
        self._report(group, epoch_before, request.member_id, now)
        if not group.members and group_id not in self._stored \
                and group_id not in self._prefix:  # created for nothing
            self._groups.pop(group_id, None)
            return result
        if had_consumer_members and \
                self.conversion.maybe_downgrade(group, epoch_before) is not None:
            return result
        stored = self._persist(group)
        self._after(group)
        if stored != ErrorCode.none:
            return failed(request, stored)
        return result

    def is_mixed(self, group_id: str) -> bool:
        """Whether ``group_id`` is a consumer group with members: the classic protocol's
        requests go to ``classic_*`` then."""
        group = self._groups.get(group_id)
        return group is not None and bool(group.members)

    def classic_join(self, group_id: str, request: JoinRequest) -> JoinGroupResult:
        group = self._groups[group_id]
        now, epoch_before = self._coordinator.clock.monotonic_ms(), group.group_epoch
        had_consumer_members = _has_consumer_members(group)
        result = self.classic_members.join(group, request, now, self._topics_for(group, None))
        self._report(group, epoch_before, result.member_id, now)
        if had_consumer_members and result.error == ErrorCode.none:  # a static replacement
            classic = self.conversion.maybe_downgrade(group, group.group_epoch, rebalance=False)
            if classic is not None:
                return dataclasses.replace(result, generation_id=classic.generation_id)
        error = self._persist(group)
        self._after(group)
        if error != ErrorCode.none and result.error == ErrorCode.none:
            return JoinGroupResult(error, request.member_id)
        return result

    def classic_sync(self, group_id: str, generation_id: int, member_id: str,
                     instance_id: str | None, protocol_type: str | None,
                     protocol_name: str | None) -> SyncGroupResult:
        group = self._groups[group_id]
        names = {t.topic_id: t.name for t in self.topics().values()}
        result = self.classic_members.sync(group, generation_id, member_id, instance_id,
                                           protocol_type, protocol_name, names,
                                           self._coordinator.clock.monotonic_ms())
        self._after(group)
        return result

    def classic_heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                          generation_id: int) -> ErrorCode:
        group = self._groups[group_id]
        result = self.classic_members.heartbeat(group, member_id, instance_id, generation_id,
                                                self._coordinator.clock.monotonic_ms())
        self._after(group)
        return result

    def classic_leave(self, group_id: str, members: list[tuple[str, str | None]]
                      ) -> tuple[ErrorCode, list[ErrorCode]]:
        group = self._groups[group_id]
        epoch_before = group.group_epoch
        result = self.classic_members.leave(group, members, self._topics_for(group, None))
        self._report(group, epoch_before, None, self._coordinator.clock.monotonic_ms())
        error = self._persist(group)
        self._after(group)
        return (error, []) if error != ErrorCode.none else result

    def on_classic_join(self, group_id: str) -> ErrorCode | None:
        """A JoinGroup for ``group_id`` (no members: ``is_mixed`` is false): an empty
        consumer group becomes a classic group (None)."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return ErrorCode.inconsistent_group_protocol
        group.deleted = True
        self._persist(group)
        self._groups.pop(group_id)
        holder = self._coordinator.group(group_id)
        if holder is not None and holder.protocol_type == CONSUMER_PROTOCOL_TYPE:
            holder.protocol_type = None
        logger.info("empty consumer group %s becomes a classic group", group_id)
        return None

    def offset_commit_error(self, group_id: str, member_id: str, member_epoch: int
                            ) -> ErrorCode | None:
        """None: not a consumer group; else the member check of Kafka's
        ``ConsumerGroup.validateOffsetCommit`` (NONE, UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        return self.membership.validate_offset_commit(group, member_id, member_epoch)

    def offset_fetch_error(self, group_id: str, member_id: str | None, member_epoch: int
                           ) -> ErrorCode:
        """OffsetFetch v9+ of a member (Kafka's ``ConsumerGroup.validateOffsetFetch``)."""
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.none
        return self.membership.validate_offset_fetch(group, member_id, member_epoch)

    def subscribed_topics(self, group_id: str) -> frozenset[str]:
        """The topics the members of a consumer group subscribe to (none: no such group)."""
        group = self._groups.get(group_id)
        if group is None or not group.members:
            return frozenset()
        return frozenset(group.subscription_metadata)

    def expired_offsets(self, holder: ClassicGroup, now_ms: int,
                        retention_ms: int) -> list[TopicPartition]:
        """Kafka's expiry for a consumer group's offsets: those of topics no member subscribes
        to (all of them once it is empty), ``retention_ms`` after their commit (or at their
        explicit expiry)."""
        subscribed = self.subscribed_topics(holder.group_id)
        return [tp for tp, offset in holder.offsets.items() if tp[0] not in subscribed and (
            offset.expire_timestamp if offset.expire_timestamp is not None
            else offset.commit_timestamp + retention_ms) <= now_ms]

    def describe(self, group_id: str) -> tuple[ErrorCode, ConsumerGroup | None, str]:
        """ConsumerGroupDescribe of one group: (error, group, message)."""
        error = self._coordinator._group_status(group_id, allow_empty=True)
        if error is not None:
            return error, None, ""
        group = self._groups.get(group_id)
        if group is None:
            if self._coordinator.group(group_id) is not None:
                return ErrorCode.group_id_not_found, None, \
                    f"Group {group_id} is not a consumer group."
            return ErrorCode.group_id_not_found, None, f"Group {group_id} not found."
        return ErrorCode.none, group, ""

    def list_groups(self) -> list[ConsumerGroupListing]:
        return [ConsumerGroupListing(g.group_id, CONSUMER_PROTOCOL_TYPE, str(g.state),
                                     CONSUMER_GROUP_TYPE) for g in self._groups.values()]

    def delete(self, group_id: str) -> ErrorCode | None:
        """DeleteGroups of a consumer group: None if there is none; NON_EMPTY_GROUP while it
        has members; else it is forgotten (NONE) and the caller deletes its offsets (the
        holder) as a classic group's."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return ErrorCode.non_empty_group
        group.deleted = True
        error = self._persist(group)
        if error != ErrorCode.none:
            group.deleted = False
            return error
        self._groups.pop(group_id)
        return ErrorCode.none

    # ------------------------------------------------------------------ loading
    def on_loaded(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """A ``__consumer_offsets`` partition was replayed: its consumer groups, from their
        records, take over with fresh session deadlines."""
        try:
            groups = replay(records)
        except GroupRecordError as exc:
            logger.error("cannot replay consumer group records: %s", exc)
            return
        now = self._coordinator.clock.monotonic_ms()
        for group_id, group in groups.items():
            session_timeout_ms = self.membership.timeouts(group_id).session_timeout_ms
            for member_id, member in group.members.items():
                group.session_deadlines[member_id] = now + (
                    member.classic.session_timeout_ms if member.classic is not None
                    else session_timeout_ms)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    group.rebalance_deadlines[member_id] = (
                        now + max(0, member.rebalance_timeout_ms), member.member_epoch)
            self._groups[group_id] = group
            self._encoded[group_id] = RecordCache()
            self._stored[group_id] = records_of(group, self._encoded[group_id])
            holder = self._coordinator.group(group_id)
            if holder is not None and not holder.members:
                holder.protocol_type = CONSUMER_PROTOCOL_TYPE
            logger.info("loaded consumer group %s: epoch %d, %d members", group_id,
                        group.group_epoch, len(group.members))
        self._coordinator._wake_timers(self.next_deadline())

    def on_resignation(self, index: int, partition_count: int) -> None:
        """No longer leading ``__consumer_offsets-index``: forget its consumer groups."""
        for group_id in [g for g in self._groups if partition_for(g, partition_count) == index]:
            self._groups.pop(group_id)
            self._stored.pop(group_id, None)
            self._encoded.pop(group_id, None)

    # ---------------------------------------------------------------- migration
    def adopt(self, group: ConsumerGroup, first: list[tuple[bytes, bytes | None]]) -> None:
        """An upgraded group: coordinated here, ``first`` written before its own records."""
        self._groups[group.group_id] = group
        self._prefix[group.group_id] = first

    def deletion_records(self, group_id: str) -> list[tuple[bytes, bytes | None]]:
        """What deletes every record of ``group_id`` written (or queued) so far."""
        return self._prefix.get(group_id, []) + changes(self._stored.get(group_id, {}), {})

    def forget(self, group_id: str) -> None:
        """A downgraded group, whose ``deletion_records`` were written."""
        self._groups.pop(group_id, None)
        self._stored.pop(group_id, None)
        self._encoded.pop(group_id, None)
        self._prefix.pop(group_id, None)

    def _persist(self, group: ConsumerGroup) -> ErrorCode:
        """Append what changed in ``group``'s records since the last write (all tombstones
        once it is deleted), after an upgrade's classic tombstone."""
        before = self._stored.get(group.group_id, {})
        after = {} if group.deleted else records_of(
            group, self._encoded.setdefault(group.group_id, RecordCache()))
        written = self._prefix.get(group.group_id, []) + changes(before, after)
        if not written:
            return ErrorCode.none
        coordinator = self._coordinator
        error = append_error(coordinator.manager.append(
            coordinator.partition_for(group.group_id), written), offsets=False)
        if error != ErrorCode.none:
            logger.warning("cannot write the records of consumer group %s: %s",
                           group.group_id, error.name)
            return error
        self._prefix.pop(group.group_id, None)
        if group.deleted:
            self._stored.pop(group.group_id, None)
            self._encoded.pop(group.group_id, None)
        else:
            self._stored[group.group_id] = after
        return ErrorCode.none

    # ------------------------------------------------------------------- timers
    def tick(self, now: float) -> None:
        for group in list(self._groups.values()):
            self._expire(group, now)

    def next_deadline(self) -> float | None:
        deadlines = (self.membership.next_deadline(g) for g in self._groups.values())
        return min((d for d in deadlines if d is not None), default=None)

    def _expire(self, group: ConsumerGroup, now: float) -> None:
        epoch_before, had_consumer_members = group.group_epoch, _has_consumer_members(group)
        expired = self.membership.expire_due(group, now)
        if expired:
            self._report(group, epoch_before, None, now)
        for member_id in expired:
            logger.info("member %s of consumer group %s expired (group epoch %d)", member_id,
                        group.group_id, group.group_epoch)
        if expired and not (had_consumer_members and self.conversion.maybe_downgrade(
                group, epoch_before) is not None):
            self._persist(group)

    def _report(self, group: ConsumerGroup, epoch_before: int, member_id: str | None,
                now: float) -> None:
        metrics = self._coordinator.metrics
        if metrics is not None:
            metrics.consumer_group_changed(group, epoch_before, member_id, now)

    def _after(self, group: ConsumerGroup) -> None:
        if group.group_id not in self._groups:  # downgraded
            return
        self._expire(group, self._coordinator.clock.monotonic_ms())
        self._coordinator._wake_timers(self.membership.next_deadline(group))


def _has_consumer_members(group: ConsumerGroup) -> bool:
    return any(not m.uses_classic_protocol for m in group.members.values())
