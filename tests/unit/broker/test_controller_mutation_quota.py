"""controller_mutation_rate (KIP-599): Kafka's token bucket, and CreateTopics, CreatePartitions
and DeleteTopics refusing THROTTLING_QUOTA_EXCEEDED (or, at older versions, only throttling)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from strata.broker.handlers import create_partitions, create_topics, delete_topics
from strata.broker.quotas.broker_quotas import BrokerQuotas
from strata.broker.quotas.client_quota_manager import QuotaWindow
from strata.broker.quotas.client_quotas import (
    CLIENT_ID,
    CONTROLLER_MUTATION_RATE,
    Alteration,
    ClientQuotas,
)
from strata.broker.quotas.controller_mutation_quota import TokenBucket
from strata.broker.quotas.quota_store import FileQuotaStore
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock

from .helpers import broker_state, context, request


def test_the_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    bucket = TokenBucket(rate=2.0, burst=22.0, tokens=22.0, last_ms=0)
    bucket.take(30, 0)
    assert bucket.exceeded(0) and bucket.throttle_time_ms(0) == 4000
    assert not bucket.exceeded(4000) and bucket.throttle_time_ms(4000) == 0
    assert bucket.tokens == 0.0
    bucket.take(0, 1_000_000)
    assert bucket.tokens == 22.0


def _state(tmp_path: Path) -> Any:
    clock = ManualClock(1_000_000)
    state = broker_state(tmp_path)
    state.clock = clock
    state.quotas = BrokerQuotas(FileQuotaStore(tmp_path), QuotaWindow(11, 1000))
    configured, _ = ClientQuotas().alter([Alteration([(CLIENT_ID, None)],
                                                     {CONTROLLER_MUTATION_RATE: 2})])
    state.quotas.apply(configured)
    return state


async def _create(state: Any, version: int, name: str, partitions: int) -> tuple[Any, Any]:
    ctx = context(state, ApiKey.CREATE_TOPICS, version)
    response = await create_topics.handle(ctx, request(
        ApiKey.CREATE_TOPICS, version, timeout_ms=1000, validate_only=False,
        topics=[{"name": name, "num_partitions": partitions, "replication_factor": 1,
                 "assignments": [], "configs": []}]))
    return response.topics[0], ctx


async def test_create_topics_is_refused_once_the_quota_is_exceeded(tmp_path: Path) -> None:
    state = _state(tmp_path)
    first, ctx = await _create(state, 7, "big", 30)  # the bucket is full: admitted, overdrawn
    assert first.error_code == ErrorCode.none
    assert ctx.throttle_time_ms == 4000
    second, ctx = await _create(state, 7, "next", 1)
    assert second.error_code == ErrorCode.throttling_quota_exceeded
    assert second.error_message == "The throttling quota has been exceeded."
    assert ctx.throttle_time_ms == 4000 and state.topic_store.get("next") is None
    older, ctx = await _create(state, 5, "old", 1)  # before v6: throttled, never refused
    assert older.error_code == ErrorCode.none and ctx.throttle_time_ms > 4000


async def test_partitions_and_deletions_count_too(tmp_path: Path) -> None:
    state = _state(tmp_path)
    await _create(state, 7, "t", 20)
    ctx = context(state, ApiKey.CREATE_PARTITIONS, 3)
    grown = await create_partitions.handle(ctx, request(
        ApiKey.CREATE_PARTITIONS, 3, timeout_ms=1000, validate_only=False,
        topics=[{"name": "t", "count": 25, "assignments": None}]))
    assert grown.results[0].error_code == ErrorCode.none  # 2 tokens left: admitted
    ctx = context(state, ApiKey.DELETE_TOPICS, 6)
    deleted = await delete_topics.handle(ctx, request(
        ApiKey.DELETE_TOPICS, 6, timeout_ms=1000,
        topics=[{"name": "t", "topic_id": None}]))
    assert deleted.responses[0].error_code == ErrorCode.throttling_quota_exceeded
    assert ctx.throttle_time_ms == 1500
