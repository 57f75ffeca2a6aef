"""``GET /metrics`` of a broker process after real client traffic: the series Prometheus scrapes
(request, log, replication, group layers) carry the values the traffic implies."""

from __future__ import annotations

import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.integration

TIMEOUT_S = 20.0


def scrape(broker: BrokerProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    url = f"http://127.0.0.1:{broker.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        assert response.status == 200
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def labels(**values: str) -> frozenset[tuple[str, str]]:
    return frozenset(values.items())


def test_metrics_after_produce_and_commit(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("m-topic", 1, 1)])["m-topic"].result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(5):
        producer.produce("m-topic", f"v{i}".encode(), partition=0)
        producer.flush(TIMEOUT_S)  # one batch each: five appends
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "m-group"})
    try:
        consumer.commit(offsets=[TopicPartition("m-topic", 0, 2)], asynchronous=False)
    finally:
        consumer.close()

    got = scrape(broker)
    tp = labels(topic="m-topic", partition="0")
    assert got[("strata_log_appended_records_total", tp)] == 5
    assert got[("strata_log_end_offset", tp)] == 5
    assert got[("strata_replication_high_watermark", tp)] == 5
    assert got[("strata_request_total", labels(api="Produce"))] >= 5
    assert got[("strata_request_latency_seconds_count", labels(api="Produce"))] >= 5
    assert got[("strata_request_total", labels(api="DescribeCluster"))] == 0  # present at zero
    assert got[("strata_network_received_bytes_total", frozenset())] > 0
    assert got[("strata_network_sent_bytes_total", frozenset())] > 0
    group = labels(group="m-group", topic="m-topic", partition="0")
    assert got[("strata_group_committed_offset", group)] == 2
    assert got[("strata_group_lag_records", group)] == 3
    assert got[("strata_group_count", labels(state="Empty"))] >= 1
    assert got[("strata_replication_under_replicated_partitions", frozenset())] == 0
