"""The consumer group records of ``__consumer_offsets`` (KIP-848): Kafka's formats, byte for byte.

A consumer group lives in its ``__consumer_offsets`` partition as these records, the latest
value per key winning and a null value (tombstone) deleting. Every key and value starts with an
``int16`` version; keys are Kafka's non-flexible encoding (``string`` = ``int16 length +
UTF-8``), values are version 0 in Kafka's flexible encoding (KIP-482: compact strings and
arrays, ``unsigned varint length + 1``, 0 = null; a ``uuid`` is 16 bytes; each struct ends
with a tagged-field section, written empty, read and skipped)::

    key v3  ConsumerGroupMetadataKey                 group
            value: epoch int32                                    (the group epoch)
    key v4  ConsumerGroupPartitionMetadataKey        group
            value: topics [topicId uuid, topicName string, numPartitions int32,
                           partitionMetadata [partition int32, racks []string]]
                   (racks: those of the partition's replicas, when known)
    key v5  ConsumerGroupMemberMetadataKey           group, memberId
            value: instanceId string?, rackId string?, clientId string, clientHost string,
                   subscribedTopicNames []string, subscribedTopicRegex string?,
                   rebalanceTimeoutMs int32, serverAssignor string?
                   tag 0: classicMemberMetadata? (a classic member's: sessionTimeoutMs
                   int32, supportedProtocols [name string, metadata bytes])
    key v6  ConsumerGroupTargetAssignmentMetadataKey group
            value: assignmentEpoch int32
    key v7  ConsumerGroupTargetAssignmentMemberKey   group, memberId
            value: topicPartitions [topicId uuid, partitions []int32]
    key v8  ConsumerGroupCurrentMemberAssignmentKey  group, memberId
            value: memberEpoch int32, previousMemberEpoch int32, state int8 (0 STABLE,
                   1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS),
                   assignedPartitions [topicId, partitions], partitionsPendingRevocation [...]

``records_of(group)`` is a group's whole state as records (key bytes -> value bytes): the
coordinator writes the difference from what it last wrote (changed values, tombstones for
keys gone), so replaying a partition with ``ConsumerGroupReplay`` rebuilds the same group.
Given the group's ``RecordCache`` it encodes again only what changed since its last call.
Pure functions over bytes; ``GroupRecordError`` for bytes that do not parse.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from strata.broker.group.consumer_group import ConsumerGroup
from strata.broker.group.consumer_group_member import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from strata.broker.group.metadata_codec import GroupRecordError
from strata.broker.group.partition_assignor import TopicMetadata
from strata.protocol.byte_reader import ByteReader

METADATA_KEY: Final = 3
PARTITION_METADATA_KEY: Final = 4
MEMBER_METADATA_KEY: Final = 5
TARGET_ASSIGNMENT_METADATA_KEY: Final = 6
TARGET_ASSIGNMENT_MEMBER_KEY: Final = 7
CURRENT_MEMBER_ASSIGNMENT_KEY: Final = 8
KEY_VERSIONS: Final = frozenset(range(METADATA_KEY, CURRENT_MEMBER_ASSIGNMENT_KEY + 1))
VALUE_VERSION: Final = 0

_STATE_CODES: Final = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1,
                       MemberState.UNRELEASED_PARTITIONS: 2}
_STATES: Final = {code: state for state, code in _STATE_CODES.items()}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I8 = struct.Struct(">b")


# ----------------------------------------------------------------------------- writing
class _Value:
    """A flexible (KIP-482) value body."""

    def __init__(self, version: int | None = VALUE_VERSION) -> None:
        self._out = bytearray() if version is None else bytearray(_I16.pack(version))
        self._tagged = False

    def uvarint(self, value: int) -> None:
        while value >= 0x80:
            self._out.append((value & 0x7F) | 0x80)
            value >>= 7
        self._out.append(value)

    def int8(self, value: int) -> None:
        self._out += _I8.pack(value)

    def int32(self, value: int) -> None:
        self._out += _I32.pack(value)

    def string(self, value: str | None) -> None:
        if value is None:
            self.uvarint(0)
            return
        raw = value.encode()
        self.uvarint(len(raw) + 1)
        self._out += raw

    def topic_id(self, value: uuid.UUID) -> None:
        self._out += value.bytes

    def array(self, count: int) -> None:
        self.uvarint(count + 1)

    def no_tags(self) -> None:
        self.uvarint(0)

    def bytes_(self, value: bytes) -> None:
        self.uvarint(len(value) + 1)
        self._out += value

    def tagged(self, tag: int, body: bytes) -> None:
        """One tagged field as the struct's tag section (which ends the value)."""
        self.uvarint(1)
        self.uvarint(tag)
        self.uvarint(len(body))
        self._out += body
        self._tagged = True

    def assignment(self, assignment: Assignment) -> None:
        self.array(len(assignment))
        for topic_id, partitions in sorted(assignment.items(), key=lambda kv: kv[0].bytes):
            self.topic_id(topic_id)
            self.array(len(partitions))
            for index in sorted(partitions):
                self.int32(index)
            self.no_tags()

    def done(self) -> bytes:
        if not self._tagged:
            self.no_tags()
        return bytes(self._out)


