"""DescribeLogDirs v1-5 and DescribeProducers v0 handlers: every served version encodes and
decodes back through kio; an offline log directory answers KAFKA_STORAGE_ERROR; a principal
without Describe on the Cluster gets CLUSTER_AUTHORIZATION_FAILED (v3+) or nothing (v1-2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers import describe_log_dirs, describe_producers
from strata.protocol import ApiKey, encode_response
from strata.protocol.codec import decode_response
from strata.protocol.error_codes import ErrorCode

from .helpers import batch, broker_state, context, request


class _DenyAll:
    def authorize(self, *args: object) -> bool:
        return False


async def _round_trip(state: BrokerState, api_key: ApiKey, version: int, **fields: Any) -> Any:
    ctx = context(state, api_key, version)
    response = await (describe_log_dirs if api_key == ApiKey.DESCRIBE_LOG_DIRS
                      else describe_producers).handle(ctx, request(api_key, version, **fields))
    frame = encode_response(ctx.header, response)
    correlation_id, decoded = decode_response(frame[4:], api_key, version)
    assert correlation_id == ctx.header.correlation_id
    assert decoded == response
    return decoded


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
async def test_every_version_lists_the_hosted_replicas(tmp_path: Path, version: int) -> None:
    state = broker_state(tmp_path, ("t", 2), ("u", 1))
    state.replica_manager.get_partition_or_error("t", 1).append_records_to_leader(
        batch(b"a", b"b"), required_acks=1)
    response = await _round_trip(state, ApiKey.DESCRIBE_LOG_DIRS, version,
                                 topics=[{"topic": "t", "partitions": [0, 1, 7]}])
    (result,) = response.results
    assert result.error_code == ErrorCode.none
    assert result.log_dir == str((tmp_path / "data").resolve())
    (topic,) = result.topics
    sizes = {p.partition_index: p.partition_size for p in topic.partitions}
    assert topic.name == "t" and sorted(sizes) == [0, 1]  # partition 7 is not hosted: left out
    assert sizes[0] == 0 and sizes[1] > 0
    if version >= 4:
        assert result.total_bytes >= result.usable_bytes > 0
    everything = await _round_trip(state, ApiKey.DESCRIBE_LOG_DIRS, version, topics=None)
    assert sorted(t.name for t in everything.results[0].topics) == ["t", "u"]


async def test_an_offline_log_dir_answers_kafka_storage_error(tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1))
    state.log_manager.offline_dirs.add(state.log_manager.log_dirs[0])
    response = await _round_trip(state, ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None)
    assert [(r.error_code, r.topics) for r in response.results] == [
        (ErrorCode.kafka_storage_error, ())]


@pytest.mark.parametrize(("version", "error_code"), [(1, None), (3, 31)])
async def test_without_describe_on_the_cluster_nothing_is_listed(
        tmp_path: Path, version: int, error_code: int | None) -> None:
    state = broker_state(tmp_path, ("t", 1))
    state.authorizer = _DenyAll()  # type: ignore[assignment]
    response = await _round_trip(state, ApiKey.DESCRIBE_LOG_DIRS, version, topics=None)
    assert response.results == ()
    assert getattr(response, "error_code", None) == error_code


async def test_describe_producers_lists_the_idempotent_producer(tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1))
    state.replica_manager.get_partition_or_error("t", 0).append_records_to_leader(
        batch(b"a", b"b", b"c", producer_id=42, producer_epoch=3, base_sequence=0),
        required_acks=1)
    response = await _round_trip(state, ApiKey.DESCRIBE_PRODUCERS, 0,
                                 topics=[{"name": "t", "partition_indexes": [0, 5]}])
    (topic,) = response.topics
    hosted, missing = topic.partitions
    assert [(p.producer_id, p.producer_epoch, p.last_sequence, p.coordinator_epoch,
             p.current_txn_start_offset) for p in hosted.active_producers] == [(42, 3, 2, -1, -1)]
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
