"""Broker configs through real clients: per-broker dynamic configs, broker loggers, and the
deprecated ``message.format.version`` — what admin tools send, answered as Kafka answers it.

confluent-kafka (librdkafka) sets a per-broker SASL setting and a listener-prefixed one with
IncrementalAlterConfigs and reads them back with DescribeConfigs; kafka-python (the client here
with a BROKER_LOGGER resource type) lists the broker's loggers and changes one's level; both
create a topic with ``message.format.version``. The broker log must hold no traceback.
"""

from __future__ import annotations

import uuid
from typing import Final

import pytest

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.integration

TIMEOUT_S: Final = 30


def test_confluent_kafka_sets_per_broker_configs(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewTopic,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    node = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("sasl.kerberos.min.time.before.relogin", "120000",
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("listener.name.plaintext.max.connections", "500",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([node])[node].result(timeout=TIMEOUT_S)
    described = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([described])[described].result(timeout=TIMEOUT_S)
    relogin = configs["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source, relogin.is_read_only) == (
        "120000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    assert configs["listener.name.plaintext.max.connections"].value == "500"

    topic = f"mfv.ck.{uuid.uuid4().hex[:6]}"
    futures = admin.create_topics([NewTopic(topic, 1, 1,
                                            config={"message.format.version": "2.8-IV1"})])
    futures[topic].result(timeout=TIMEOUT_S)
    log = broker.log_path.read_text(encoding="utf-8", errors="replace")
    assert "message.format.version is deprecated and will be ignored" in log
    assert "Traceback" not in log


def test_kafka_python_lists_and_sets_broker_loggers(broker: BrokerProcess) -> None:
    from kafka.admin import (
        AlterConfigOp,
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewTopic,
    )

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        loggers = ConfigResource(ConfigResourceType.BROKER_LOGGER, "1")

        def levels() -> dict[str, str]:
            described = admin.describe_configs([loggers], config_filter="all")
            return {name: config["value"]
                    for name, config in described["broker_logger"]["1"].items()}

        before = levels()
        assert before["root"] == "INFO"
        assert before["strata.broker.server"] == "INFO"
        admin.alter_configs([ConfigResource(
            ConfigResourceType.BROKER_LOGGER, "1",
            configs={"strata.broker.server": (AlterConfigOp.SET, "DEBUG")})],
            incremental=True, raise_on_unknown=False)
        assert levels()["strata.broker.server"] == "DEBUG"
        admin.alter_configs([ConfigResource(
            ConfigResourceType.BROKER_LOGGER, "1",
            configs={"strata.broker.server": (AlterConfigOp.DELETE, None)})],
            incremental=True, raise_on_unknown=False)
        assert levels()["strata.broker.server"] == "INFO"
        topic = f"mfv.kp.{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(topic, 1, 1,
                                      topic_configs={"message.format.version": "3.0"})])
    finally:
        admin.close()
    assert "Traceback" not in broker.log_path.read_text(encoding="utf-8", errors="replace")
