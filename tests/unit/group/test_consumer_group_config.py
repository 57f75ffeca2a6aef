"""The ``group.consumer.*`` broker settings: Kafka's names, defaults and bounds."""

from __future__ import annotations

from strata.broker.config import BrokerConfig
from strata.broker.group.consumer_group_coordinator import assignor_name, consumer_group_config
from strata.broker.group.consumer_group_membership import ConsumerGroupConfig


def test_defaults_are_kafkas() -> None:
    assert consumer_group_config(BrokerConfig({})) == ConsumerGroupConfig(
        session_timeout_ms=45_000, heartbeat_interval_ms=5_000, max_size=2_147_483_647,
        assignors=("uniform", "range"))


def test_values_outside_their_bounds_are_brought_within() -> None:
    config = consumer_group_config(BrokerConfig({
        "group.consumer.session.timeout.ms": "1000",
        "group.consumer.heartbeat.interval.ms": "60000",
        "group.consumer.max.size": "3"}))
    assert (config.session_timeout_ms, config.heartbeat_interval_ms, config.max_size) \
        == (45_000, 15_000, 3)
    lowered = consumer_group_config(BrokerConfig({
        "group.consumer.min.session.timeout.ms": "6000",
        "group.consumer.session.timeout.ms": "6000"}))
    assert lowered.session_timeout_ms == 6000


def test_assignors_by_name_or_kafkas_class_name() -> None:
    assert assignor_name("org.apache.kafka.coordinator.group.assignor.RangeAssignor") == "range"
    assert assignor_name("uniform") == "uniform"
    config = consumer_group_config(BrokerConfig({
        "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,"
                                    "uniform,sticky"}))
    assert config.assignors == ("range", "uniform")  # unknown ones are left out
    assert config.default_assignor == "range"
