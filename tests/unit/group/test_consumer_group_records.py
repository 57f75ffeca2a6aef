"""The consumer group records of ``__consumer_offsets``: Kafka's bytes, and replay."""

from __future__ import annotations

import dataclasses
import uuid

from strata.broker.group.consumer_group import ConsumerGroup
from strata.broker.group.consumer_group_membership import (
    ConsumerGroupConfig,
    ConsumerGroupMembership,
    HeartbeatRequest,
)
from strata.broker.group.consumer_group_records import (
    RecordCache,
    changes,
    is_consumer_group_key,
    key_version,
    metadata_key,
    records_of,
    replay,
)
from strata.broker.group.metadata_codec import group_metadata_key, offset_commit_key
from strata.broker.group.partition_assignor import TopicMetadata
from tests.unit.group.consumer_group_sim import TOPICS, Client


def busy_group() -> ConsumerGroup:
    """Two members, one still revoking: every record type and member state in use."""
    membership = ConsumerGroupMembership(ConsumerGroupConfig())
    group = ConsumerGroup("g")
    Client("m1", "i1").heartbeat(membership, group, 0)
    Client("m2").heartbeat(membership, group, 1)
    membership.heartbeat(group, HeartbeatRequest("m1", 1, rack_id="r1"), 2, TOPICS)
    return group


def test_keys_are_kafkas() -> None:
    assert metadata_key("g") == b"\x00\x03\x00\x01g"
    records = records_of(busy_group())
    assert {k[:2] for k in records} == {bytes([0, v]) for v in range(3, 9)}
    assert b"\x00\x05\x00\x01g\x00\x02m1" in records  # member metadata: group, member id
    assert all(is_consumer_group_key(k) for k in records)
    assert not is_consumer_group_key(offset_commit_key("g", "t", 0))
    assert not is_consumer_group_key(group_metadata_key("g"))


def test_values_are_flexible_version_0() -> None:
    records = records_of(busy_group())
    # ConsumerGroupMetadataValue: version 0, epoch 2, no tagged fields
    assert records[metadata_key("g")] == b"\x00\x00\x00\x00\x00\x02\x00"
    # ConsumerGroupTargetAssignmentMemberValue of m2: one topic, six partitions
    target = records[b"\x00\x07\x00\x01g\x00\x02m2"]
    topic_id = next(iter(TOPICS.values())).topic_id
    assert target[:2] == b"\x00\x00" and target[2] == 2  # version 0, array of 1
    assert target[3:19] == topic_id.bytes and target[19] == 7  # 6 partitions
    assert target.endswith(b"\x00\x00")  # the topic's tags, the value's tags


def test_replay_rebuilds_the_group() -> None:
    group = busy_group()
    again = replay(list(records_of(group).items()))["g"]
    assert (again.group_epoch, again.assignment_epoch) == (group.group_epoch,
                                                           group.assignment_epoch)
    assert again.members == group.members
    assert again.target_assignment == group.target_assignment
    assert again.subscription_metadata == group.subscription_metadata
    assert again.static_members == {"i1": "m1"}
    tp = (uuid.UUID(int=7 << 70), 0)
    assert again.partition_owner(*tp) == group.partition_owner(*tp)


def test_changes_and_tombstones_replay_to_the_latest_state() -> None:
    membership = ConsumerGroupMembership(ConsumerGroupConfig())
    group = ConsumerGroup("g")
    c1, c2 = Client("m1"), Client("m2")
    log: list[tuple[bytes, bytes | None]] = []
    stored: dict[bytes, bytes] = {}

    def write() -> None:
        nonlocal stored
        after = records_of(group)
        log.extend(changes(stored, after))
        stored = after

    for now in range(4):
        c1.heartbeat(membership, group, now)
        write()
        c2.heartbeat(membership, group, now)
        write()
    c2.leave(membership, group)
    write()
    assert any(v is None for _, v in log)  # m2's records deleted
    again = replay(log)["g"]
    assert list(again.members) == ["m1"] and again.members == group.members
    assert again.group_epoch == group.group_epoch == 3
    deleted = changes(stored, {})
    assert deleted[-1] == (metadata_key("g"), None)  # the group's own record goes last
    assert replay([*log, *deleted]) == {}


def test_partition_racks_are_recorded_and_replayed() -> None:
    """``partitionMetadata``: the racks of each partition's replicas, for rack-aware
    assignment after a coordinator failover."""
    group = ConsumerGroup("g")
    group.group_epoch = 1
    racked = TopicMetadata(uuid.UUID(int=7), "t", 3,
                           (frozenset({"r1", "r2"}), frozenset(), frozenset({"r0"})))
    plain = TopicMetadata(uuid.UUID(int=8), "u", 2)
    group.subscription_metadata = {"t": racked, "u": plain}
    replayed = replay(list(records_of(group).items()))["g"]
    assert replayed.subscription_metadata == {"t": racked, "u": plain}


def test_a_record_cache_encodes_only_what_changed_and_gives_the_same_bytes() -> None:
    """The coordinator's ``RecordCache``: each call's records equal an uncached encoding;
    a member that did not change keeps its bytes (the very objects), one that changed
    (its epoch, its assignment) is encoded again; a member gone leaves the cache."""
    membership = ConsumerGroupMembership(ConsumerGroupConfig())
    group = ConsumerGroup("g")
    c1, c2 = Client("m1"), Client("m2")
    cache = RecordCache()
    for now in range(4):
        c1.heartbeat(membership, group, now)
        c2.heartbeat(membership, group, now)
        assert records_of(group, cache) == records_of(group)
    before = records_of(group, cache)
    c1.heartbeat(membership, group, 10)  # nothing changes for anyone
    steady = records_of(group, cache)
    assert steady == before
    assert all(steady[k] is before[k] for k in steady if key_version(k) in (4, 5, 7, 8))
    m1_epoch = group.members["m1"].member_epoch
    group.update_member(dataclasses.replace(group.members["m1"], member_epoch=m1_epoch + 1))
    changed = records_of(group, cache)
    assert changed == records_of(group)
    assert changes(before, changed) == [(k, changed[k]) for k in changed
                                       if k.endswith(b"m1") and key_version(k) == 8]
    c2.leave(membership, group)
    assert records_of(group, cache) == records_of(group)
    assert set(cache.members) == {"m1"}