def _key(version: int, *fields: str) -> bytes:
    out = bytearray(_I16.pack(version))
    for value in fields:
        raw = value.encode()
        out += _I16.pack(len(raw)) + raw
    return bytes(out)


def metadata_key(group_id: str) -> bytes:
    return _key(METADATA_KEY, group_id)


@dataclass
class RecordCache:
    """The encoded records of one group's members, partitions and targets, from the last
    ``records_of`` call, beside the values they encode: a value equal to the one cached is
    not encoded again. One per group, owned by the coordinator that writes the group."""

    partitions: tuple[Mapping[str, TopicMetadata], bytes] | None = None
    members: dict[str, tuple[ConsumerGroupMember, bytes, bytes, bytes, bytes]] = field(
        default_factory=dict)
    targets: dict[str, tuple[Assignment, bytes, bytes]] = field(default_factory=dict)


def records_of(group: ConsumerGroup, cache: RecordCache | None = None) -> dict[bytes, bytes]:
    """Every record of ``group``'s current state (see the module docstring). With ``cache``
    (the previous call's), only the members, targets and partition metadata that changed are
    encoded again: a heartbeat that changes nothing costs comparisons, not encodings (Kafka
    writes only the records of what changed; the bytes are the same either way)."""
    cache = cache if cache is not None else RecordCache()
    group_id = group.group_id
    records: dict[bytes, bytes] = {}
    value = _Value()
    value.int32(group.group_epoch)
    records[metadata_key(group_id)] = value.done()
    if cache.partitions is None or cache.partitions[0] != group.subscription_metadata:
        cache.partitions = (dict(group.subscription_metadata),
                            _partition_metadata(group.subscription_metadata))
    records[_key(PARTITION_METADATA_KEY, group_id)] = cache.partitions[1]
    value = _Value()
    value.int32(group.assignment_epoch)
    records[_key(TARGET_ASSIGNMENT_METADATA_KEY, group_id)] = value.done()
    members = {}
    for member_id, member in group.members.items():
        entry = cache.members.get(member_id)
        if entry is None or entry[0] != member:
            entry = (member, _key(MEMBER_METADATA_KEY, group_id, member_id),
                     _member_metadata(member),
                     _key(CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, member_id),
                     _current_assignment(member))
        members[member_id] = entry
        records[entry[1]] = entry[2]
        records[entry[3]] = entry[4]
    targets = {}
    for member_id, target in group.target_assignment.items():
        cached = cache.targets.get(member_id)
        if cached is None or cached[0] != target:
            value = _Value()
            value.assignment(target)
            cached = (target, _key(TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id),
                      value.done())
        targets[member_id] = cached
        records[cached[1]] = cached[2]
    cache.members, cache.targets = members, targets
    return records


def _partition_metadata(subscription: Mapping[str, TopicMetadata]) -> bytes:
    value = _Value()
    topics = sorted(subscription.values(), key=lambda t: t.name)
    value.array(len(topics))
    for topic in topics:
        value.topic_id(topic.topic_id)
        value.string(topic.name)
        value.int32(topic.num_partitions)
        racks = [(i, r) for i, r in enumerate(topic.partition_racks) if r]
        value.array(len(racks))  # partitionMetadata: the racks of each partition's replicas
        for index, partition_racks in racks:
            value.int32(index)
            value.array(len(partition_racks))
            for rack in sorted(partition_racks):
                value.string(rack)
            value.no_tags()
        value.no_tags()
    return value.done()


