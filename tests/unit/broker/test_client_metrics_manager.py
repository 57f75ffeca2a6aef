"""KIP-714 on the broker, time injected: GetTelemetrySubscriptions / PushTelemetry answers as
Kafka's ClientMetricsManager gives them, the OTLP -> Prometheus mapping, and the exported
series (deltas summed, expiry after three intervals, bounded cardinality). Pure."""

from __future__ import annotations

import gzip
import uuid
from collections.abc import Mapping

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from strata.broker.telemetry.client_metrics_collector import ClientMetricsCollector
from strata.broker.telemetry.client_metrics_config import scope_of
from strata.broker.telemetry.client_metrics_manager import (
    ClientConnection,
    ClientMetricsManager,
)
from strata.broker.telemetry.otlp import (
    InvalidTelemetry,
    TelemetryTooLarge,
    decode_metrics,
    prometheus_name,
)
from strata.storage.clock import ManualClock
from strata.storage.compression import CompressionType, compress

CLIENT = ClientConnection("orders-producer", "127.0.0.1", 50000)
QUEUE_TIME = "org.apache.kafka.producer.record.queue.time.avg"


def metrics_data(*, queue_time: float = 1.5, requests: int = 4,
                 temporality: int = 1) -> bytes:
    data = metrics_pb2.MetricsData()
    scope = data.resource_metrics.add().scope_metrics.add()
    gauge = scope.metrics.add(name=QUEUE_TIME)
    point = gauge.gauge.data_points.add(as_double=queue_time)
    point.attributes.append(KeyValue(key="topic", value=AnyValue(string_value="orders")))
    total = scope.metrics.add(name="org.apache.kafka.producer.node.request.total")
    total.sum.is_monotonic = True
    total.sum.aggregation_temporality = temporality  # type: ignore[assignment,unused-ignore]
    node = total.sum.data_points.add(as_int=requests)
    node.attributes.append(KeyValue(key="node.id", value=AnyValue(int_value=1)))
    scope.metrics.add(name="org.apache.kafka.some.histogram").histogram.data_points.add()
    return bytes(data.SerializeToString())


class Store:
    def __init__(self) -> None:
        self.scopes: dict[str, dict[str, str]] = {}

    def __call__(self) -> Mapping[str, Mapping[str, str]]:
        return self.scopes


def manager(configs: dict[str, str] | None = None, **kwargs: int) -> tuple[
        ClientMetricsManager, ManualClock, Store, ClientMetricsCollector]:
    clock, store = ManualClock(), Store()
    if configs is not None:
        store.scopes[scope_of("sub")] = configs
    collector = ClientMetricsCollector(clock)
    return ClientMetricsManager(clock, store, exporter=collector, **kwargs), clock, store, collector


