"""The KIP-714 handlers on a real BrokerState: ``client-metrics`` resources through
IncrementalAlterConfigs / AlterConfigs / DescribeConfigs (stored with the dynamic configs, kept
across a restart), and GetTelemetrySubscriptions / PushTelemetry on the wire types."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from strata.broker.broker_state import BrokerState
from strata.broker.cluster.image import broker_configs_key, build_image, encode_configs
from strata.broker.handlers import get_telemetry_subscriptions, push_telemetry
from strata.broker.handlers.describe_configs import ConfigResourceType
from strata.broker.telemetry.client_metrics_config import scope_of, subscriptions_of
from strata.broker.topic_store import FileTopicStore
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode

from .helpers import broker_state, context, request
from .test_config_handlers import alter, by_name, describe, incremental

CLIENT_METRICS = ConfigResourceType.CLIENT_METRICS
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def test_subscription_set_described_and_stored(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    assert await incremental(state, CLIENT_METRICS, "producers", [
        ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "1000"),
        ("match", SET, "client_software_name=confluent-.*")]) == ErrorCode.none
    assert await incremental(state, CLIENT_METRICS, "producers", [
        ("metrics", APPEND, "org.apache.kafka.consumer.")]) == ErrorCode.none
    result = await describe(state, CLIENT_METRICS, "producers", version=4)
    assert result.error_code == ErrorCode.none
    configs = by_name(result)
    assert configs["metrics"].value == "org.apache.kafka.producer.,org.apache.kafka.consumer."
    assert configs["interval.ms"].value == "1000"
    assert configs["interval.ms"].config_source == 7  # Kafka's ConfigSource.CLIENT_METRICS_CONFIG
    assert not configs["interval.ms"].read_only and configs["metrics"].config_type == 7
    # stored with the dynamic configs: a restarted broker still has it
    reopened = FileTopicStore.open(tmp_path / "data")
    assert dict(reopened.broker_configs("client-metrics/producers"))["interval.ms"] == "1000"
    # a never-set name describes as empty; deleting every config deletes the subscription
    assert by_name(await describe(state, CLIENT_METRICS, "other")) == {}
    assert await incremental(state, CLIENT_METRICS, "producers", [
        ("metrics", DELETE, None), ("interval.ms", DELETE, None),
        ("match", DELETE, None)]) == ErrorCode.none
    assert "client-metrics/producers" not in state.topic_store.all_broker_configs()


async def test_refusals(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    assert await incremental(state, CLIENT_METRICS, "s", [
        ("interval.ms", SET, "10")]) == ErrorCode.invalid_request
    assert await incremental(state, CLIENT_METRICS, "s", [
        ("nope", SET, "1")]) == ErrorCode.invalid_request
    assert await incremental(state, CLIENT_METRICS, "s", [
        ("match", SET, "client_rack=a")]) == ErrorCode.invalid_config
    assert await incremental(state, CLIENT_METRICS, "s", [
        ("interval.ms", APPEND, "1")]) == ErrorCode.invalid_request
    assert await incremental(state, CLIENT_METRICS, "", [
        ("interval.ms", SET, "1000")]) == ErrorCode.invalid_request
    assert (await describe(state, CLIENT_METRICS, "")).error_code == ErrorCode.invalid_request
    assert state.topic_store.all_broker_configs() == {}
    error, _ = await alter(state, CLIENT_METRICS, "s", {"interval.ms": "500"})
    assert error == ErrorCode.none
    assert by_name(await describe(state, CLIENT_METRICS, "s"))["interval.ms"].value == "500"


async def get(state: BrokerState, instance_id: uuid.UUID) -> Any:
    body = request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, client_instance_id=instance_id)
    return await get_telemetry_subscriptions.handle(
        context(state, ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0), body)


async def test_telemetry_handlers_answer_on_the_wire_types(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await incremental(state, CLIENT_METRICS, "all", [("metrics", SET, "*"),
                                                     ("interval.ms", SET, "60000")])
    answer = await get(state, uuid.UUID(int=0))
    assert answer.error_code == ErrorCode.none
    cid = answer.client_instance_id
    assert cid != uuid.UUID(int=0)
    assert answer.requested_metrics == ("*",)
    assert answer.push_interval.total_seconds() == 60
    throttled = await get(state, cid)
    assert throttled.error_code == ErrorCode.throttling_quota_exceeded
    push = request(ApiKey.PUSH_TELEMETRY, 0, client_instance_id=cid,
                   subscription_id=answer.subscription_id,
                   terminating=False, compression_type=0, metrics=b"")
    response = await push_telemetry.handle(context(state, ApiKey.PUSH_TELEMETRY, 0), push)
    assert response.error_code == ErrorCode.none
    response = await push_telemetry.handle(context(state, ApiKey.PUSH_TELEMETRY, 0), push)
    assert response.error_code == ErrorCode.throttling_quota_exceeded


def test_a_cluster_image_carries_subscriptions_to_every_broker() -> None:
    key = broker_configs_key(scope_of("producers"))
    image = build_image({key: (encode_configs({"interval.ms": "1000"}), 1)}, 1)
    assert [s.name for s in subscriptions_of(image.broker_configs)] == ["producers"]
    assert dict(image.broker_configs)[scope_of("producers")] == {"interval.ms": "1000"}
