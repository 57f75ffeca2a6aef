"""The per-request rules of byte-rate quotas: who is charged, and how a throttle is served."""

from __future__ import annotations

from pathlib import Path

from strata.broker.quotas.broker_quotas import BrokerQuotas
from strata.broker.quotas.client_quota_manager import QuotaWindow
from strata.broker.quotas.client_quotas import (
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
    is_consumer_fetch,
    quota_user,
    throttle_plan,
)
from strata.protocol.api_keys import ApiKey

from .helpers import request


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
                   max_bytes=1, isolation_level=0, session_id=0, session_epoch=-1, topics=[],
                   forgotten_topics_data=[], rack_id="")


def test_followers_are_not_charged_as_consumers() -> None:
    assert is_consumer_fetch(_fetch(-1))
    assert not is_consumer_fetch(_fetch(2))


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