def _current_assignment(member: ConsumerGroupMember) -> bytes:
    value = _Value()
    value.int32(member.member_epoch)
    value.int32(member.previous_member_epoch)
    value.int8(_STATE_CODES[member.state])
    value.assignment(member.assigned_partitions)
    value.assignment(member.partitions_pending_revocation)
    return value.done()


def _member_metadata(member: ConsumerGroupMember) -> bytes:
    value = _Value()
    value.string(member.instance_id)
    value.string(member.rack_id)
    value.string(member.client_id)
    value.string(member.client_host)
    value.array(len(member.subscribed_topic_names))
    for name in member.subscribed_topic_names:
        value.string(name)
    value.string(member.subscribed_topic_regex)
    value.int32(member.rebalance_timeout_ms)
    value.string(member.server_assignor)
    classic = member.classic
    if classic is not None:
        body = _Value(version=None)
        body.int32(classic.session_timeout_ms)
        body.array(len(classic.supported_protocols))
        for name, metadata in classic.supported_protocols:
            body.string(name)
            body.bytes_(metadata)
            body.no_tags()
        value.tagged(0, body.done())
    return value.done()


def changes(before: Mapping[bytes, bytes], after: Mapping[bytes, bytes]
            ) -> list[tuple[bytes, bytes | None]]:
    """The records turning ``before`` into ``after``: changed values, then tombstones, the
    group's own (``ConsumerGroupMetadataKey``) last, as Kafka deletes a group."""
    written: list[tuple[bytes, bytes | None]] = [
        (k, v) for k, v in after.items() if before.get(k) != v]
    gone = sorted((k for k in before if k not in after), key=lambda k: -key_version(k))
    written.extend((k, None) for k in gone)
    return written


# ----------------------------------------------------------------------------- reading
def _assignment(reader: ByteReader) -> dict[uuid.UUID, frozenset[int]]:
    result: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(reader.array_length()):
        topic_id = reader.uuid()
        partitions = frozenset(reader.int32() for _ in range(reader.array_length()))
        reader.tagged_fields()
        if partitions:
            result[topic_id] = partitions
    return result


def key_version(key: bytes | None) -> int:
    """The version of a ``__consumer_offsets`` key (-1 when unreadable)."""
    return int(_I16.unpack_from(key)[0]) if key is not None and len(key) >= 2 else -1


def _value(data: bytes) -> ByteReader:
    reader = ByteReader(data, GroupRecordError, compact=True)
    version = reader.int16()
    if version != VALUE_VERSION:
        raise GroupRecordError(f"consumer group value version {version} is not known")
    return reader


@dataclass(slots=True)
class _Replayed:
    epoch: int = -1  # -1: no ConsumerGroupMetadata record (yet): not a group
    assignment_epoch: int = 0
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    current: dict[str, tuple[int, int, MemberState, Assignment, Assignment]] = field(
        default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)


