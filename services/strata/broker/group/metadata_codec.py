"""The records of ``__consumer_offsets``: Kafka's key and value formats, byte for byte.

Every record's key and value start with an ``int16`` version. The key version says what the
record is; the value is null for a tombstone (the compacted topic then drops the key). Integers
are big-endian; ``string`` is ``int16 length + UTF-8`` (-1 = null), ``bytes`` is ``int32
length + bytes``; ``[]`` is an ``int32`` count. Version 4 values are Kafka's flexible encoding
(KIP-482): compact strings/bytes/arrays (unsigned varint length + 1, 0 = null) and a tagged
field section (unsigned varint count, then tag, size, bytes) after each struct; they are read,
never written.

Keys::

    OffsetCommitKey   v0, v1:  group string, topic string, partition int32   (v1 written)
    GroupMetadataKey  v2:      group string

OffsetCommitValue (v3 written; v1 when the commit carried a retention time, OffsetCommit v2-4)::

    v0, v2: offset int64, metadata string, commitTimestamp int64
    v1:     offset int64, metadata string, commitTimestamp int64, expireTimestamp int64
    v3:     offset int64, leaderEpoch int32, metadata string, commitTimestamp int64
    v4:     as v3, flexible (tagged field 0 = topic id, skipped)

GroupMetadataValue (v3 written)::

    protocolType string, generation int32, protocol string?, leader string?,
    currentStateTimestamp int64 (v2+), members [
        memberId string, groupInstanceId string? (v3+), clientId string, clientHost string,
        rebalanceTimeout int32 (v1+; v0: the session timeout), sessionTimeout int32,
        subscription bytes, assignment bytes ]

Pure functions over bytes; ``GroupRecordError`` for bytes that do not parse (a key version
nobody wrote is ``UnknownKey``, skipped by the loader like Kafka skips unknown record types).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from strata.broker.group.classic_group import OffsetAndMetadata
from strata.protocol.byte_reader import ByteReader

OFFSET_COMMIT_KEY_VERSION: Final = 1
GROUP_METADATA_KEY_VERSION: Final = 2
OFFSET_COMMIT_VALUE_VERSION: Final = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE: Final = 1
GROUP_METADATA_VALUE_VERSION: Final = 3
MAX_VALUE_VERSION: Final = 4

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class GroupRecordError(ValueError):
    """A ``__consumer_offsets`` key or value that does not parse."""


# --------------------------------------------------------------------------------- types


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key version this Strata does not know (a newer coordinator's record types)."""

    version: int


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int | None
    members: tuple[MemberMetadataValue, ...]


# --------------------------------------------------------------------------------- writing


class _Writer:
    __slots__ = ("out",)

    def __init__(self, version: int) -> None:
        self.out = bytearray(_I16.pack(version))

    def int16(self, value: int) -> None:
        self.out += _I16.pack(value)

    def int32(self, value: int) -> None:
        self.out += _I32.pack(value)

    def int64(self, value: int) -> None:
        self.out += _I64.pack(value)

    def string(self, value: str | None) -> None:
        if value is None:
            self.out += _I16.pack(-1)
            return
        data = value.encode("utf-8")
        if len(data) > 0x7FFF:
            raise GroupRecordError(f"string of {len(data)} bytes does not fit an int16 length")
        self.out += _I16.pack(len(data))
        self.out += data

    def bytes_(self, value: bytes) -> None:
        self.out += _I32.pack(len(value))
        self.out += value

    def done(self) -> bytes:
        return bytes(self.out)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    w = _Writer(OFFSET_COMMIT_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.int32(partition)
    return w.done()


def group_metadata_key(group: str) -> bytes:
    w = _Writer(GROUP_METADATA_KEY_VERSION)
    w.string(group)
    return w.done()


def offset_commit_value(offset: OffsetAndMetadata) -> bytes:
    """v3, or v1 when the offset has an explicit expire timestamp (Kafka's choice)."""
    if offset.expire_timestamp is not None:
        w = _Writer(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE)
        w.int64(offset.offset)
        w.string(offset.metadata)
        w.int64(offset.commit_timestamp)
        w.int64(offset.expire_timestamp)
        return w.done()
    w = _Writer(OFFSET_COMMIT_VALUE_VERSION)
    w.int64(offset.offset)
    w.int32(offset.leader_epoch)
    w.string(offset.metadata)
    w.int64(offset.commit_timestamp)
    return w.done()


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = _Writer(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.int64(-1 if value.current_state_timestamp is None else value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout_ms)
        w.int32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.done()


# --------------------------------------------------------------------------------- reading


def decode_key(key: bytes | None) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    if key is None:
        raise GroupRecordError("a __consumer_offsets record without a key")
    r = ByteReader(key, GroupRecordError)
    version = r.int16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(r.string())
    return UnknownKey(version)


def _value_reader(value: bytes) -> tuple[ByteReader, int]:
    r = ByteReader(value, GroupRecordError)
    version = r.int16()
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise GroupRecordError(f"unknown value version {version}")
    r.compact = version >= 4
    return r, version


def decode_offset_commit_value(value: bytes | None) -> OffsetAndMetadata | None:
    """None for a tombstone."""
    if value is None:
        return None
    r, version = _value_reader(value)
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else None
    r.tagged_fields()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp,
                             None if expire_timestamp == -1 else expire_timestamp)


def decode_group_metadata_value(value: bytes | None) -> GroupMetadataValue | None:
    """None for a tombstone."""
    if value is None:
        return None
    r, version = _value_reader(value)
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length()):
        member_id = r.string()
        instance = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else None
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tagged_fields()
        members.append(MemberMetadataValue(
            member_id, instance, client_id, client_host,
            session_timeout if rebalance_timeout is None else rebalance_timeout,
            session_timeout, subscription, assignment))
    r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader,
                              None if state_ts == -1 else state_ts, tuple(members))
