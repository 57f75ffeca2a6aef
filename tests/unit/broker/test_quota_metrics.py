"""strata_quota_* series: the measured rate, the limit and the throttling of each sensor."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from strata.broker.metrics.quota_metrics import QuotaMetrics
from strata.broker.quotas.broker_quotas import BrokerQuotas
from strata.broker.quotas.client_quota_manager import QuotaWindow
from strata.broker.quotas.client_quotas import (
    CLIENT_ID,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Alteration,
    ClientQuotas,
)
from strata.broker.quotas.quota_store import FileQuotaStore
from strata.broker.quotas.request_time import RequestTime


def test_a_throttled_producer_shows_its_rate_limit_and_throttle(tmp_path: Path) -> None:
    quotas = BrokerQuotas(FileQuotaStore(tmp_path), QuotaWindow(11, 1000))
    configured, _ = ClientQuotas().alter(
        [Alteration([(CLIENT_ID, "app")], {PRODUCER_BYTE_RATE: 1000})])
    quotas.apply(configured)
    registry = CollectorRegistry()
    QuotaMetrics(registry, lambda: quotas, lambda: 1)
    assert registry.get_sample_value("strata_quota_rate", {
        "quota_type": "Produce", "user": "", "client_id": "app"}) is None
    throttle = quotas.produce.record_and_get_throttle_time_ms("alice", "app", 30_000, 0)
    labels = {"quota_type": "Produce", "user": "", "client_id": "app"}
    assert registry.get_sample_value("strata_quota_rate", labels) == 30_000 * 1000 / 10_001
    assert registry.get_sample_value("strata_quota_limit", labels) == 1000.0
    assert registry.get_sample_value("strata_quota_throttle_time_ms_total", labels) == throttle
    assert throttle > 0
    assert registry.get_sample_value("strata_quota_throttled_requests_total", labels) == 1


def test_no_quotas_no_series(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    QuotaMetrics(registry, lambda: None, lambda: 0)
    assert not [s for m in registry.collect() for s in m.samples]


def test_request_time_and_exempt_time_are_percent_of_the_loop(tmp_path: Path) -> None:
    quotas = BrokerQuotas(FileQuotaStore(tmp_path), QuotaWindow(11, 1000))
    configured, _ = ClientQuotas().alter(
        [Alteration([(CLIENT_ID, "app")], {REQUEST_PERCENTAGE: 5.0})])
    quotas.apply(configured)
    registry = CollectorRegistry()
    QuotaMetrics(registry, lambda: quotas, lambda: 0)
    assert registry.get_sample_value("strata_quota_exempt_request_time") is None
    throttled = RequestTime(quotas.request, "alice", "app", clock=lambda: 0)
    throttled.add(1_000_000_000)  # a second of the loop: 100 %-seconds over 10 s
    throttle = throttled.charge(0)
    exempt = RequestTime(quotas.request, "alice", "app", exempt=True, clock=lambda: 0)
    exempt.add(500_000_000)
    exempt.charge(0)
    labels = {"quota_type": "Request", "user": "", "client_id": "app"}
    assert registry.get_sample_value("strata_quota_rate", labels) == 10.0
    assert registry.get_sample_value("strata_quota_limit", labels) == 5.0
    assert registry.get_sample_value("strata_quota_throttle_time_ms_total", labels) == throttle
    assert throttle == 1000  # (10 - 5) / 5 x 10 s, bounded at one 1 s window
    assert registry.get_sample_value("strata_quota_exempt_request_time") == 5.0
