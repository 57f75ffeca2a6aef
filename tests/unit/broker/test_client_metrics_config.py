"""The ``client-metrics`` resource (KIP-714): Kafka's validation, match selectors, evaluation of
a client against the subscriptions (metrics, interval, subscription id). Pure."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from strata.broker.telemetry.client_instance import (
    ClientInstance,
    evaluate,
    java_uuid_hash,
    subscription_id,
)
from strata.broker.telemetry.client_metrics_config import (
    ClientInstanceMetadata,
    ClientMetricsConfigError,
    parse_match,
    scope_of,
    subscription,
    subscriptions_of,
    validate,
)

ID = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")


BASE = ClientInstanceMetadata(
    client_instance_id=str(ID), client_id="orders-producer",
    client_software_name="confluent-kafka-python",
    client_software_version="2.16.1-rdkafka-2.16.0",
    client_source_address="127.0.0.1", client_source_port="50000")


def metadata(client_id: str | None = BASE.client_id,
             client_software_name: str | None = BASE.client_software_name,
             ) -> ClientInstanceMetadata:
    return dataclasses.replace(BASE, client_id=client_id,
                               client_software_name=client_software_name)


@pytest.mark.parametrize(("name", "configs", "error"), [
    ("", {}, "INVALID_REQUEST"),
    ("s", {"metrics.prefix": "x"}, "INVALID_REQUEST"),
    ("s", {"interval.ms": "99"}, "INVALID_REQUEST"),
    ("s", {"interval.ms": "3600001"}, "INVALID_REQUEST"),
    ("s", {"interval.ms": "ten"}, "INVALID_CONFIG"),
    ("s", {"match": "client_id"}, "INVALID_CONFIG"),
    ("s", {"match": "client_id="}, "INVALID_CONFIG"),
    ("s", {"match": "client_id=a=b"}, "INVALID_CONFIG"),
    ("s", {"match": "client_rack=a"}, "INVALID_CONFIG"),
    ("s", {"match": "client_id=(unclosed"}, "INVALID_CONFIG"),
])
def test_refusals_carry_kafkas_error(name: str, configs: dict[str, str], error: str) -> None:
    with pytest.raises(ClientMetricsConfigError) as refused:
        validate(name, configs)
    assert refused.value.error_name == error


def test_valid_subscription_with_defaults() -> None:
    validate("s", {"interval.ms": "100"})
    validate("s", {"interval.ms": "3600000", "match": "client_id=a.*, client_source_port=5"})
    sub = subscription("s", {"metrics": "org.apache.kafka.producer., org.apache.kafka.consumer."})
    assert sub.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.consumer.")
    assert sub.interval_ms == 300_000 and dict(sub.match) == {}
    assert not sub.all_metrics
    assert subscription("s", {"metrics": "*"}).all_metrics


def test_stored_scopes_hold_the_subscriptions_and_nothing_else() -> None:
    stored = {"": {"log.retention.ms": "1"}, "1": {"num.io.threads": "4"},
              scope_of("b"): {"metrics": "x"}, scope_of("a"): {"interval.ms": "1000"},
              scope_of("broken"): {"interval.ms": "1"}}
    assert [s.name for s in subscriptions_of(stored)] == ["a", "b"]


def test_match_is_a_full_match_of_every_selector() -> None:
    client = metadata()
    assert client.matches(parse_match(["client_id=orders-.*"]))
    assert not client.matches(parse_match(["client_id=orders"]))  # full match, not a prefix
    assert client.matches(parse_match([
        "client_software_name=confluent-kafka-python", "client_source_address=127\\.0\\.0\\.1",
        f"client_instance_id={ID}", "client_source_port=50000"]))
    assert not client.matches(parse_match(["client_id=orders-.*", "client_source_port=1"]))
    assert client.matches({})  # no selector: every client
    unknown_software = metadata(client_software_name=None)
    assert not unknown_software.matches(parse_match(["client_software_name=.*"]))


def test_evaluation_unions_matching_subscriptions_smallest_interval() -> None:
    subs = [subscription("a", {"metrics": "org.apache.kafka.producer.", "interval.ms": "5000"}),
            subscription("b", {"metrics": "org.apache.kafka.consumer.", "interval.ms": "2000",
                               "match": "client_id=orders-.*"}),
            subscription("c", {"metrics": "*", "interval.ms": "100", "match": "client_id=x"})]
    assert evaluate(subs, metadata()) == (
        ("org.apache.kafka.consumer.", "org.apache.kafka.producer."), 2000)
    assert evaluate(subs, metadata(client_id="x")) == (("*",), 100)
    assert evaluate([], metadata()) == ((), 300_000)


def test_subscription_id_changes_with_the_matching_set_only() -> None:
    base = subscription_id(("a", "b"), 1000, ID)
    assert base == subscription_id(("a", "b"), 1000, ID)
    assert base != subscription_id(("a",), 1000, ID)
    assert base != subscription_id(("a", "b"), 2000, ID)
    assert base != subscription_id(("a", "b"), 1000, uuid.uuid4())
    assert -2**31 <= base < 2**31
    # Kafka's Uuid.hashCode: (int) (h ^ h >>> 32) with h = msb ^ lsb
    assert java_uuid_hash(uuid.UUID(int=(1 << 64) | 3)) == 2
    instance = ClientInstance.create(ID, metadata(), [subscription("a", {"metrics": "a"})], ())
    assert instance.subscription_id == subscription_id(("a",), 300_000, ID)