def test_new_client_gets_an_id_and_its_subscription() -> None:
    m, _, _, _ = manager({"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
    answer = m.get_subscriptions(uuid.UUID(int=0), CLIENT)
    assert answer.error == "NONE" and answer.client_instance_id != uuid.UUID(int=0)
    assert answer.requested_metrics == ("org.apache.kafka.producer.",)
    assert answer.push_interval_ms == 1000 and answer.telemetry_max_bytes == 1024 * 1024
    assert answer.accepted_compression_types == (4, 3, 1, 2) and answer.delta_temporality
    assert m.get_subscriptions(None, CLIENT).client_instance_id not in (
        answer.client_instance_id, uuid.UUID(int=0))


def test_no_matching_subscription_requests_nothing_at_the_default_interval() -> None:
    m, _, _, _ = manager({"metrics": "*", "match": "client_id=someone-else"})
    answer = m.get_subscriptions(None, CLIENT)
    assert answer.requested_metrics == () and answer.push_interval_ms == 300_000


def test_push_cycle_throttling_and_export() -> None:
    m, clock, _, collector = manager({"metrics": "*", "interval.ms": "1000"})
    sub = m.get_subscriptions(None, CLIENT)
    cid = sub.client_instance_id
    again = m.get_subscriptions(cid, CLIENT)
    assert again.error == "THROTTLING_QUOTA_EXCEEDED"
    assert m.push(cid, sub.subscription_id, False, 0, metrics_data(), CLIENT).error == "NONE"
    assert m.push(cid, sub.subscription_id, False, 0, metrics_data(),
                  CLIENT).error == "THROTTLING_QUOTA_EXCEEDED"
    clock.advance(1000)
    assert m.push(cid, sub.subscription_id, False, 0, metrics_data(requests=6),
                  CLIENT).error == "NONE"
    assert collector.clients() == [cid]
    clock.advance(1000)
    assert m.push(cid, sub.subscription_id + 1, False, 0, b"", CLIENT).error == (
        "UNKNOWN_SUBSCRIPTION_ID")
    # the client recovers at once with a new GetTelemetrySubscriptions
    assert m.get_subscriptions(cid, CLIENT).error == "NONE"


def test_push_refusals_in_kafkas_order() -> None:
    m, clock, _, _ = manager({"metrics": "*", "interval.ms": "100"}, telemetry_max_bytes=64)
    assert m.push(None, 0, False, 0, b"", CLIENT).error == "INVALID_REQUEST"
    assert m.push(uuid.UUID(int=0), 0, False, 0, b"", CLIENT).error == "INVALID_REQUEST"
    sub = m.get_subscriptions(None, CLIENT)
    cid, sid = sub.client_instance_id, sub.subscription_id
    assert m.push(cid, sid, False, 9, b"x", CLIENT).error == "UNSUPPORTED_COMPRESSION_TYPE"
    assert m.get_subscriptions(cid, CLIENT).error == "NONE"  # allowed after that error
    clock.advance(100)
    assert m.push(cid, sid, False, 0, b"x" * 65, CLIENT).error == "TELEMETRY_TOO_LARGE"
    clock.advance(100)
    assert m.push(cid, sid, False, 0, b"\xff\xff\xff", CLIENT).error == "INVALID_RECORD"
    clock.advance(100)
    big = compress(CompressionType.GZIP, b"\x00" * 1000)
    assert len(big) <= 64
    assert m.push(cid, sid, False, 1, big, CLIENT).error == "TELEMETRY_TOO_LARGE"
    assert m.push(cid, sid, True, 0, b"", CLIENT).error == "NONE"  # terminating: not throttled
    clock.advance(100)
    assert m.push(cid, sid, False, 0, b"", CLIENT).error == "INVALID_REQUEST"


def test_changed_subscriptions_give_a_new_subscription_id() -> None:
    m, _, store, _ = manager({"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
    first = m.get_subscriptions(None, CLIENT)
    cid = first.client_instance_id
    store.scopes[scope_of("sub")] = {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
    assert m.push(cid, first.subscription_id, False, 0, b"", CLIENT).error == (
        "UNKNOWN_SUBSCRIPTION_ID")
    second = m.get_subscriptions(cid, CLIENT)
    assert second.error == "NONE" and second.client_instance_id == cid
    assert second.subscription_id != first.subscription_id
    assert second.requested_metrics == ("org.apache.kafka.",)


def test_client_software_from_api_versions_is_matched() -> None:
    m, _, _, _ = manager({"metrics": "*", "match": "client_software_name=confluent-.*"})
    assert m.get_subscriptions(None, CLIENT).requested_metrics == ()
    m.note_client_software("127.0.0.1", 50001, "confluent-kafka-python", "2.16.1")
    other = ClientConnection("c", "127.0.0.1", 50001)
    assert m.get_subscriptions(None, other).requested_metrics == ("*",)


def test_instances_are_bounded_and_expire() -> None:
    m, clock, _, _ = manager({"metrics": "*", "interval.ms": "1000"}, max_instances=2)
    for _ in range(3):
        m.get_subscriptions(None, CLIENT)
    assert len(m.instances) == 2
    clock.advance(60_000)
    m.get_subscriptions(None, CLIENT)
    assert len(m.instances) == 1


# ------------------------------------------------------------------ OTLP -> Prometheus


def test_kafka_names_become_prometheus_names() -> None:
    assert prometheus_name(QUEUE_TIME) == "org_apache_kafka_producer_record_queue_time_avg"
    assert prometheus_name("1.bad-name") == "_1_bad_name"


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_decode_every_accepted_codec(codec: int) -> None:
    payload = metrics_data()
    body = payload if codec == 0 else compress(codec, payload)
    decoded = decode_metrics(body, codec, 1 << 20, client_instance_id="i", client_id="c")
    assert decoded.skipped == 1  # the histogram
    gauge, counter = decoded.samples
    assert gauge.name == "org_apache_kafka_producer_record_queue_time_avg"
    assert gauge.kind == "gauge" and gauge.value == 1.5 and not gauge.delta
    assert dict(gauge.labels) == {"client_instance_id": "i", "client_id": "c",
                                  "topic": "orders"}
    assert counter.name == "org_apache_kafka_producer_node_request"  # _total added on export
    assert counter.kind == "counter" and counter.delta and counter.value == 4
    assert dict(counter.labels)["node_id"] == "1"


def test_undecodable_payloads_are_refused() -> None:
    with pytest.raises(InvalidTelemetry):
        decode_metrics(b"not gzip", 1, 1 << 20, client_instance_id="i", client_id="c")
    with pytest.raises(TelemetryTooLarge):
        decode_metrics(gzip.compress(metrics_data()), 1, 10, client_instance_id="i",
                       client_id="c")


def scrape(registry: CollectorRegistry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_exported_series_sum_deltas_and_expire_after_three_intervals() -> None:
    clock, registry = ManualClock(), CollectorRegistry()
    collector = ClientMetricsCollector(clock, registry)
    cid = uuid.uuid4()
    for requests in (4, 6):
        decoded = decode_metrics(metrics_data(requests=requests), 0, 1 << 20,
                                 client_instance_id=str(cid), client_id="p")
        collector.export(cid, 1000, decoded.samples, clock.milliseconds())
    got = scrape(registry)
    labels = {"client_instance_id": str(cid), "client_id": "p"}
    assert got[("org_apache_kafka_producer_record_queue_time_avg",
                frozenset({**labels, "topic": "orders"}.items()))] == 1.5
    assert got[("org_apache_kafka_producer_node_request_total",
                frozenset({**labels, "node_id": "1"}.items()))] == 10
    assert got[("strata_client_metrics_clients", frozenset())] == 1
    clock.advance(3000)
    assert ("strata_client_metrics_clients", frozenset()) in scrape(registry)
    assert len([k for k in scrape(registry) if k[0].startswith("org_")]) == 2
    clock.advance(1)
    got = scrape(registry)
    assert got[("strata_client_metrics_clients", frozenset())] == 0
    assert not [k for k in got if k[0].startswith("org_")]


def test_cumulative_sums_replace_and_cardinality_is_capped() -> None:
    clock = ManualClock()
    collector = ClientMetricsCollector(clock, max_clients=2, max_series_per_client=1)
    first = uuid.uuid4()
    for requests in (4, 6):
        decoded = decode_metrics(metrics_data(requests=requests, temporality=2), 0, 1 << 20,
                                 client_instance_id=str(first), client_id="p")
        collector.export(first, 1000, decoded.samples[1:], clock.milliseconds())
    (value,) = collector._clients[first].series.values()
    assert value == 6
    decoded = decode_metrics(metrics_data(), 0, 1 << 20, client_instance_id="x", client_id="p")
    collector.export(first, 1000, decoded.samples, clock.milliseconds())
    assert len(collector._clients[first].series) == 1 and collector.dropped == 2
    for _ in range(2):
        clock.advance(1)
        collector.export(uuid.uuid4(), 1000, [], clock.milliseconds())
    assert first not in collector.clients() and len(collector.clients()) == 2
