"""``__consumer_offsets``: Kafka's partitioning, and replaying what was written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.coordinator_partition import java_string_hashcode, partition_for
from strata.broker.group import metadata_manager as gmm
from strata.broker.group.classic_group import ClassicGroup, OffsetAndMetadata
from strata.broker.group.member import GroupMember
from strata.broker.group.metadata_codec import group_metadata_key, offset_commit_key
from strata.broker.group.metadata_manager import (
    OFFSETS_TOPIC,
    GroupMetadataManager,
    append_error,
)
from strata.broker.group.state import GroupState
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock

from .helpers import consumer_subscription, replica_manager

# (string, Java's String.hashCode, partition of 50) — taken from a JVM (OpenJDK 17).
JAVA_VECTORS = [
    ("", 0, 0), ("a", 97, 47), ("my-group", -1906497762, 12),
    ("console-consumer-12345", 158455506, 6), ("groupé", -1237460406, 6),
    ("g\U0001F600x", 58028462, 12),  # a surrogate pair: two UTF-16 code units
    ("polygenelubricants", -2147483648, 0),  # Integer.MIN_VALUE: Kafka's abs() gives 0
    ("spring-app", 1360601697, 47),
]


@pytest.mark.parametrize(("text", "hashcode", "partition"), JAVA_VECTORS)
def test_partitioning_matches_java(text: str, hashcode: int, partition: int) -> None:
    assert java_string_hashcode(text) == hashcode
    assert partition_for(text, 50) == partition


def test_append_errors_as_a_coordinator_answers_them() -> None:
    assert append_error(3, offsets=True) == ErrorCode.coordinator_not_available
    assert append_error(6, offsets=True) == ErrorCode.not_coordinator
    assert append_error(10, offsets=True) == ErrorCode.invalid_commit_offset_size
    assert append_error(10, offsets=False) == ErrorCode.unknown_server_error
    assert append_error(0, offsets=False) == ErrorCode.none


@pytest.fixture
def manager(tmp_path: Path) -> Any:
    clock = ManualClock()
    rm = replica_manager(tmp_path, (OFFSETS_TOPIC, 1), clock=clock,
                         log_cleanup_policy="compact")
    yield GroupMetadataManager(rm, clock)
    rm.log_manager.shutdown()


def stable_group(clock: ManualClock) -> ClassicGroup:
    group = ClassicGroup("g", clock)
    member = GroupMember("m-1", "host-1", "client", "/h", 30_000, 10_000, "consumer",
                         (("range", consumer_subscription("t")),))
    group.add(member)
    group.transition_to(GroupState.PREPARING_REBALANCE)
    group.init_next_generation()
    return group


async def test_replay_keeps_the_latest_record_per_key(manager: GroupMetadataManager) -> None:
    clock = manager.clock
    assert isinstance(clock, ManualClock)
    group = stable_group(clock)
    assert manager.store_group(0, group, {"m-1": b"assigned"}) == ErrorCode.none
    for offset in (1, 2, 3):
        assert manager.store_offsets(0, "g", {("t", 0): OffsetAndMetadata(offset, -1, "", 5),
                                              ("t", 1): OffsetAndMetadata(9, 2, "x", 5)}) == 0
    assert manager.store_offsets(0, "simple", {("t", 0): OffsetAndMetadata(4, -1, "", 5)}) == 0
    assert manager.store_offsets(0, "dead", {("t", 0): OffsetAndMetadata(4, -1, "", 5)}) == 0
    assert manager.write_tombstones(0, "g", [("t", 1)], group=False) == ErrorCode.none
    assert manager.write_tombstones(0, "dead", [("t", 0)], group=True) == ErrorCode.none
    assert manager.append(0, [(b"\x00\x07unknown", b"v")]) == ErrorCode.none  # skipped
    assert manager.append(0, [(offset_commit_key("g", "t", 5), b"\x00")]) == 0  # unreadable

    loaded = await manager.load_partition(0)
    assert sorted(loaded.groups) == ["g", "simple"]
    g = loaded.groups["g"]
    assert g.state is GroupState.STABLE and g.generation_id == 1 and g.leader_id == "m-1"
    assert g.get("m-1").assignment == b"assigned" and g.static_member_id("host-1") == "m-1"
    assert g.offsets == {("t", 0): OffsetAndMetadata(3, -1, "", 5)}
    simple = loaded.groups["simple"]
    assert simple.state is GroupState.EMPTY and simple.protocol_type is None


async def test_replay_reads_in_chunks(manager: GroupMetadataManager,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gmm, "LOAD_BUFFER_BYTES", 100)  # less than one batch: each read again
    for offset in range(20):
        manager.store_offsets(0, f"g{offset % 3}", {("t", 0): OffsetAndMetadata(offset)})
    loaded = await manager.load_partition(0)
    assert {g: group.offsets[("t", 0)].offset for g, group in loaded.groups.items()} == {
        "g0": 18, "g1": 19, "g2": 17}


async def test_a_group_tombstone_forgets_the_group(manager: GroupMetadataManager) -> None:
    clock = manager.clock
    assert isinstance(clock, ManualClock)
    manager.store_group(0, stable_group(clock), {})
    manager.append(0, [(group_metadata_key("g"), None)])
    assert (await manager.load_partition(0)).groups == {}


def test_appending_to_a_partition_not_hosted(manager: GroupMetadataManager) -> None:
    assert manager.store_offsets(7, "g", {("t", 0): OffsetAndMetadata(1)}) == \
        ErrorCode.coordinator_not_available
