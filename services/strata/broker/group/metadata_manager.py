"""``GroupMetadataManager``: the ``__consumer_offsets`` topic — where a group lives, writes, replay.

Kafka's ``GroupMetadataManager``, minus the in-memory cache (the coordinator holds the groups).
Owns:

* partitioning: a group belongs to partition ``coordinator_partition.partition_for(group_id,
  partitions)`` (Kafka's rule; Python's ``hash()`` is salted per process), and its coordinator
  is that partition's leader;
* writes: offset commits, group metadata and tombstones as Kafka-shaped records
  (``group_metadata_codec``), one batch per call, appended as the partition's leader at once
  (the coordinator's state follows each append); what was appended is *acknowledged* only
  after ``replicated``: the partition's HW reached the log end as of the call, i.e. every
  write so far is on the whole ISR (Kafka's ``offsets.commit.required.acks`` -1 within
  ``offsets.commit.timeout.ms``). The coordinator's handlers await it before they answer a
  write — or a read of state that writes made — so a client never sees group state that a
  coordinator's failover could take back;
* replay: ``load_partition`` reads a partition from its log start to its log end and
  rebuilds the groups and offsets it holds, the latest record per key winning and tombstones
  deleting — what a new coordinator does when it becomes the partition's leader. Offsets in
  transactional batches (TxnOffsetCommit) are held per producer until that producer's marker
  in the log: COMMIT applies them (unless a plain commit later in the log replaced them), ABORT
  drops them, and those without a marker yet come back
  as ``LoadedPartition.pending`` (Kafka's ``loadGroupsAndOffsets``). The consumer groups'
  records (KIP-848) come back as they are, in log order, for ``consumer_group_records``.

The topic itself (``cleanup.policy=compact``, ``offsets.topic.num.partitions`` partitions) is
registered in the ``TopicStore`` like any topic, created on first use by the coordinator.
Event-loop only: appends and reads touch the page cache only; ``load_partition`` yields to the
loop between chunks so a long replay does not stall other clients.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from strata.broker.group.classic_group import ClassicGroup, OffsetAndMetadata, TopicPartition
from strata.broker.group.consumer_group_records import is_consumer_group_key
from strata.broker.group.member import GroupMember
from strata.broker.group.metadata_codec import (
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecordError,
    MemberMetadataValue,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from strata.broker.group.transactional_offsets import apply_committed_transaction
from strata.broker.replication.partition import PartitionError
from strata.broker.replication.replica_manager import ReplicaManager
from strata.protocol.error_codes import ErrorCode
from strata.storage import record_batch as rb
from strata.storage.clock import Clock
from strata.storage.errors import InvalidRecordError, OffsetOutOfRangeError, StorageError
from strata.storage.log_transactions import AppendOrigin
from strata.storage.records import (
    EndTransactionMarker,
    RecordSpec,
    build_batch,
    iter_records,
    read_end_transaction_marker,
)

logger = logging.getLogger(__name__)

OFFSETS_TOPIC: Final = "__consumer_offsets"
LOAD_BUFFER_BYTES: Final = 5 * 1024 * 1024  # Kafka's offsets.load.buffer.size
REQUIRED_ACKS: Final = -1  # Kafka's offsets.commit.required.acks


@dataclass(frozen=True, slots=True)
class OffsetsTopicConfig:
    """The broker's ``offsets.*`` settings (Kafka's defaults)."""

    num_partitions: int = 50
    replication_factor: int = 3
    segment_bytes: int = 100 * 1024 * 1024
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    metadata_max_bytes: int = 4096
    commit_timeout_ms: int = 5000

    def topic_configs(self) -> dict[str, str]:
        """The topic's configs (Kafka's ``offsetsTopicConfigs``)."""
        return {"cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes),
                "compression.type": "producer"}


@dataclass(slots=True)
class LoadedPartition:
    """What one partition's replay found."""

    groups: dict[str, ClassicGroup] = field(default_factory=dict)
    records: int = 0
    # producer id -> group id -> offsets of transactions with no marker in the log yet
    pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = field(
        default_factory=dict)
    # the consumer groups' records (KIP-848, ``consumer_group_records``), in log order
    consumer_records: list[tuple[bytes, bytes | None]] = field(default_factory=list)


def append_error(error: int, *, offsets: bool) -> ErrorCode:
    """An append's error as a coordinator answers it (Kafka's conversions): the partition
    missing or short of replicas is COORDINATOR_NOT_AVAILABLE, no longer leading or a storage
    error is NOT_COORDINATOR, too large is INVALID_COMMIT_OFFSET_SIZE (commits) or
    UNKNOWN_SERVER_ERROR (group metadata)."""
    code = ErrorCode(error)
    if code in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
                ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large,
                ErrorCode.invalid_fetch_size):
        return ErrorCode.invalid_commit_offset_size if offsets else ErrorCode.unknown_server_error
    return code


