"""The ``__consumer_offsets`` record formats: Kafka's byte layouts, round trips, old versions.

The expected bytes are written out field by field from Kafka's message schemas
(``OffsetCommitKey``/``Value``, ``GroupMetadataKey``/``Value``), not produced by the codec.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strata.broker.group.classic_group import OffsetAndMetadata
from strata.broker.group.metadata_codec import (
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecordError,
    MemberMetadataValue,
    OffsetCommitKey,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)


def s(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def cs(text: str | None) -> bytes:
    """Compact string (flexible versions): unsigned varint length + 1."""
    if text is None:
        return b"\x00"
    data = text.encode()
    return bytes([len(data) + 1]) + data


MEMBER = MemberMetadataValue("m-1", "inst-1", "client-1", "/127.0.0.1", 300_000, 10_000,
                             b"\x00\x01sub", b"\x00\x02asg")
GROUP = GroupMetadataValue("consumer", 7, "range", "m-1", 1_700_000_000_000, (MEMBER,))


def test_offset_commit_key_is_kafkas_v1() -> None:
    assert offset_commit_key("g", "orders", 3) == (
        struct.pack(">h", 1) + s("g") + s("orders") + struct.pack(">i", 3))
    assert decode_key(offset_commit_key("g", "orders", 3)) == OffsetCommitKey("g", "orders", 3)
    v0 = struct.pack(">h", 0) + s("g") + s("t") + struct.pack(">i", 0)
    assert decode_key(v0) == OffsetCommitKey("g", "t", 0)


def test_group_metadata_key_is_kafkas_v2() -> None:
    assert group_metadata_key("my-group") == struct.pack(">h", 2) + s("my-group")
    assert decode_key(group_metadata_key("my-group")) == GroupMetadataKey("my-group")


def test_unknown_key_versions_are_reported_not_raised() -> None:
    assert decode_key(struct.pack(">h", 3) + s("g")) == UnknownKey(3)
    with pytest.raises(GroupRecordError):
        decode_key(None)
    with pytest.raises(GroupRecordError):
        decode_key(struct.pack(">h", 1) + s("g"))  # truncated


def test_offset_commit_value_v3() -> None:
    offset = OffsetAndMetadata(42, 5, "meta", 1_700_000_000_123)
    expected = (struct.pack(">h", 3) + struct.pack(">q", 42) + struct.pack(">i", 5) + s("meta")
                + struct.pack(">q", 1_700_000_000_123))
    assert offset_commit_value(offset) == expected
    assert decode_offset_commit_value(expected) == offset


def test_offset_commit_value_v1_when_a_retention_was_given() -> None:
    offset = OffsetAndMetadata(42, -1, "", 1000, 2000)
    expected = struct.pack(">hq", 1, 42) + s("") + struct.pack(">qq", 1000, 2000)
    assert offset_commit_value(offset) == expected
    assert decode_offset_commit_value(expected) == offset


@pytest.mark.parametrize("version", [0, 2])
def test_offset_commit_value_v0_v2(version: int) -> None:
    data = struct.pack(">hq", version, 9) + s("x") + struct.pack(">q", 77)
    assert decode_offset_commit_value(data) == OffsetAndMetadata(9, -1, "x", 77, None)


def test_offset_commit_value_v4_flexible() -> None:
    topic_id_tag = b"\x01" + b"\x00" + b"\x10" + bytes(16)  # one tagged field: tag 0, 16 bytes
    data = (struct.pack(">hqi", 4, 9, 3) + cs("meta") + struct.pack(">q", 77) + topic_id_tag)
    assert decode_offset_commit_value(data) == OffsetAndMetadata(9, 3, "meta", 77, None)


def test_tombstones_decode_to_none() -> None:
    assert decode_offset_commit_value(None) is None
    assert decode_group_metadata_value(None) is None


def test_group_metadata_value_v3() -> None:
    expected = (struct.pack(">h", 3) + s("consumer") + struct.pack(">i", 7) + s("range")
                + s("m-1") + struct.pack(">q", 1_700_000_000_000) + struct.pack(">i", 1)
                + s("m-1") + s("inst-1") + s("client-1") + s("/127.0.0.1")
                + struct.pack(">ii", 300_000, 10_000) + b(b"\x00\x01sub") + b(b"\x00\x02asg"))
    assert group_metadata_value(GROUP) == expected
    assert decode_group_metadata_value(expected) == GROUP


def test_empty_group_metadata_has_null_protocol_and_leader() -> None:
    empty = GroupMetadataValue("consumer", 8, None, None, None, ())
    data = group_metadata_value(empty)
    assert data == (struct.pack(">h", 3) + s("consumer") + struct.pack(">i", 8) + s(None)
                    + s(None) + struct.pack(">qi", -1, 0))
    assert decode_group_metadata_value(data) == empty


def test_group_metadata_value_v0_uses_the_session_timeout_as_rebalance_timeout() -> None:
    data = (struct.pack(">h", 0) + s("consumer") + struct.pack(">i", 1) + s("range") + s("m")
            + struct.pack(">i", 1) + s("m") + s("c") + s("/h") + struct.pack(">i", 10_000)
            + b(b"s") + b(b"a"))
    value = decode_group_metadata_value(data)
    assert value == GroupMetadataValue("consumer", 1, "range", "m", None, (
        MemberMetadataValue("m", None, "c", "/h", 10_000, 10_000, b"s", b"a"),))


def test_group_metadata_value_v2_has_no_instance_ids() -> None:
    data = (struct.pack(">h", 2) + s("consumer") + struct.pack(">i", 1) + s("range") + s("m")
            + struct.pack(">qi", 55, 1) + s("m") + s("c") + s("/h")
            + struct.pack(">ii", 20_000, 10_000) + b(b"s") + b(b"a"))
    value = decode_group_metadata_value(data)
    assert value is not None and value.current_state_timestamp == 55
    assert value.members[0].group_instance_id is None
    assert value.members[0].rebalance_timeout_ms == 20_000


def test_group_metadata_value_v4_flexible() -> None:
    member = (cs("m") + cs(None) + cs("c") + cs("/h") + struct.pack(">ii", 20_000, 10_000)
              + b"\x02s" + b"\x02a" + b"\x00")
    data = (struct.pack(">h", 4) + cs("consumer") + struct.pack(">i", 3) + cs("range")
            + cs("m") + struct.pack(">q", 55) + b"\x02" + member + b"\x00")
    assert decode_group_metadata_value(data) == GroupMetadataValue(
        "consumer", 3, "range", "m", 55,
        (MemberMetadataValue("m", None, "c", "/h", 20_000, 10_000, b"s", b"a"),))


@pytest.mark.parametrize("data", [
    struct.pack(">h", 9) + b"\x00" * 30,             # unknown value version
    struct.pack(">h", 3) + s("consumer"),            # truncated
    struct.pack(">h", 3) + s(None) + b"\x00" * 20,   # null protocol type
    struct.pack(">h", 3) + b"\x00\x02\xff\xfe" + b"\x00" * 20,  # not UTF-8
])
def test_unreadable_values(data: bytes) -> None:
    with pytest.raises(GroupRecordError):
        decode_group_metadata_value(data)


texts = st.text(max_size=40)
blobs = st.binary(max_size=64)
members = st.builds(MemberMetadataValue, texts, st.none() | texts, texts, texts,
                    st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1), blobs, blobs)
groups = st.builds(GroupMetadataValue, texts, st.integers(0, 2**31 - 1), st.none() | texts,
                   st.none() | texts, st.none() | st.integers(0, 2**62),
                   st.lists(members, max_size=4).map(tuple))
offsets = st.builds(OffsetAndMetadata, st.integers(-1, 2**63 - 1), st.integers(-1, 2**31 - 1),
                    texts, st.integers(0, 2**62), st.none() | st.integers(0, 2**62))


@given(groups)
def test_group_metadata_round_trip(value: GroupMetadataValue) -> None:
    assert decode_group_metadata_value(group_metadata_value(value)) == value


@given(offsets)
def test_offset_commit_round_trip(offset: OffsetAndMetadata) -> None:
    decoded = decode_offset_commit_value(offset_commit_value(offset))
    if offset.expire_timestamp is not None:  # v1 has no leader epoch (Kafka's format)
        assert decoded == OffsetAndMetadata(offset.offset, -1, offset.metadata,
                                            offset.commit_timestamp, offset.expire_timestamp)
    else:
        assert decoded == offset


@given(texts, texts, st.integers(0, 2**31 - 1))
def test_key_round_trip(group: str, topic: str, partition: int) -> None:
    assert decode_key(offset_commit_key(group, topic, partition)) == OffsetCommitKey(
        group, topic, partition)
    assert decode_key(group_metadata_key(group)) == GroupMetadataKey(group)
