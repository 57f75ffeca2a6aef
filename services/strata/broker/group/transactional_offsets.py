"""``PendingTransactionalOffsets``: offsets committed inside transactions, not yet decided.

Kafka's ``GroupMetadata.pendingTransactionalOffsetCommits``, kept per producer id for the whole
coordinator. TxnOffsetCommit stores a producer's offsets in ``__consumer_offsets`` as
transactional records (``add``); they stay *pending* — invisible to OffsetFetch, which answers
UNSTABLE_OFFSET_COMMIT for them when asked ``require_stable`` — until the coordinator's marker
for that producer lands on the group's offsets partition (``complete``): COMMIT makes them the
group's committed offsets (the caller applies what ``complete`` returns), ABORT drops them.

A COMMIT does not overwrite a plain OffsetCommit written after the transactional one
(``apply_committed_transaction``: the record later in the log wins, as in Kafka).

Invariants: a producer's later commit of the same (group, partition) replaces its earlier one;
``complete`` only touches groups the ``in_partition`` predicate names (a marker completes the
offsets of the offsets partition it was written to). Pure: no I/O, owned by the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from strata.broker.group.classic_group import ClassicGroup, OffsetAndMetadata, TopicPartition
from strata.broker.group.member import UNKNOWN_MEMBER_ID
from strata.broker.group.state import GroupState
from strata.protocol.error_codes import ErrorCode

GroupOffsets = dict[str, dict[TopicPartition, OffsetAndMetadata]]
"""group id -> (topic, partition) -> offset."""


class PendingTransactionalOffsets:
    __slots__ = ("_by_producer",)

    def __init__(self) -> None:
        self._by_producer: dict[int, GroupOffsets] = {}

    def add(self, producer_id: int, group_id: str,
            offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """``producer_id`` stored ``offsets`` of ``group_id`` inside its open transaction."""
        self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def complete(self, producer_id: int, in_partition: Callable[[str], bool]) -> GroupOffsets:
        """The producer's transaction ended on the offsets partitions ``in_partition`` accepts
        (by group id): forget its pending offsets of those groups and return them (a COMMIT's
        caller makes them the committed offsets; an ABORT's ignores them)."""
        groups = self._by_producer.get(producer_id)
        if not groups:
            return {}
        done = {g: o for g, o in groups.items() if in_partition(g)}
        for group_id in done:
            del groups[group_id]
        if not groups:
            del self._by_producer[producer_id]
        return done

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an undecided transaction holds an offset for ``tp`` of ``group_id``."""
        return any(tp in groups.get(group_id, ()) for groups in self._by_producer.values())

    def has_pending_group(self, group_id: str) -> bool:
        return any(group_id in groups for groups in self._by_producer.values())

    def remove_groups(self, group_ids: Iterable[str]) -> None:
        """Forget the pending offsets of unloaded (or deleted) groups."""
        gone = set(group_ids)
        for producer_id in list(self._by_producer):
            groups = self._by_producer[producer_id]
            for group_id in gone & groups.keys():
                del groups[group_id]
            if not groups:
                del self._by_producer[producer_id]

    def producers(self) -> list[int]:
        return sorted(self._by_producer)


def apply_committed_transaction(committed: dict[TopicPartition, OffsetAndMetadata],
                                offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
    """A COMMIT makes a transaction's ``offsets`` the group's ``committed`` ones, except where
    a plain OffsetCommit written later in ``__consumer_offsets`` replaced it meanwhile: the
    later record wins (Kafka's ``completePendingTxnOffsetCommit``, by ``record_offset``)."""
    for tp, offset in offsets.items():
        current = committed.get(tp)
        if current is None or current.record_offset < offset.record_offset:
            committed[tp] = offset


def txn_offset_commit_error(group: ClassicGroup, member_id: str, group_instance_id: str | None,
                            generation_id: int) -> ErrorCode:
    """Kafka's ``ClassicGroup.validateOffsetCommit`` for a transactional commit."""
    if group.state is GroupState.DEAD:
        return ErrorCode.coordinator_not_available
    if generation_id < 0 and group.state is GroupState.EMPTY:
        return ErrorCode.none  # the group only stores offsets
    if generation_id < 0 and member_id == UNKNOWN_MEMBER_ID:
        return ErrorCode.none  # a client before TxnOffsetCommit v3 sends no member data
    if group_instance_id is not None:
        static = group.static_member_id(group_instance_id)
        if static is not None and static != member_id:
            return ErrorCode.fenced_instance_id
    if not group.has(member_id):
        return ErrorCode.unknown_member_id
    if generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    return ErrorCode.none