def group_metadata_record(group: ClassicGroup, assignment: Mapping[str, bytes]) -> bytes:
    """The value of a group's metadata record (Kafka's ``groupMetadataValue``)."""
    protocol = group.protocol_name
    members = tuple(
        MemberMetadataValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout_ms, m.session_timeout_ms,
                            m.metadata(protocol) if protocol is not None else b"",
                            assignment.get(m.member_id, b""))
        for m in group.members.values())
    return group_metadata_value(GroupMetadataValue(
        group.protocol_type or "", group.generation_id, protocol, group.leader_id,
        group.current_state_timestamp, members))


class GroupMetadataManager:
    """Reads and writes ``__consumer_offsets`` through the local partition leaders."""

    def __init__(self, replica_manager: ReplicaManager, clock: Clock) -> None:
        self.replica_manager = replica_manager
        self.clock = clock

    # ------------------------------------------------------------------ writes
    def append(self, partition: int, records: Iterable[tuple[bytes, bytes | None]],
               producer_id: int = -1, producer_epoch: int = -1,
               verification_guard: int | None = None) -> int:
        """Append ``(key, value)`` records as one batch; Kafka's error code (0 = done). With
        a ``producer_id`` the batch is transactional (TxnOffsetCommit), appended as the
        coordinator's (the epoch is checked, no sequence: Kafka writes sequence 0)."""
        return self.append_at(partition, records, producer_id, producer_epoch,
                              verification_guard)[0]

    def append_at(self, partition: int, records: Iterable[tuple[bytes, bytes | None]],
                  producer_id: int = -1, producer_epoch: int = -1,
                  verification_guard: int | None = None) -> tuple[int, int]:
        """``append``, with the offset of the batch in the log (-1 when nothing was written)."""
        hosted = self.replica_manager.get_partition(OFFSETS_TOPIC, partition)
        if hosted is None:
            return ErrorCode.unknown_topic_or_partition, -1
        now = self.clock.milliseconds()
        specs = [RecordSpec(key=k, value=v, timestamp=now) for k, v in records]
        if not specs:
            return ErrorCode.none, -1
        try:
            if producer_id >= 0:
                info = hosted.append_records_to_leader(
                    build_batch(specs, producer_id=producer_id, producer_epoch=producer_epoch,
                                base_sequence=0, is_transactional=True),
                    REQUIRED_ACKS, AppendOrigin.COORDINATOR, verification_guard)
            else:
                info = hosted.append_records_to_leader(build_batch(specs), REQUIRED_ACKS)
        except (StorageError, PartitionError) as exc:
            logger.warning("append to %s-%d failed: %s", OFFSETS_TOPIC, partition, exc)
            return exc.error_code, -1
        self.replica_manager.fetch_purgatory.notify((OFFSETS_TOPIC, partition))
        return ErrorCode.none, info.first_offset

    async def replicated(self, partition: int, timeout_ms: int) -> ErrorCode:
        """Until every record in ``partition``'s log as of now is on its whole ISR (the HW
        reached this log end), at most ``timeout_ms``: the raw error (``append_error``
        converts it) — NONE, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, ..."""
        hosted = self.replica_manager.get_partition(OFFSETS_TOPIC, partition)
        if hosted is None:
            return ErrorCode.not_leader_or_follower
        required = hosted.log.log_end_offset
        if hosted.is_leader and hosted.high_watermark >= required:
            return ErrorCode.none
        return ErrorCode(await self.replica_manager.wait_for_replication(
            (OFFSETS_TOPIC, partition), required, timeout_ms))

    def store_group(self, partition: int, group: ClassicGroup,
                    assignment: Mapping[str, bytes]) -> ErrorCode:
        record = (group_metadata_key(group.group_id), group_metadata_record(group, assignment))
        return append_error(self.append(partition, [record]), offsets=False)

    def store_offsets(self, partition: int, group_id: str,
                      offsets: Mapping[TopicPartition, OffsetAndMetadata],
                      producer_id: int = -1, producer_epoch: int = -1,
                      verification_guard: int | None = None) -> ErrorCode:
        return self.store_offsets_at(partition, group_id, offsets, producer_id,
                                     producer_epoch, verification_guard)[0]

    def store_offsets_at(self, partition: int, group_id: str,
                         offsets: Mapping[TopicPartition, OffsetAndMetadata],
                         producer_id: int = -1, producer_epoch: int = -1,
                         verification_guard: int | None = None) -> tuple[ErrorCode, int]:
        """``store_offsets``, with the offset of their batch in ``__consumer_offsets``."""
        records = [(offset_commit_key(group_id, topic, index), offset_commit_value(offset))
                   for (topic, index), offset in offsets.items()]
        error, position = self.append_at(partition, records, producer_id, producer_epoch,
                                         verification_guard)
        return append_error(error, offsets=True), position

    def write_tombstones(self, partition: int, group_id: str,
                         offsets: Iterable[TopicPartition], *, group: bool) -> ErrorCode:
        """Tombstones for ``offsets`` of ``group_id`` and, with ``group``, its metadata."""
        records: list[tuple[bytes, bytes | None]] = [
            (offset_commit_key(group_id, topic, index), None) for topic, index in offsets]
        if group:
            records.append((group_metadata_key(group_id), None))
        return append_error(self.append(partition, records), offsets=False)

    # ------------------------------------------------------------------ replay
    async def load_partition(self, partition: int) -> LoadedPartition:
        """Replay one partition into groups (see the module docstring); offsets without group
        metadata become Empty groups without a protocol type (``assign()`` consumers)."""
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        metadata: dict[str, GroupMetadataValue] = {}
        loaded = LoadedPartition()
        pending = loaded.pending
        async for key_bytes, value, producer_id, marker, position in self._read(partition):
            if marker is not None:  # the end of producer_id's transaction
                decided = pending.pop(producer_id, {})
                if not marker.is_abort:
                    for group_id, group_offsets in decided.items():
                        apply_committed_transaction(offsets.setdefault(group_id, {}),
                                                    group_offsets)
                continue
            loaded.records += 1
            try:
                key = decode_key(key_bytes)
                if isinstance(key, OffsetCommitKey):
                    committed = decode_offset_commit_value(value)
                    if committed is not None:
                        committed = dataclasses.replace(committed, record_offset=position)
                    tp = (key.topic, key.partition)
                    if producer_id >= 0:
                        if committed is not None:
                            pending.setdefault(producer_id, {}).setdefault(
                                key.group, {})[tp] = committed
                        continue
                    group_offsets = offsets.setdefault(key.group, {})
                    if committed is None:
                        group_offsets.pop(tp, None)
                    else:
                        group_offsets[tp] = committed
                elif is_consumer_group_key(key_bytes) and key_bytes is not None:
                    loaded.consumer_records.append((key_bytes, value))
                elif isinstance(key, GroupMetadataKey):
                    described = decode_group_metadata_value(value)
                    if described is None:
                        metadata.pop(key.group, None)
                    else:
                        metadata[key.group] = described
            except GroupRecordError as exc:
                logger.warning("skipping an unreadable record in %s-%d: %s", OFFSETS_TOPIC,
                               partition, exc)
        for group_id, described in metadata.items():
            group = self._group_from_record(group_id, described)
            group.offsets = offsets.pop(group_id, {})
            loaded.groups[group_id] = group
        for groups in pending.values():  # a group with only pending offsets exists too
            for group_id in groups:
                offsets.setdefault(group_id, {})
        for group_id, group_offsets in offsets.items():
            if group_offsets or any(group_id in g for g in pending.values()):
                group = ClassicGroup(group_id, self.clock)
                group.offsets = group_offsets
                loaded.groups[group_id] = group
        return loaded

    def _group_from_record(self, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        protocol = value.protocol
        members = [
            GroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                        m.rebalance_timeout_ms, m.session_timeout_ms, value.protocol_type,
                        ((protocol, m.subscription),) if protocol is not None else (),
                        m.assignment)
            for m in value.members]
        return ClassicGroup.load(group_id, self.clock, protocol_type=value.protocol_type,
                                 generation_id=value.generation, protocol_name=protocol,
                                 leader_id=value.leader,
                                 current_state_timestamp=value.current_state_timestamp,
                                 members=members)

    async def _read(self, partition: int) -> AsyncIterator[
            tuple[bytes | None, bytes | None, int, EndTransactionMarker | None, int]]:
        """Yield ``(key, value, producer id of a transactional batch or -1, None, batch
        offset)`` of every data record, and ``(None, None, producer id, marker, batch offset)``
        of every transaction marker,
        from the log start to the log end: a new
        leader's whole log is the partition's truth (followers truncate to it, never it to
        them), and its HW may lag the records its predecessor acknowledged until the followers'
        next fetch (Kafka's ``loadGroupsAndOffsets`` reads to the log end too)."""
        hosted = self.replica_manager.get_partition(OFFSETS_TOPIC, partition)
        if hosted is None:
            return
        log = hosted.log
        offset = log.log_start_offset
        while True:
            end = log.log_end_offset
            if offset >= end:
                return
            try:
                data = log.read(offset, LOAD_BUFFER_BYTES, end, True).read_bytes()
            except OffsetOutOfRangeError:  # retention or DeleteRecords moved the start
                offset = log.log_start_offset
                continue
            pos = 0
            while len(data) - pos >= rb.HEADER_SIZE:
                header = rb.parse_header(data, pos)
                if len(data) - pos < header.size:
                    break  # the read ended inside this batch: read it again whole
                if not header.is_control:
                    txn = header.producer_id if header.is_transactional else -1
                    for record in iter_records(data, pos, verify_crc=False):
                        yield record.key, record.value, txn, None, header.base_offset
                elif header.has_producer_id:
                    try:
                        marker = read_end_transaction_marker(data, pos)
                    except InvalidRecordError:
                        marker = None
                    if marker is not None:
                        yield None, None, header.producer_id, marker, header.base_offset
                offset = header.next_offset
                pos += header.size
            if pos == 0:
                logger.error("cannot read %s-%d at offset %d: no whole batch", OFFSETS_TOPIC,
                             partition, offset)
                return
            await asyncio.sleep(0)
