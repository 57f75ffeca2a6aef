"""Group configs (KIP-848, ``ConfigResource`` type GROUP) through the config handlers, on a
socket-less broker, and the pure rules of ``strata.broker.group.group_config``."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.broker.group import group_config_resource
from strata.broker.group.group_config import (
    GroupConfigError,
    GroupConfigValues,
    in_force,
    validate,
)
from strata.broker.handlers.describe_configs import ConfigResourceType, ConfigSource
from strata.protocol.error_codes import ErrorCode
from strata.security.acl import AclOperation, ResourceType

from .helpers import broker_state
from .test_config_handlers import alter, by_name, describe, incremental

GROUP = ConfigResourceType.GROUP
SESSION = "consumer.session.timeout.ms"
HEARTBEAT = "consumer.heartbeat.interval.ms"
BROKER = {
    "group.consumer.session.timeout.ms": 45_000,
    "group.consumer.min.session.timeout.ms": 45_000,
    "group.consumer.max.session.timeout.ms": 60_000,
    "group.consumer.heartbeat.interval.ms": 5_000,
    "group.consumer.min.heartbeat.interval.ms": 5_000,
    "group.consumer.max.heartbeat.interval.ms": 15_000,
}


# ---------------------------------------------------------------------------- pure rules


def test_unset_configs_take_the_brokers_values() -> None:
    assert validate({}, BROKER) == {SESSION: 45_000, HEARTBEAT: 5_000}
    assert validate({SESSION: "50000"}, BROKER) == {SESSION: 50_000, HEARTBEAT: 5_000}


@pytest.mark.parametrize(("configs", "message"), [
    ({"share.session.timeout.ms": "45000"}, "Unknown group config name: share.session"),
    ({SESSION: "soon"}, "Invalid value soon for configuration consumer.session.timeout.ms"),
    ({SESSION: "0"}, "Value must be at least 1"),
    ({SESSION: "44999"}, f"{SESSION} must be greater than or equal to "
                         "group.consumer.min.session.timeout.ms"),
    ({SESSION: "60001"}, f"{SESSION} must be less than or equal to "
                         "group.consumer.max.session.timeout.ms"),
    ({HEARTBEAT: "4999"}, f"{HEARTBEAT} must be greater than or equal to "
                          "group.consumer.min.heartbeat.interval.ms"),
    ({HEARTBEAT: "15001"}, f"{HEARTBEAT} must be less than or equal to "
                           "group.consumer.max.heartbeat.interval.ms"),
])
def test_kafkas_rules_refuse_with_its_messages(configs: dict[str, str], message: str) -> None:
    with pytest.raises(GroupConfigError, match=message) as caught:
        validate(configs, BROKER)
    assert caught.value.error_name == "INVALID_CONFIG"


def test_the_session_timeout_must_exceed_the_heartbeat_interval() -> None:
    wide = {**BROKER, "group.consumer.min.session.timeout.ms": 1_000}
    with pytest.raises(GroupConfigError, match=f"{SESSION} must be greater than {HEARTBEAT}"):
        validate({SESSION: "5000", HEARTBEAT: "5000"}, wide)
    assert validate({SESSION: "5001", HEARTBEAT: "5000"}, wide)[SESSION] == 5001


def test_values_in_force_fall_back_per_config() -> None:
    broker = GroupConfigValues(45_000, 5_000)
    assert in_force({}, broker) == broker
    assert in_force({HEARTBEAT: "7000"}, broker) == GroupConfigValues(45_000, 7_000)
    assert in_force({SESSION: "x"}, broker) == broker


# ---------------------------------------------------------------------------- the handlers


async def test_a_group_describes_every_config_at_the_brokers_values(tmp_path: Path) -> None:
    state = broker_state(tmp_path, group_consumer_heartbeat_interval_ms="6000")
    result = await describe(state, GROUP, "orders")  # no such group yet: not an error
    assert result.error_code == ErrorCode.none
    configs = by_name(result)
    assert set(configs) == {SESSION, HEARTBEAT}
    assert (configs[HEARTBEAT].value, configs[HEARTBEAT].config_source,
            configs[HEARTBEAT].read_only) == ("6000", ConfigSource.DEFAULT_CONFIG, False)
    assert configs[SESSION].value == "45000" and configs[SESSION].documentation


async def test_set_configs_are_described_as_group_configs_and_used(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    assert await alter(state, GROUP, "orders", {SESSION: "50000", HEARTBEAT: "7000"}) == (
        ErrorCode.none, None)
    configs = by_name(await describe(state, GROUP, "orders", synonyms=True))
    assert (configs[SESSION].value, configs[SESSION].config_source) == (
        "50000", ConfigSource.GROUP_CONFIG)
    assert [(s.name, s.value, s.source) for s in configs[SESSION].synonyms] == [
        (SESSION, "50000", ConfigSource.GROUP_CONFIG)]
    broker = GroupConfigValues(45_000, 5_000)
    assert group_config_resource.values_for(state.topic_store, "orders", broker) == \
        GroupConfigValues(50_000, 7_000)
    assert group_config_resource.values_for(state.topic_store, "other", broker) == broker


async def test_incremental_changes_set_and_delete_one_config(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    assert await incremental(state, GROUP, "g", [(HEARTBEAT, 0, "8000")]) == ErrorCode.none
    assert await incremental(state, GROUP, "g", [(SESSION, 0, "55000")]) == ErrorCode.none
    assert await incremental(state, GROUP, "g", [(HEARTBEAT, 1, None)]) == ErrorCode.none
    configs = by_name(await describe(state, GROUP, "g"))
    assert (configs[SESSION].value, configs[SESSION].config_source) == (
        "55000", ConfigSource.GROUP_CONFIG)
    assert (configs[HEARTBEAT].value, configs[HEARTBEAT].config_source) == (
        "5000", ConfigSource.DEFAULT_CONFIG)
    assert await incremental(state, GROUP, "g", [(SESSION, 2, "1")]) == ErrorCode.invalid_request
    assert await incremental(state, GROUP, "g", [("nope", 2, "1")]) == ErrorCode.invalid_config


async def test_bad_group_configs_are_refused_and_nothing_changes(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    code, message = await alter(state, GROUP, "g", {SESSION: "1000"})
    assert code == ErrorCode.invalid_config
    assert message == f"{SESSION} must be greater than or equal to " \
                      "group.consumer.min.session.timeout.ms"
    assert (await alter(state, GROUP, "g", {"share.heartbeat.interval.ms": "5000"}))[0] == \
        ErrorCode.invalid_config
    assert (await alter(state, GROUP, "", {SESSION: "50000"}))[0] == ErrorCode.invalid_request
    assert (await describe(state, GROUP, "")).error_code == ErrorCode.invalid_request
    assert await alter(state, GROUP, "g", {SESSION: "50000"}, validate_only=True) == (
        ErrorCode.none, None)
    assert by_name(await describe(state, GROUP, "g"))[SESSION].config_source == \
        ConfigSource.DEFAULT_CONFIG


class _DenyOnGroups:
    """An authorizer denying ``operation`` on every group, allowing everything else."""

    def __init__(self, operation: AclOperation) -> None:
        self.operation = operation

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        return not (operation is self.operation and resource_type is ResourceType.GROUP)


async def test_group_configs_are_authorized_on_the_group(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    state.authorizer = _DenyOnGroups(AclOperation.ALTER_CONFIGS)  # type: ignore[assignment]
    code, message = await alter(state, GROUP, "g", {SESSION: "50000"})
    assert code == ErrorCode.group_authorization_failed and message is not None
    assert (await describe(state, GROUP, "g")).error_code == ErrorCode.none
    state.authorizer = _DenyOnGroups(AclOperation.DESCRIBE_CONFIGS)  # type: ignore[assignment]
    assert (await describe(state, GROUP, "g")).error_code == \
        ErrorCode.group_authorization_failed