class ConsumerGroupReplay:
    """Rebuilds consumer groups from their records, in log order (``apply``), then ``groups``."""

    def __init__(self) -> None:
        self._groups: dict[str, _Replayed] = {}

    def apply(self, key: bytes, value: bytes | None) -> None:
        reader = ByteReader(key, GroupRecordError)
        version = reader.int16()
        if version not in KEY_VERSIONS:
            raise GroupRecordError(f"key version {version} is not a consumer group record")
        group_id = reader.string()
        if version == METADATA_KEY:
            if value is None:  # the group is deleted
                self._groups.pop(group_id, None)
            else:
                self._groups.setdefault(group_id, _Replayed()).epoch = _value(value).int32()
            return
        state = self._groups.setdefault(group_id, _Replayed())
        if version == PARTITION_METADATA_KEY:
            state.topics = {} if value is None else _topics(_value(value))
        elif version == TARGET_ASSIGNMENT_METADATA_KEY:
            state.assignment_epoch = 0 if value is None else _value(value).int32()
        else:
            member_id = reader.string()
            if version == MEMBER_METADATA_KEY:
                if value is None:
                    state.members.pop(member_id, None)
                else:
                    state.members[member_id] = _member(member_id, _value(value))
            elif version == TARGET_ASSIGNMENT_MEMBER_KEY:
                if value is None:
                    state.targets.pop(member_id, None)
                else:
                    state.targets[member_id] = _assignment(_value(value))
            elif value is None:
                state.current.pop(member_id, None)
            else:
                read = _value(value)
                epoch, previous = read.int32(), read.int32()
                member_state = _STATES.get(read.int8(), MemberState.STABLE)
                state.current[member_id] = (epoch, previous, member_state, _assignment(read),
                                            _assignment(read))

    def groups(self) -> dict[str, ConsumerGroup]:
        """The groups as the records left them (members without metadata are dropped)."""
        built: dict[str, ConsumerGroup] = {}
        for group_id, state in self._groups.items():
            if state.epoch < 0:  # records of a deleted group's members, or a torn write
                continue
            group = ConsumerGroup(group_id)
            group.group_epoch = state.epoch
            group.assignment_epoch = state.assignment_epoch
            group.subscription_metadata = dict(state.topics)
            for member_id, member in state.members.items():
                current = state.current.get(member_id)
                if current is not None:
                    epoch, previous, member_state, assigned, revoking = current
                    member = dataclasses.replace(
                        member, state=member_state, member_epoch=epoch,
                        previous_member_epoch=previous, assigned_partitions=assigned,
                        partitions_pending_revocation=revoking)
                group.update_member(member)
            group.target_assignment = {m: a for m, a in state.targets.items()
                                       if m in group.members}
            built[group_id] = group
        return built


def _topics(reader: ByteReader) -> dict[str, TopicMetadata]:
    topics: dict[str, TopicMetadata] = {}
    for _ in range(reader.array_length()):
        topic_id = reader.uuid()
        name = reader.nullable_string() or ""
        partitions = reader.int32()
        racks: dict[int, frozenset[str]] = {}
        for _ in range(reader.array_length()):  # partitionMetadata: the racks of the replicas
            index = reader.int32()
            racks[index] = frozenset(reader.nullable_string() or ""
                                     for _ in range(reader.array_length()))
            reader.tagged_fields()
        reader.tagged_fields()
        topics[name] = TopicMetadata(
            topic_id, name, partitions,
            tuple(racks.get(i, frozenset()) for i in range(partitions)) if racks else ())
    return topics


def _member(member_id: str, reader: ByteReader) -> ConsumerGroupMember:
    instance_id, rack_id = reader.nullable_string(), reader.nullable_string()
    client_id, client_host = reader.nullable_string() or "", reader.nullable_string() or ""
    names = tuple(reader.nullable_string() or "" for _ in range(reader.array_length()))
    regex = reader.nullable_string()
    rebalance_timeout_ms = reader.int32()
    assignor = reader.nullable_string()
    classic = None
    body = reader.tagged_fields().get(0)
    if body is not None:
        tagged = ByteReader(body, GroupRecordError, compact=True)
        session_timeout_ms = tagged.int32()
        protocols = tuple((tagged.nullable_string() or "", _protocol_metadata(tagged))
                          for _ in range(tagged.array_length()))
        classic = ClassicMemberMetadata(session_timeout_ms, protocols)
    return ConsumerGroupMember(member_id, instance_id, rack_id, client_id, client_host,
                               rebalance_timeout_ms, names, regex, assignor, classic=classic)


def _protocol_metadata(reader: ByteReader) -> bytes:
    metadata = reader.nullable_bytes() or b""
    reader.tagged_fields()
    return metadata


def is_consumer_group_key(key: bytes | None) -> bool:
    return key_version(key) in KEY_VERSIONS


def replay(records: Iterable[tuple[bytes, bytes | None]]) -> dict[str, ConsumerGroup]:
    """The groups ``records`` (in log order) leave."""
    replayer = ConsumerGroupReplay()
    for key, value in records:
        replayer.apply(key, value)
    return replayer.groups()
