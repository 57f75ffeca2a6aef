"""KIP-714 end to end: a ``client-metrics`` subscription set with IncrementalAlterConfigs, a
confluent-kafka producer (librdkafka, ``enable.metrics.push`` at its default, true) whose own
metrics then appear on the broker's ``/metrics``, and a producer no subscription matches that
pushes nothing.

confluent-kafka's admin binding has no CLIENT_METRICS resource type, so the subscription goes
through ``strata.client.bootstrap_request`` (IncrementalAlterConfigs v1 / DescribeConfigs v4),
as does a GetTelemetrySubscriptions under each producer's client id.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from strata.client.bootstrap_request import bootstrap_request
from strata.protocol.api_keys import ApiKey

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.integration

TIMEOUT_S = 20.0
PUSH_DEADLINE_S = 30.0
CLIENT_METRICS = 16
SUBSCRIBED = "kip714-subscribed"
UNMATCHED = "kip714-unmatched"


def request(broker: BrokerProcess, api_key: int, version: int, fields: dict[str, Any], *,
            client_id: str = "kip714-test") -> Any:
    return asyncio.run(bootstrap_request(broker.bootstrap, None, TIMEOUT_S, client_id,
                                         api_key, version, fields))


def client_series(broker: BrokerProcess) -> list[tuple[str, dict[str, str], float]]:
    """The pushed client metrics on ``/metrics`` (Kafka's names with ``.`` as ``_``)."""
    url = f"http://127.0.0.1:{broker.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        text = response.read().decode()
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text)
            for s in family.samples if s.name.startswith("org_apache_kafka_")]


def test_subscribed_producer_metrics_reach_prometheus(broker: BrokerProcess) -> None:
    altered = request(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": CLIENT_METRICS, "resource_name": "producers",
                       "configs": [
                           {"name": "metrics", "config_operation": 0,
                            "value": "org.apache.kafka.producer."},
                           {"name": "interval.ms", "config_operation": 0, "value": "1000"},
                           {"name": "match", "config_operation": 0,
                            "value": f"client_id={SUBSCRIBED}"}]}],
        "validate_only": False})
    (result,) = altered.responses
    assert result.error_code == 0, result.error_message
    described = request(broker, ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": CLIENT_METRICS, "resource_name": "producers",
                       "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    (resource,) = described.results
    assert {c.name: c.value for c in resource.configs} == {
        "metrics": "org.apache.kafka.producer.", "interval.ms": "1000",
        "match": f"client_id={SUBSCRIBED}"}

    # the wire answer a client named by the subscription's match gets; others get nothing
    for client_id, wanted in ((SUBSCRIBED, ("org.apache.kafka.producer.",)), (UNMATCHED, ())):
        answer = request(broker, ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0,
                         {"client_instance_id": uuid.UUID(int=0)}, client_id=client_id)
        assert answer.error_code == 0 and answer.client_instance_id != uuid.UUID(int=0)
        assert answer.requested_metrics == wanted
        assert answer.push_interval.total_seconds() == (1.0 if wanted else 300.0)
        assert answer.accepted_compression_types == (4, 3, 1, 2)

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("kip714", 1, 1)])["kip714"].result(TIMEOUT_S)
    producers = {name: Producer({"bootstrap.servers": broker.bootstrap, "client.id": name,
                                 "linger.ms": 5})
                 for name in (SUBSCRIBED, UNMATCHED)}
    deadline = time.monotonic() + PUSH_DEADLINE_S
    pushed: list[tuple[str, dict[str, str], float]] = []
    try:
        while not any(name == "org_apache_kafka_producer_record_queue_time_avg"
                      and labels["client_id"] == SUBSCRIBED for name, labels, _ in pushed):
            if time.monotonic() > deadline:
                pytest.fail(f"no pushed producer metrics within {PUSH_DEADLINE_S}s: {pushed}")
            for producer in producers.values():
                producer.produce("kip714", b"value")
                assert producer.flush(TIMEOUT_S) == 0
            pushed = client_series(broker)
    finally:
        for producer in producers.values():
            producer.flush(1.0)
    print(sorted({name for name, _, _ in pushed}))  # shown with -s
    subscribed = [(n, labels) for n, labels, _ in pushed if labels["client_id"] == SUBSCRIBED]
    assert all(n.startswith("org_apache_kafka_producer_") for n, _ in subscribed)
    assert len({labels["client_instance_id"] for _, labels in subscribed}) == 1
    assert not [s for s in pushed if s[1]["client_id"] == UNMATCHED]
