"""CreateTopics, Metadata, DeleteTopics and CreatePartitions handlers on a socket-less broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from strata.broker.broker_state import BrokerState
from strata.broker.handlers import (
    create_partitions,
    create_topics,
    delete_topics,
    metadata,
)
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode

from .helpers import broker_state, context, request


def topic(name: str, partitions: int = -1, replication_factor: int = -1,
          configs: dict[str, str | None] | None = None,
          assignments: list[tuple[int, list[int]]] | None = None) -> dict[str, Any]:
    return {
        "name": name, "num_partitions": partitions, "replication_factor": replication_factor,
        "assignments": [{"partition_index": p, "broker_ids": b} for p, b in assignments or []],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


async def create(state: BrokerState, *topics: dict[str, Any], validate_only: bool = False,
                 version: int = 4) -> dict[str, tuple[int, str | None]]:
    body = request(ApiKey.CREATE_TOPICS, version, topics=list(topics), timeout_ms=1000,
                   validate_only=validate_only)
    response = await create_topics.handle(context(state, ApiKey.CREATE_TOPICS, version), body)
    return {t.name: (t.error_code, t.error_message) for t in response.topics}


async def get_metadata(state: BrokerState, names: list[str] | None, version: int = 8,
                       allow_auto_topic_creation: bool = True) -> Any:
    topics = None if names is None else [{"name": n} for n in names]
    body = request(ApiKey.METADATA, version, topics=topics,
                   allow_auto_topic_creation=allow_auto_topic_creation,
                   include_cluster_authorized_operations=False,
                   include_topic_authorized_operations=False)
    return await metadata.handle(context(state, ApiKey.METADATA, version), body)


# ---------------------------------------------------------------------------- CreateTopics


async def test_create_with_broker_defaults_hosts_every_partition(tmp_path: Path) -> None:
    state = broker_state(tmp_path, num_partitions="3")
    result = await create(state, topic("orders", configs={"retention.ms": "60000"}))
    assert result == {"orders": (ErrorCode.none, None)}
    record = state.topic_store.get("orders")
    assert record is not None and record.partitions == 3 and record.replication_factor == 1
    for index in range(3):
        partition = state.replica_manager.get_partition("orders", index)
        assert partition is not None and partition.leader_epoch == 0
        assert partition.log.config.retention_ms == 60000


async def test_validate_only_creates_nothing(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    assert await create(state, topic("t", 2, 1), validate_only=True) == {
        "t": (ErrorCode.none, None)}
    assert state.topic_store.get("t") is None
    assert state.replica_manager.get_partition("t", 0) is None


async def test_create_topics_errors_per_topic(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("exists", 1, 1), topic("a.b", 1, 1))
    result = await create(
        state,
        topic("exists", 1, 1),
        topic("bad name", 1, 1),
        topic("a_b", 1, 1),
        topic("zero", 0, 1),
        topic("rf3", 1, 3),
        topic("rf0", 1, 0),
        topic("badcfg", 1, 1, configs={"retention.ms": "soon"}),
        topic("nocfg", 1, 1, configs={"no.such.config": "1"}),
        topic("nullcfg", 1, 1, configs={"retention.ms": None}),
        topic("dup", 1, 1),
        topic("dup", 1, 1),
        topic("ok", 2, 1),
    )
    codes = {name: code for name, (code, _) in result.items()}
    assert codes == {
        "exists": ErrorCode.topic_already_exists,
        "bad name": ErrorCode.invalid_topic_exception,
        "a_b": ErrorCode.invalid_topic_exception,
        "zero": ErrorCode.invalid_partitions,
        "rf3": ErrorCode.invalid_replication_factor,
        "rf0": ErrorCode.invalid_replication_factor,
        "badcfg": ErrorCode.invalid_config,
        "nocfg": ErrorCode.invalid_config,
        "nullcfg": ErrorCode.invalid_config,
        "dup": ErrorCode.invalid_request,
        "ok": ErrorCode.none,
    }
    assert "already exists" in (result["exists"][1] or "")
    assert "retention.ms" in (result["badcfg"][1] or "")
    assert set(state.topic_store.topics()) == {"exists", "a.b", "ok"}


async def test_manual_assignments(tmp_path: Path) -> None:
    state = broker_state(tmp_path)  # node id 1
    result = await create(
        state,
        topic("manual", assignments=[(1, [1]), (0, [1])]),
        topic("elsewhere", assignments=[(0, [5])]),
        topic("gap", assignments=[(0, [1]), (2, [1])]),
        topic("both", 2, 1, assignments=[(0, [1])]),
    )
    assert {n: c for n, (c, _) in result.items()} == {
        "manual": ErrorCode.none,
        "elsewhere": ErrorCode.invalid_replica_assignment,
        "gap": ErrorCode.invalid_replica_assignment,
        "both": ErrorCode.invalid_request,
    }
    record = state.topic_store.get("manual")
    assert record is not None and record.partitions == 2


async def test_create_topics_v2_answers_in_its_own_version(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    assert await create(state, topic("v2", 1, 1), version=2) == {"v2": (ErrorCode.none, None)}


# ---------------------------------------------------------------------------- Metadata


async def test_metadata_describes_brokers_and_partitions(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("b", 2, 1), topic("a", 1, 1))
    response = await get_metadata(state, None)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "127.0.0.1", 9092)]
    assert response.controller_id == 1
    assert response.cluster_id == "c-1"
    assert [t.name for t in response.topics] == ["a", "b"]
    b = response.topics[1]
    assert b.error_code == ErrorCode.none and not b.is_internal
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
            for p in b.partitions] == [(0, 1, 0, (1,), (1,)), (1, 1, 0, (1,), (1,))]


async def test_metadata_v0_empty_list_means_all_v1_empty_list_means_none(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("t", 1, 1))
    assert [t.name for t in (await get_metadata(state, [], version=0)).topics] == ["t"]
    assert (await get_metadata(state, [], version=1)).topics == ()


async def test_metadata_unknown_and_invalid_topics(tmp_path: Path) -> None:
    state = broker_state(tmp_path, auto_create_topics_enable="false")
    response = await get_metadata(state, ["missing", "bad/name", "missing"])
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("missing", ErrorCode.unknown_topic_or_partition),
        ("bad/name", ErrorCode.invalid_topic_exception),
    ]
    assert state.topic_store.get("missing") is None


async def test_metadata_auto_creates_like_kafka(tmp_path: Path) -> None:
    state = broker_state(tmp_path, num_partitions="2")
    first = await get_metadata(state, ["auto"])
    assert [(t.name, t.error_code, t.partitions) for t in first.topics] == [
        ("auto", ErrorCode.leader_not_available, ())]
    second = await get_metadata(state, ["auto"])
    assert second.topics[0].error_code == ErrorCode.none
    assert len(second.topics[0].partitions) == 2


async def test_metadata_v4_request_can_refuse_auto_creation(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    response = await get_metadata(state, ["nope"], version=4, allow_auto_topic_creation=False)
    assert response.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    # Before v4 there is no flag: the broker setting alone decides.
    response = await get_metadata(state, ["yes"], version=3)
    assert response.topics[0].error_code == ErrorCode.leader_not_available


# ---------------------------------------------------------------------------- DeleteTopics


async def delete(state: BrokerState, *names: str, version: int = 3) -> dict[str, int]:
    body = request(ApiKey.DELETE_TOPICS, version, topic_names=list(names), timeout_ms=1000)
    response = await delete_topics.handle(context(state, ApiKey.DELETE_TOPICS, version), body)
    return {r.name: r.error_code for r in response.responses}


async def test_delete_topics_removes_partitions_and_data(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("gone", 2, 1), topic("kept", 1, 1))
    log_dir = state.replica_manager.get_partition("gone", 0)
    assert log_dir is not None
    directory = log_dir.log.dir
    assert directory.exists()
    assert await delete(state, "gone", "never") == {
        "gone": ErrorCode.none, "never": ErrorCode.unknown_topic_or_partition}
    assert state.topic_store.get("gone") is None
    assert state.replica_manager.get_partition("gone", 0) is None
    assert state.log_manager.get_log("gone", 1) is None
    assert not directory.exists()
    assert state.topic_store.get("kept") is not None
    # The name is free again, with a new topic id.
    assert await create(state, topic("gone", 1, 1)) == {"gone": (ErrorCode.none, None)}


async def test_delete_topics_can_be_disabled(tmp_path: Path) -> None:
    state = broker_state(tmp_path, delete_topic_enable="false")
    await create(state, topic("t", 1, 1))
    assert await delete(state, "t", version=1) == {"t": ErrorCode.topic_deletion_disabled}
    assert state.topic_store.get("t") is not None


# ---------------------------------------------------------------------------- CreatePartitions


async def grow(state: BrokerState, name: str, count: int, *, validate_only: bool = False,
               assignments: list[list[int]] | None = None) -> tuple[int, str | None]:
    body = request(ApiKey.CREATE_PARTITIONS, 1, topics=[{
        "name": name, "count": count,
        "assignments": None if assignments is None else [{"broker_ids": a} for a in assignments],
    }], timeout_ms=1000, validate_only=validate_only)
    response = await create_partitions.handle(context(state, ApiKey.CREATE_PARTITIONS, 1), body)
    (result,) = response.results
    return result.error_code, result.error_message


async def test_create_partitions_only_increases(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await create(state, topic("t", 2, 1, configs={"retention.ms": "1234"}))
    assert (await grow(state, "t", 2))[0] == ErrorCode.invalid_partitions
    assert (await grow(state, "t", 1))[0] == ErrorCode.invalid_partitions
    assert (await grow(state, "missing", 3))[0] == ErrorCode.unknown_topic_or_partition
    assert (await grow(state, "t", 4, validate_only=True))[0] == ErrorCode.none
    assert state.replica_manager.get_partition("t", 2) is None
    assert (await grow(state, "t", 4, assignments=[[1]]))[0] == (
        ErrorCode.invalid_replica_assignment)
    assert (await grow(state, "t", 4, assignments=[[1], [9]]))[0] == (
        ErrorCode.invalid_replica_assignment)
    assert await grow(state, "t", 4, assignments=[[1], [1]]) == (ErrorCode.none, None)
    record = state.topic_store.get("t")
    assert record is not None and record.partitions == 4
    new = state.replica_manager.get_partition("t", 3)
    assert new is not None and new.log.config.retention_ms == 1234
