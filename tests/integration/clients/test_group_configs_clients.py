"""Group configs (KIP-848, ``ConfigResource`` type GROUP) through real admin clients: what
``kafka-configs --entity-type groups`` and librdkafka's / kafka-python's admin APIs send.

confluent-kafka sets a group's heartbeat interval with IncrementalAlterConfigs and reads it
back (source DYNAMIC_GROUP_CONFIG) next to the session timeout at the broker's value (DEFAULT);
an out-of-bounds value is refused with INVALID_CONFIG and Kafka's message; kafka-python sets a
session timeout and tells it from the defaults (its "modified" filter reads the source). The
broker log must hold no traceback.
"""

from __future__ import annotations

import uuid
from typing import Final

import pytest

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.integration

TIMEOUT_S: Final = 30


def test_confluent_kafka_sets_and_describes_a_groups_configs(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    group = f"cfg-{uuid.uuid4().hex[:6]}"
    change = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("consumer.heartbeat.interval.ms", "7000",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(timeout=TIMEOUT_S)
    described = ConfigResource(ResourceType.GROUP, group)
    configs = admin.describe_configs([described])[described].result(timeout=TIMEOUT_S)
    heartbeat = configs["consumer.heartbeat.interval.ms"]
    assert (heartbeat.value, heartbeat.source) == ("7000",
                                                   ConfigSource.GROUP_CONFIG.value)
    session = configs["consumer.session.timeout.ms"]
    assert (session.value, session.source) == ("45000", ConfigSource.DEFAULT_CONFIG.value)

    too_short = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "1000",
                    incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([too_short])[too_short].result(timeout=TIMEOUT_S)
    error = refused.value.args[0]
    assert error.name() == "INVALID_CONFIG"
    assert "consumer.session.timeout.ms must be greater than or equal to " \
           "group.consumer.min.session.timeout.ms" in error.str()
    log = broker.log_path.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log


def test_kafka_python_alters_and_describes_a_groups_configs(broker: BrokerProcess) -> None:
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    group = f"cfg-{uuid.uuid4().hex[:6]}"
    resource = ConfigResource(ConfigResourceType.GROUP, group)

    def described(config_filter: str) -> dict[str, str]:
        answer = admin.describe_configs([resource], config_filter=config_filter)
        return {name: config["value"] for name, config in answer["group"][group].items()}

    try:
        assert described("all") == {"consumer.session.timeout.ms": "45000",
                                    "consumer.heartbeat.interval.ms": "5000"}
        assert described("modified") == {}
        admin.alter_configs([ConfigResource(
            ConfigResourceType.GROUP, group,
            configs={"consumer.session.timeout.ms": (AlterConfigOp.SET, "50000")})],
            incremental=True)
        assert described("modified") == {"consumer.session.timeout.ms": "50000"}
    finally:
        admin.close()
    assert "Traceback" not in broker.log_path.read_text(encoding="utf-8", errors="replace")
