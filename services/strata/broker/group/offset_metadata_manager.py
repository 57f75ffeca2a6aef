"""``OffsetMetadataManager``: the committed offsets of the groups a coordinator holds.

Kafka's ``OffsetMetadataManager`` (the offsets half of its group coordinator), here the base
class of ``coordinator.GroupCoordinator`` (as ``rebalance.GroupRebalance`` is the base of
``membership.GroupMembership``): the entry points of the offset APIs and of offset expiry.
Owns:

* OffsetCommit (``commit_offsets``): the commit is stored in ``__consumer_offsets``, then
  cached in the group (``ClassicGroup.offsets``) only if the append succeeded; an offset whose
  metadata is over ``offset.metadata.max.bytes`` is OFFSET_METADATA_TOO_LARGE and not stored;
* TxnOffsetCommit (``commit_transactional_offsets``): stored as the producer's transactional
  records and held pending per producer (``transactional_offsets``) until its marker lands
  (``complete_transaction``, from WriteTxnMarkers): COMMIT makes them committed, ABORT drops
  them;
* OffsetFetch (``fetch_offsets``, ``has_pending_transactional_offsets``) and OffsetDelete;
* expiry and cleanup: offsets past ``offsets.retention.minutes`` (``cleanup_group_metadata``,
  run by the server every ``offsets.retention.check.interval.ms``) and offsets of deleted
  topics (``on_partitions_deleted``) are removed with tombstones; an Empty group left without
  offsets (pending transactional ones count) becomes Dead and is forgotten (``_cleanup``,
  Kafka's ``cleanupGroupMetadata``; group deletion uses it too).

A write is acknowledged only once ``replicated``: the handlers of OffsetCommit, TxnOffsetCommit,
OffsetDelete, DeleteGroups, SyncGroup and ConsumerGroupHeartbeat, and OffsetFetch before it
shows what writes left, await the group's ``__consumer_offsets`` partition reaching its whole
ISR (``GroupMetadataManager.replicated``) and answer the write's error if it does not.

Every entry point first passes the coordinator's checks (``_group_status``: group id,
coordinator active, partition loaded and led here). The groups map, ownership, loading and
timers are the subclass's; it provides the methods declared below. Event-loop only; no locks.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from strata.broker.coordinator_partition import partition_for
from strata.broker.group.classic_group import ClassicGroup, OffsetAndMetadata, TopicPartition
from strata.broker.group.membership import GroupMembership
from strata.broker.group.metadata_manager import (
    GroupMetadataManager,
    OffsetsTopicConfig,
    append_error,
)
from strata.broker.group.state import GroupState
from strata.broker.group.transactional_offsets import (
    PendingTransactionalOffsets,
    apply_committed_transaction,
    txn_offset_commit_error,
)
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import Clock

logger = logging.getLogger(__name__)

K = TypeVar("K")


class OffsetMetadataManager:
    """See the module docstring. The attributes are set by ``GroupCoordinator.__init__``."""

    clock: Clock
    offsets_config: OffsetsTopicConfig
    manager: GroupMetadataManager
    membership: GroupMembership
    pending_txn_offsets: PendingTransactionalOffsets
    _groups: dict[str, ClassicGroup]
    _active: bool

    # The coordinator's, used here.
    def partition_count(self) -> int:
        raise NotImplementedError

    def partition_for(self, group_id: str) -> int:
        raise NotImplementedError

    def _group_status(self, group_id: str | None, *, allow_empty: bool) -> ErrorCode | None:
        raise NotImplementedError

    def _new_group(self, group_id: str) -> ClassicGroup:
        raise NotImplementedError

    def _after(self, group: ClassicGroup) -> None:
        raise NotImplementedError

    def _expired_offsets(self, group: ClassicGroup, now_ms: int,
                         retention_ms: int) -> list[TopicPartition]:
        """The group's offsets past retention (the coordinator adds the consumer groups')."""
        return group.expired_offsets(now_ms, retention_ms)

    async def replicated(self, group_id: str) -> ErrorCode:
        """Until everything written so far to ``group_id``'s partition is on its whole ISR,
        at most ``offsets.commit.timeout.ms``: NONE, or the raw error of the wait."""
        return await self.manager.replicated(self.partition_for(group_id),
                                             self.offsets_config.commit_timeout_ms)

    async def acknowledged_error(self, group_id: str, error: ErrorCode, *,
                                 offsets: bool) -> ErrorCode:
        """The answer of a write (or a read) of ``group_id``, once ``replicated``: an error
        stays; NONE becomes the wait's error as an append's when it fails (``append_error``:
        COORDINATOR_NOT_AVAILABLE on a timeout, NOT_COORDINATOR when the leadership moved)."""
        if error != ErrorCode.none:
            return error
        waited = await self.replicated(group_id)
        return error if waited == ErrorCode.none else append_error(waited, offsets=offsets)

    async def acknowledged(self, group_id: str, errors: Mapping[K, ErrorCode], *,
                           offsets: bool) -> dict[K, ErrorCode]:
        """``acknowledged_error`` for the answers of one write, one per key."""
        if ErrorCode.none not in errors.values():
            return dict(errors)
        failed = await self.acknowledged_error(group_id, ErrorCode.none, offsets=offsets)
        return {key: failed if error == ErrorCode.none else error
                for key, error in errors.items()}

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                       *, unknown_group: ErrorCode = ErrorCode.illegal_generation
                       ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit of partitions already known to exist; one error per partition. A
        member's commit (generation >= 0) to a group that does not exist is ``unknown_group``
        (OffsetCommit v9+: GROUP_ID_NOT_FOUND; before: ILLEGAL_GENERATION, Kafka's rule)."""
        error = self._group_status(group_id, allow_empty=True)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:  # a member of a generation that is gone
                return dict.fromkeys(offsets, unknown_group)
            logger.info("creating simple consumer group %s by an offset commit", group_id)
            group = self._new_group(group_id)
        error = self.membership.validate_offset_commit(group, member_id, group_instance_id,
                                                       generation_id)
        self._after(group)
        if error != ErrorCode.none:
            return dict.fromkeys(offsets, error)
        limit = self.offsets_config.metadata_max_bytes
        valid = {tp: o for tp, o in offsets.items() if len(o.metadata) <= limit}
        status = ErrorCode.none
        if valid:
            status, position = self.manager.store_offsets_at(self.partition_for(group_id),
                                                             group_id, valid)
            if status == ErrorCode.none:
                group.offsets.update(at_record(valid, position))
        return {tp: status if tp in valid else ErrorCode.offset_metadata_too_large
                for tp in offsets}

    def commit_transactional_offsets(
            self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
            group_instance_id: str | None, generation_id: int,
            offsets: Mapping[TopicPartition, OffsetAndMetadata],
            verification_guard: int | None = None) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: store ``offsets`` as ``producer_id``'s transactional records and
        hold them pending until its marker (``complete_transaction``). Kafka's checks
        (``ClassicGroup.validateOffsetCommit`` for a transactional commit): a Dead group is
        COORDINATOR_NOT_AVAILABLE; generation < 0 on an Empty group, or no member id and no
        generation (clients before v3), commit without membership; otherwise the member must
        exist (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) in the current generation
        (ILLEGAL_GENERATION). ``verification_guard``: the KIP-890 guard the append needs
        (``Log.append_as_leader``; None: verification not in use)."""
        error = self._group_status(group_id, allow_empty=False)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self._groups.get(group_id) or self._new_group(group_id)
        error = txn_offset_commit_error(group, member_id, group_instance_id, generation_id)
        if error != ErrorCode.none:
            return dict.fromkeys(offsets, error)
        limit = self.offsets_config.metadata_max_bytes
        valid = {tp: o for tp, o in offsets.items() if len(o.metadata) <= limit}
        status = ErrorCode.none
        if valid:
            status, position = self.manager.store_offsets_at(
                self.partition_for(group_id), group_id, valid, producer_id, producer_epoch,
                verification_guard)
            if status == ErrorCode.none:
                self.pending_txn_offsets.add(producer_id, group_id, at_record(valid, position))
        return {tp: status if tp in valid else ErrorCode.offset_metadata_too_large
                for tp in offsets}

    def complete_transaction(self, producer_id: int, partitions: Iterable[int],
                             commit: bool) -> None:
        """A marker of ``producer_id`` landed on these ``__consumer_offsets`` partitions: its
        pending offsets of their groups become committed (COMMIT) or are dropped (ABORT)."""
        indexes = set(partitions)
        count = self.partition_count()
        done = self.pending_txn_offsets.complete(
            producer_id, lambda group_id: partition_for(group_id, count) in indexes)
        if not commit:
            return
        for group_id, offsets in done.items():
            group = self._groups.get(group_id)
            if group is not None and group.state is not GroupState.DEAD:
                apply_committed_transaction(group.offsets, offsets)

    def has_pending_transactional_offsets(self, group_id: str, tp: TopicPartition) -> bool:
        """OffsetFetch ``require_stable``: an undecided transaction holds ``tp``'s offset."""
        return self.pending_txn_offsets.has_pending(group_id, tp)

    def fetch_offsets(self, group_id: str, partitions: Sequence[TopicPartition] | None
                      ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (None: nothing committed); ``partitions`` None means all."""
        error = self._group_status(group_id, allow_empty=True)
        if error is not None:
            return error, {}
        group = self._groups.get(group_id)
        committed = group.offsets if group is not None and group.state is not GroupState.DEAD \
            else {}
        if partitions is None:
            return ErrorCode.none, dict(committed)
        return ErrorCode.none, {tp: committed.get(tp) for tp in partitions}

    def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                       ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: (group error, per-partition errors). A consumer group still using a
        topic keeps its offsets (GROUP_SUBSCRIBED_TO_TOPIC); any other non-empty group refuses
        (NON_EMPTY_GROUP)."""
        error = self._group_status(group_id, allow_empty=False)
        if error is not None:
            return error, {}
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found, {}
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.state is GroupState.EMPTY:
            eligible = list(partitions)
        elif group.is_consumer_group:
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to_topic(tp[0]):
                    errors[tp] = ErrorCode.group_subscribed_to_topic
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.non_empty_group, {}
        if eligible:
            removed = self._cleanup(group, group.remove_offsets(eligible))
            logger.info("deleted %d offsets of group %s", removed, group_id)
            errors.update(dict.fromkeys(eligible, ErrorCode.none))
        return ErrorCode.none, errors

    def cleanup_group_metadata(self) -> int:
        """Expire offsets past ``offsets.retention.minutes``; Empty groups left without
        offsets become Dead and are forgotten (tombstones written). Returns offsets removed."""
        if not self._active:
            return 0
        now = self.clock.milliseconds()
        retention = self.offsets_config.retention_ms
        removed = 0
        for group in list(self._groups.values()):
            expired = group.remove_offsets(self._expired_offsets(group, now, retention))
            removed += self._cleanup(group, expired)
        if removed:
            logger.info("removed %d expired offsets", removed)
        return removed

    def on_partitions_deleted(self, partitions: Sequence[TopicPartition]) -> int:
        """DeleteTopics removed ``partitions``: every group forgets its offsets of them
        (tombstones written; Kafka's ``onPartitionsDeleted``), so a topic created later under
        the same name starts without stale commits. Returns the offsets removed."""
        if not self._active or not partitions:
            return 0
        removed = 0
        for group in list(self._groups.values()):
            removed += self._cleanup(group, group.remove_offsets(partitions))
        if removed:
            logger.info("removed %d offsets of deleted partitions", removed)
        return removed

    def _cleanup(self, group: ClassicGroup, removed: list[TopicPartition]) -> int:
        """Kafka's ``cleanupGroupMetadata`` for one group: tombstones for ``removed`` and, if the
        group is Empty with no offsets left (pending transactional ones count), for the group,
        which becomes Dead."""
        dead = (group.state is GroupState.EMPTY and not group.has_offsets()
                and not self.pending_txn_offsets.has_pending_group(group.group_id))
        if dead:
            group.transition_to(GroupState.DEAD)
            self._groups.pop(group.group_id, None)
            logger.info("group %s is dead (generation %d)", group.group_id, group.generation_id)
        if removed or dead:
            error = self.manager.write_tombstones(self.partition_for(group.group_id),
                                                  group.group_id, removed, group=dead)
            if error != ErrorCode.none:
                logger.warning("cannot write tombstones of group %s: %s", group.group_id,
                               error.name)
        return len(removed)


def at_record(offsets: Mapping[TopicPartition, OffsetAndMetadata],
              position: int) -> dict[TopicPartition, OffsetAndMetadata]:
    """``offsets`` stamped with the offset of the ``__consumer_offsets`` batch holding them."""
    return {tp: dataclasses.replace(o, record_offset=position) for tp, o in offsets.items()}
