"""The per-request rules of byte-rate quotas: who is charged, and how a throttle is served."""

from __future__ import annotations

import struct
from pathlib import Path

from strata.broker.handlers import fetch
from strata.broker.quotas.broker_quotas import BrokerQuotas
from strata.broker.quotas.client_quota_manager import QuotaWindow
from strata.broker.quotas.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    USER,
    Alteration,
    ClientQuotas,
)
from strata.broker.quotas.quota_store import FileQuotaStore
from strata.broker.quotas.request_quotas import (
    charge_fetch,
    charge_produce,
    quota_user,
    throttle_plan,
)
from strata.protocol.api_keys import ApiKey

from .helpers import batch, broker_state, context, request


def test_kip_219_versions_mute_after_the_answer_older_ones_delay_it() -> None:
    assert throttle_plan(ApiKey.PRODUCE, 8, 0) is None
    plan = throttle_plan(ApiKey.PRODUCE, 6, 250)
    assert plan is not None and not plan.delay_response and plan.delay_s == 0.25
    old = throttle_plan(ApiKey.PRODUCE, 5, 250)
    assert old is not None and old.delay_response
    fetch_old = throttle_plan(ApiKey.FETCH, 7, 10)
    assert fetch_old is not None and fetch_old.delay_response


def test_the_user_is_the_principal_name() -> None:
    assert quota_user("User:alice") == "alice"
    assert quota_user("User:ANONYMOUS") == "ANONYMOUS"


def _fetch(replica_id: int) -> object:
    return request(ApiKey.FETCH, 11, replica_id=replica_id, max_wait_ms=0, min_bytes=1,
                   max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                   topics=[{"topic": "t", "partitions": [{
                       "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                       "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                   forgotten_topics_data=[], rack_id="")


async def test_a_consumer_fetch_is_charged_and_throttled_a_followers_is_not(
        tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1))
    state.replica_manager.get_partition_or_error("t", 0).append_records_to_leader(
        batch(b"x" * 5000), required_acks=1)
    state.quotas = BrokerQuotas(FileQuotaStore(tmp_path), QuotaWindow(11, 1000))
    configured, _ = ClientQuotas().alter([Alteration([(CLIENT_ID, None)],
                                                     {CONSUMER_BYTE_RATE: 100})])
    state.quotas.apply(configured)
    follower = context(state, ApiKey.FETCH, 11)
    await fetch.handle(follower, _fetch(2))
    assert follower.throttle_time_ms == 0
    consumer = context(state, ApiKey.FETCH, 11)
    response = await fetch.handle(consumer, _fetch(-1))
    assert consumer.throttle_time_ms > 0
    first = response.chunks[0]
    assert isinstance(first, bytes)  # FetchResponse v11 opens with throttle_time_ms:INT32
    assert struct.unpack_from(">i", first)[0] == consumer.throttle_time_ms


def test_only_the_users_quota_throttles_and_only_its_own_kind(tmp_path: Path) -> None:
    quotas = BrokerQuotas(FileQuotaStore(tmp_path), QuotaWindow(11, 1000))
    assert charge_produce(None, "User:alice", "c", 10**9, 0) == 0
    configured, _ = ClientQuotas().alter([Alteration([(USER, "alice")],
                                                     {PRODUCER_BYTE_RATE: 1000})])
    quotas.apply(configured)
    assert charge_produce(quotas, "User:alice", "c", 100_000, 0) > 0
    assert charge_produce(quotas, "User:bob", "c", 100_000, 0) == 0
    assert charge_fetch(quotas, "User:alice", "c", 100_000, 0) == 0  # no consumer quota
    assert not quotas.fetch.enabled and quotas.fetch.key == CONSUMER_BYTE_RATE
