"""Quota measurement: Kafka's sampled rate, KIP-219 throttle times, shared sensors."""

from __future__ import annotations

import pytest

from strata.broker.quotas.client_quota_manager import (
    INACTIVE_SENSOR_EXPIRY_MS,
    ClientQuotaManager,
    QuotaWindow,
)
from strata.broker.quotas.client_quotas import (
    CLIENT_ID,
    PRODUCER_BYTE_RATE,
    USER,
    Alteration,
    ClientQuotas,
)
from strata.broker.quotas.sampled_rate import SampledRate, throttle_time_ms


def test_a_steady_rate_is_measured_over_the_elapsed_windows() -> None:
    rate = SampledRate(samples=11, window_ms=1000, now_ms=0)
    for second in range(20):
        rate.record(500.0, second * 1000)
    assert rate.measure(19_999) == pytest.approx(500.0, rel=0.1)


def test_a_first_burst_is_measured_over_at_least_samples_minus_one_windows() -> None:
    rate = SampledRate(samples=11, window_ms=1000, now_ms=0)
    rate.record(10_000.0, 5)
    assert rate.window_size_ms(5) == 10_005
    assert rate.measure(5) == pytest.approx(10_000 / 10.005)


def test_samples_older_than_the_whole_window_count_as_empty() -> None:
    rate = SampledRate(samples=3, window_ms=1000, now_ms=0)
    rate.record(9_000.0, 0)
    assert rate.measure(500) > 0
    assert rate.measure(3_000) == 0.0


def test_throttle_time_is_the_time_for_the_rate_to_fall_back_to_the_quota() -> None:
    assert throttle_time_ms(100.0, 100.0, 10_000) == 0
    assert throttle_time_ms(150.0, 100.0, 10_000) == 5_000
    assert throttle_time_ms(300.0, 100.0, 11_000) == 22_000


def _manager(*alterations: Alteration) -> ClientQuotaManager:
    quotas, errors = ClientQuotas().alter(list(alterations))
    assert not any(errors)
    return ClientQuotaManager(PRODUCER_BYTE_RATE, QuotaWindow(11, 1000), quotas)


def test_without_quotas_nothing_is_measured_or_throttled() -> None:
    manager = _manager()
    assert manager.record_and_get_throttle_time_ms("alice", "app", 1e12, 0) == 0
    assert manager.max_value_in_window("alice", "app") is None
    assert manager.rate("alice", "app", 0) == 0.0


def test_a_client_over_its_quota_is_throttled_in_proportion_and_capped() -> None:
    manager = _manager(Alteration([(CLIENT_ID, "app")], {PRODUCER_BYTE_RATE: 1000}))
    # 10,000 bytes in the first window: measured over 10 s, at the quota: no throttle
    assert manager.record_and_get_throttle_time_ms("u", "app", 10_000, 0) == 0
    # 10,000 more: 2,000 B/s against 1,000 B/s over ~10 s -> ~10 s of throttle
    throttle = manager.record_and_get_throttle_time_ms("u", "app", 10_000, 1)
    assert 9_900 <= throttle <= 10_100
    assert manager.throttles[("", "app")].count == 1
    # far over: capped at the whole quota window
    assert manager.record_and_get_throttle_time_ms("u", "app", 1e9, 2) == 11_000
    # another client id has no quota
    assert manager.record_and_get_throttle_time_ms("u", "other", 1e9, 3) == 0


def test_a_user_quota_is_shared_by_the_users_clients_and_unrecord_gives_back() -> None:
    manager = _manager(Alteration([(USER, "alice")], {PRODUCER_BYTE_RATE: 1000}))
    assert manager.record_and_get_throttle_time_ms("alice", "a", 8_000, 0) == 0
    assert manager.record_and_get_throttle_time_ms("alice", "b", 8_000, 1) > 0
    manager.unrecord("alice", "b", 8_000, 2)
    assert manager.rate("alice", "zzz", 2) == pytest.approx(800.0, rel=0.01)
    assert manager.max_value_in_window("alice", "a") == 10_000.0


def test_idle_sensors_expire_after_an_hour() -> None:
    manager = _manager(Alteration([(CLIENT_ID, None)], {PRODUCER_BYTE_RATE: 1}))
    manager.record_and_get_throttle_time_ms("u", "app", 100, 0)
    assert manager.expire_inactive(INACTIVE_SENSOR_EXPIRY_MS - 1) == 0
    assert manager.expire_inactive(INACTIVE_SENSOR_EXPIRY_MS) == 1
