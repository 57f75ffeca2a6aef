"""The console's broker and reassignment pages' pure parts: a broker's request rate and
under-replicated count read from its ``/metrics`` and fed as its own series, the order a
broker's configs are listed in, the target replicas a move form accepts, and the refusals
answered before any Kafka request (a POST without Cluster Alter / AlterConfigs is 403, a bad
form 422 on the page)."""

from __future__ import annotations

import pytest

from strata.admin.console.broker_scrape import parse
from strata.admin.console.brokers import ordered_configs
from strata.admin.console.reassignments import replica_list
from strata.admin.console.sampler import MetricsSampler
from strata.admin.kafka_gateway import AdminSettings, KafkaGateway
from strata.admin.models import ConfigValue
from strata.admin.problems import ProblemError

PAGE = """# HELP strata_request_total Requests handled, by API.
# TYPE strata_request_total counter
strata_request_total{api="Produce"} 40.0
strata_request_total{api="Fetch"} 60.0
strata_request_errors_total{api="Fetch",error="NOT_LEADER_OR_FOLLOWER"} 7.0
strata_request_latency_seconds_count{api="Fetch"} 60.0
# TYPE strata_replication_under_replicated_partitions gauge
strata_replication_under_replicated_partitions 2.0
"""


def test_a_brokers_requests_and_under_replicated_partitions_are_read() -> None:
    scrape = parse(PAGE)
    assert scrape.requests == 100.0  # the errors and latency series are not requests
    assert scrape.under_replicated == 2.0
    assert parse("strata_request_total{api=\"Fetch\"} 1\n").under_replicated is None


def test_the_sampler_feeds_a_brokers_request_rate_and_under_replicated_gauge() -> None:
    sampler = MetricsSampler(KafkaGateway(AdminSettings("127.0.0.1:1", 1.0)))
    sampler._feed(10.0, {3: parse(PAGE)}, complete=True)
    later = parse(PAGE.replace("60.0", "80.0").replace("partitions 2.0", "partitions 0"))
    sampler._feed(12.0, {3: later}, complete=True)
    store = sampler.store
    assert store.points("broker:3:requests") == [(12.0, 10.0)]  # +20 requests in 2 s
    assert store.points("broker:3:under_replicated") == [(10.0, 2.0), (12.0, 0.0)]
    assert store.points("cluster:requests") == [(12.0, 10.0)]


def test_a_brokers_configs_list_dynamic_then_writable_then_read_only() -> None:
    def value(source: str, read_only: bool = False) -> ConfigValue:
        return ConfigValue(value="1", source=source, read_only=read_only)

    configs = {"log.dirs": value("STATIC_BROKER_CONFIG", read_only=True),
               "log.retention.ms": value("DEFAULT_CONFIG"),
               "log.cleaner.threads": value("DYNAMIC_DEFAULT_BROKER_CONFIG"),
               "background.threads": value("DYNAMIC_BROKER_CONFIG"),
               "broker.id": value("STATIC_BROKER_CONFIG", read_only=True)}
    assert [name for name, _ in ordered_configs(configs)] == [
        "background.threads", "log.cleaner.threads", "log.retention.ms", "broker.id",
        "log.dirs"]


def test_a_moves_target_replicas_are_distinct_broker_ids() -> None:
    assert replica_list("2, 0,1") == [2, 0, 1]
    for bad in ("", "1,x", "1,1", ",".join(str(i) for i in range(40))):
        with pytest.raises(ProblemError) as refused:
            replica_list(bad)
        assert refused.value.status == 422 and refused.value.title == "VALIDATION_ERROR"
