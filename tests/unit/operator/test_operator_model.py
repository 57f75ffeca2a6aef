"""Spec parsing, conditions, settings and the apply comparison (pure parts of the shell)."""

from __future__ import annotations

import pytest

from strata.operator import conditions
from strata.operator.kube import is_subset, matches, without
from strata.operator.model import BrokerNames, BrokerSpec, SpecError, TopicSpec
from strata.operator.settings import Settings


def test_broker_spec_defaults_and_values() -> None:
    spec = BrokerSpec.parse({"metadata": {"etcd": {"endpoints": ["e:2379"]}}})
    assert spec.replicas == 3 and spec.admin_enabled and spec.kafka_port == 9092
    assert spec.metadata.etcd_endpoints == ("e:2379",)
    parsed = BrokerSpec.parse({"config": {"a.b": 1, "c": True, "listeners": "x"},
                               "metadata": {"managed": True}})
    assert parsed.config == {"a.b": "1", "c": "true"}
    with pytest.raises(SpecError):
        BrokerSpec.parse({"replicas": "three"})


def test_topic_spec_name_defaults_to_the_resource_name() -> None:
    assert TopicSpec.parse({"broker": "b"}, "orders").topic_name == "orders"
    assert TopicSpec.parse({"broker": "b", "topicName": "x.y"}, "orders").topic_name == "x.y"
    assert TopicSpec.parse({"broker": "b"}, "t").replicas is None
    with pytest.raises(SpecError):
        TopicSpec.parse({}, "orders")


def test_names() -> None:
    names = BrokerNames("events", "kafka")
    assert names.bootstrap_servers() == "events-bootstrap.kafka.svc:9092"
    assert names.pod(2) == "events-2"
    assert names.etcd_endpoints(1) == ("events-etcd-0.events-etcd-peers.kafka.svc:2379",)


def test_ready_condition_keeps_transition_time_while_status_holds() -> None:
    first = conditions.ready_condition(False, "Creating", "m", 1, now="T1")
    same = conditions.ready_condition(False, "PodsNotReady", "n", 2, [first], now="T2")
    flipped = conditions.ready_condition(True, "BrokersReady", "ok", 2, [same], now="T3")
    assert first["lastTransitionTime"] == same["lastTransitionTime"] == "T1"
    assert flipped["lastTransitionTime"] == "T3"
    assert conditions.ready_reason({"conditions": [flipped]}) == ("True", "BrokersReady")
    assert not conditions.status_changed({"a": 1, "b": 2}, {"a": 1})
    assert conditions.status_changed({"a": 1}, {"a": 2})


def test_is_subset_ignores_fields_the_server_added() -> None:
    desired = {"spec": {"ports": [{"port": 1}], "x": "y"}}
    assert is_subset(desired, {"spec": {"ports": [{"port": 1, "protocol": "TCP"}], "x": "y",
                                        "clusterIP": "10.0.0.1"}})
    assert not is_subset(desired, {"spec": {"ports": [{"port": 2}], "x": "y"}})
    assert not is_subset(desired, {"spec": {"ports": [{"port": 1}, {"port": 2}], "x": "y"}})
    assert without({"spec": {"a": 1, "b": 2}}, (("spec", "a"),)) == {"spec": {"b": 2}}
    assert matches({"metadata": {"labels": {"a": "1", "b": "2"}}}, {"a": "1"})
    assert not matches({"metadata": {}}, {"a": "1"})


def test_settings_from_environment() -> None:
    settings = Settings.from_env({"STRATA_OPERATOR_RECONCILE_INTERVAL": "2",
                                  "STRATA_OPERATOR_BOOTSTRAP_SERVERS": "h:1"})
    assert settings.reconcile_interval == 2.0 and settings.bootstrap_override == "h:1"
    assert Settings.from_env({}) == Settings()
