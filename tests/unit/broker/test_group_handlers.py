"""The group API handlers on a socket-less broker: every version decodes, answers and encodes.

Requests are kio objects as the connection hands them over; every response is encoded at its
version (``encode_response``), which is what a client would read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.coordinator_partition import partition_for
from strata.broker.group.metadata_manager import OFFSETS_TOPIC
from strata.broker.handlers import (
    build_registry,
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)
from strata.protocol import ApiKey, encode_response
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock

from .helpers import add_topics, consumer_subscription, context, group_broker_state, request

SUBSCRIPTION = consumer_subscription("t")
GROUP_APIS = {ApiKey.JOIN_GROUP: (0, 9), ApiKey.SYNC_GROUP: (0, 5), ApiKey.HEARTBEAT: (0, 4),
              ApiKey.LEAVE_GROUP: (0, 5), ApiKey.OFFSET_COMMIT: (2, 9),
              ApiKey.OFFSET_FETCH: (1, 9), ApiKey.DESCRIBE_GROUPS: (0, 6),
              ApiKey.LIST_GROUPS: (0, 5), ApiKey.DELETE_GROUPS: (0, 2),
              ApiKey.OFFSET_DELETE: (0, 0), ApiKey.FIND_COORDINATOR: (0, 6)}
HANDLERS: dict[int, Any] = {
    ApiKey.JOIN_GROUP: join_group, ApiKey.SYNC_GROUP: sync_group, ApiKey.HEARTBEAT: heartbeat,
    ApiKey.LEAVE_GROUP: leave_group, ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch, ApiKey.DESCRIBE_GROUPS: describe_groups,
    ApiKey.LIST_GROUPS: list_groups, ApiKey.DELETE_GROUPS: delete_groups,
    ApiKey.OFFSET_DELETE: offset_delete, ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.METADATA: metadata,
}


async def call(state: BrokerState, api_key: int, version: int, **fields: Any) -> Any:
    ctx = context(state, api_key, version)
    response = await HANDLERS[api_key].handle(ctx, request(api_key, version, **fields))
    encode_response(ctx.header, response)  # every answer must encode at its version
    return response


@pytest.fixture
async def state(tmp_path: Path) -> Any:
    state = group_broker_state(tmp_path, ManualClock(), offsets_topic_num_partitions="5")
    await add_topics(state, ("t", 2))
    await state.group_coordinator.startup(run_timers=False)
    response = await call(state, ApiKey.FIND_COORDINATOR, 2, key="g", key_type=0)
    assert response.error_code == ErrorCode.none
    yield state
    await state.group_coordinator.shutdown()
    state.log_manager.shutdown()


def test_the_group_apis_are_registered_at_the_table_versions() -> None:
    ranges = build_registry().version_ranges()
    for api_key, (low, high) in GROUP_APIS.items():
        assert (ranges[api_key].min_version, ranges[api_key].max_version) == (low, high)


async def test_find_coordinator_creates_the_offsets_topic(tmp_path: Path) -> None:
    state = group_broker_state(tmp_path, offsets_topic_num_partitions="7",
                               offsets_topic_replication_factor="3")
    response = await call(state, ApiKey.FIND_COORDINATOR, 1, key="my-group", key_type=0)
    assert response.error_code == ErrorCode.none and response.node_id == state.node_id
    record = state.topic_store.get(OFFSETS_TOPIC)
    assert record is not None and record.partitions == 7 and record.replication_factor == 1
    assert record.configs["cleanup.policy"] == "compact"
    hosted = state.replica_manager.get_partition(OFFSETS_TOPIC, partition_for("my-group", 7))
    assert hosted is not None and hosted.log.config.compact
    meta = await call(state, ApiKey.METADATA, 8, topics=None, allow_auto_topic_creation=False,
                      include_cluster_authorized_operations=False,
                      include_topic_authorized_operations=False)
    (offsets_topic,) = [t for t in meta.topics if t.name == OFFSETS_TOPIC]
    assert offsets_topic.is_internal and len(offsets_topic.partitions) == 7
    state.log_manager.shutdown()


async def join(state: BrokerState, version: int, member_id: str = "",
               instance: str | None = None) -> Any:
    return await call(state, ApiKey.JOIN_GROUP, version, group_id="g", session_timeout_ms=10_000,
                      rebalance_timeout_ms=30_000, member_id=member_id,
                      group_instance_id=instance, protocol_type="consumer",
                      protocols=[{"name": "range", "metadata": SUBSCRIPTION}])


@pytest.mark.parametrize("version", range(6))
async def test_join_sync_heartbeat_leave_at_every_version(state: BrokerState,
                                                          version: int) -> None:
    instance = "host-1" if version >= 5 else None
    joined = await join(state, version, instance=instance)
    if version >= 4 and instance is None:
        assert joined.error_code == ErrorCode.member_id_required
        joined = await join(state, version, joined.member_id)
    assert joined.error_code == ErrorCode.none and joined.generation_id == 1
    member = joined.member_id
    assert joined.leader == member and joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [member]
    if version >= 5:
        assert joined.members[0].group_instance_id == "host-1"
    sync_version = min(version, 3)
    synced = await call(state, ApiKey.SYNC_GROUP, sync_version, group_id="g", generation_id=1,
                        member_id=member, group_instance_id=instance,
                        assignments=[{"member_id": member, "assignment": b"mine"}])
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"mine")
    beat = await call(state, ApiKey.HEARTBEAT, sync_version, group_id="g", generation_id=1,
                      member_id=member, group_instance_id=instance)
    assert beat.error_code == ErrorCode.none
    left = await call(state, ApiKey.LEAVE_GROUP, min(version, 3), group_id="g", member_id=member,
                      members=[{"member_id": member, "group_instance_id": instance}])
    assert left.error_code == ErrorCode.none
    beat = await call(state, ApiKey.HEARTBEAT, sync_version, group_id="g", generation_id=1,
                      member_id=member, group_instance_id=None)
    assert beat.error_code == ErrorCode.unknown_member_id


async def test_join_errors(state: BrokerState) -> None:
    unknown = await join(state, 5, member_id="ghost")
    assert unknown.error_code == ErrorCode.unknown_member_id and unknown.generation_id == -1
    bad = await call(state, ApiKey.JOIN_GROUP, 0, group_id="", session_timeout_ms=10_000,
                     member_id="", protocol_type="consumer", protocols=[])
    assert bad.error_code == ErrorCode.invalid_group_id


@pytest.mark.parametrize(("version", "error"), [(0, ErrorCode.unknown_member_id),
                                                (2, ErrorCode.unknown_member_id),
                                                (3, ErrorCode.none)])
async def test_leave_group_errors_by_version(state: BrokerState, version: int,
                                             error: ErrorCode) -> None:
    response = await call(state, ApiKey.LEAVE_GROUP, version, group_id="g", member_id="ghost",
                          members=[{"member_id": "ghost", "group_instance_id": None},
                                   {"member_id": "", "group_instance_id": "nobody"}])
    assert response.error_code == error
    if version >= 3:
        assert [(m.member_id, m.error_code) for m in response.members] == [
            ("ghost", ErrorCode.unknown_member_id), ("", ErrorCode.unknown_member_id)]


def commit_fields(version: int, *partitions: tuple[str, int, int], retention_ms: int = -1,
                  group_id: str = "g") -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, index, offset in partitions:
        topics.setdefault(topic, []).append({
            "partition_index": index, "committed_offset": offset, "committed_leader_epoch": 3,
            "committed_metadata": None, "commit_timestamp": -1})
    return {"group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": retention_ms,
            "topics": [{"name": n, "partitions": p} for n, p in topics.items()]}


async def fetch(state: BrokerState, version: int, topics: list[tuple[str, list[int]]] | None,
                group_id: str = "g") -> Any:
    return await call(state, ApiKey.OFFSET_FETCH, version, group_id=group_id,
                      topics=None if topics is None else
                      [{"name": n, "partition_indexes": p} for n, p in topics])


@pytest.mark.parametrize("version", range(2, 8))
async def test_offset_commit_and_fetch_at_every_version(state: BrokerState, version: int) -> None:
    response = await call(state, ApiKey.OFFSET_COMMIT, version,
                          **commit_fields(version, ("t", 0, 11), ("t", 5, 1), ("nope", 0, 1)))
    errors = {(t.name, p.partition_index): p.error_code
              for t in response.topics for p in t.partitions}
    assert errors == {("t", 0): ErrorCode.none, ("t", 5): ErrorCode.unknown_topic_or_partition,
                      ("nope", 0): ErrorCode.unknown_topic_or_partition}
    fetch_version = min(version, 5)
    fetched = await fetch(state, fetch_version, [("t", [0, 1])])
    partitions = {p.partition_index: p for p in fetched.topics[0].partitions}
    assert partitions[0].committed_offset == 11 and partitions[0].metadata == ""
    assert partitions[1].committed_offset == -1 and partitions[1].error_code == ErrorCode.none
    if fetch_version >= 5:
        assert partitions[0].committed_leader_epoch == (3 if version >= 6 else -1)


async def test_offset_commit_v2_retention_sets_an_expire_timestamp(state: BrokerState) -> None:
    await call(state, ApiKey.OFFSET_COMMIT, 2,
               **commit_fields(2, ("t", 0, 1), retention_ms=60_000))
    group = state.group_coordinator.group("g")
    assert group is not None
    committed = group.offsets[("t", 0)]
    assert committed.expire_timestamp == committed.commit_timestamp + 60_000


async def test_offset_fetch_of_all_partitions_and_errors_by_version(state: BrokerState) -> None:
    await call(state, ApiKey.OFFSET_COMMIT, 7, **commit_fields(7, ("t", 1, 4), ("t", 0, 3)))
    everything = await fetch(state, 5, None)
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
            for t in everything.topics] == [("t", [(0, 3), (1, 4)])]
    await state.group_coordinator.shutdown()  # now COORDINATOR_NOT_AVAILABLE
    v1 = await fetch(state, 1, [("t", [0])])
    assert v1.topics[0].partitions[0].error_code == ErrorCode.coordinator_not_available
    assert v1.topics[0].partitions[0].committed_offset == -1
    v5 = await fetch(state, 5, [("t", [0])])
    assert v5.error_code == ErrorCode.coordinator_not_available and v5.topics == ()


@pytest.mark.parametrize("version", range(5))
async def test_describe_groups_at_every_version(state: BrokerState, version: int) -> None:
    joined = await join(state, 3)
    await call(state, ApiKey.SYNC_GROUP, 3, group_id="g", generation_id=1,
               member_id=joined.member_id, group_instance_id=None,
               assignments=[{"member_id": joined.member_id, "assignment": b"a"}])
    response = await call(state, ApiKey.DESCRIBE_GROUPS, version, groups=["g", "nope"],
                          include_authorized_operations=True)
    g, nope = response.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
        ErrorCode.none, "Stable", "consumer", "range")
    member = g.members[0]
    assert member.member_id == joined.member_id and member.client_id == "test"
    assert member.client_host == "/127.0.0.1"
    assert (member.member_metadata, member.member_assignment) == (SUBSCRIPTION, b"a")
    assert (nope.error_code, nope.group_state, nope.members) == (ErrorCode.none, "Dead", ())
    if version >= 3:
        assert g.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)


@pytest.mark.parametrize("version", range(5))
async def test_list_groups(state: BrokerState, version: int) -> None:
    await join(state, 3)
    await call(state, ApiKey.OFFSET_COMMIT, 7,
               **commit_fields(7, ("t", 0, 1), group_id="simple"))
    response = await call(state, ApiKey.LIST_GROUPS, version, states_filter=[])
    assert response.error_code == ErrorCode.none
    assert sorted((g.group_id, g.protocol_type) for g in response.groups) == [
        ("g", "consumer"), ("simple", "")]
    if version >= 4:  # KIP-518: states, and a filter on them
        assert sorted((g.group_id, g.group_state) for g in response.groups) == [
            ("g", "CompletingRebalance"), ("simple", "Empty")]
        only = await call(state, ApiKey.LIST_GROUPS, version, states_filter=["empty"])
        assert [g.group_id for g in only.groups] == ["simple"]


@pytest.mark.parametrize("version", range(2))
async def test_delete_groups(state: BrokerState, version: int) -> None:
    await join(state, 3)
    await call(state, ApiKey.OFFSET_COMMIT, 7,
               **commit_fields(7, ("t", 0, 1), group_id="simple"))
    response = await call(state, ApiKey.DELETE_GROUPS, version,
                          groups_names=["g", "simple", "nope"])
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("g", ErrorCode.non_empty_group), ("simple", ErrorCode.none),
        ("nope", ErrorCode.group_id_not_found)]
    fetched = await fetch(state, 5, [("t", [0])], group_id="simple")
    assert fetched.topics[0].partitions[0].committed_offset == -1


async def test_offset_delete(state: BrokerState) -> None:
    await call(state, ApiKey.OFFSET_COMMIT, 7,
               **commit_fields(7, ("t", 0, 1), ("t", 1, 2), group_id="simple"))
    response = await call(state, ApiKey.OFFSET_DELETE, 0, group_id="simple", topics=[
        {"name": "t", "partitions": [{"partition_index": 0}, {"partition_index": 9}]},
        {"name": "nope", "partitions": [{"partition_index": 0}]}])
    assert response.error_code == ErrorCode.none
    assert {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions} == {
        ("t", 0): ErrorCode.none, ("t", 9): ErrorCode.unknown_topic_or_partition,
        ("nope", 0): ErrorCode.unknown_topic_or_partition}
    missing = await call(state, ApiKey.OFFSET_DELETE, 0, group_id="ghost", topics=[])
    assert missing.error_code == ErrorCode.group_id_not_found and missing.topics == ()
