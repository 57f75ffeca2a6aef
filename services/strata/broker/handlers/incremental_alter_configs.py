"""IncrementalAlterConfigs (key 44, v0-1): change some dynamic configs of a resource.

Each config carries an operation (Kafka's ``AlterConfigOp.OpType``): SET (0) a value, DELETE (1)
the override (back to the next layer), APPEND (2) / SUBTRACT (3) items of a LIST config
(``cleanup.policy``), starting from the value in force. The result replaces the resource's
dynamic configs through ``alter_configs.alter_resource``, so validation, persistence and
application are AlterConfigs' (see there). Kafka's errors: a key twice in one resource, an
unknown operation, a null value for SET/APPEND/SUBTRACT, APPEND/SUBTRACT on a non-list config:
INVALID_REQUEST (APPEND/SUBTRACT on an unknown key: INVALID_CONFIG).

BROKER_LOGGER resources (named by this broker's id, else INVALID_REQUEST) change the level of
the broker's loggers until it restarts (``strata.broker.broker_logger``: SET and DELETE only);
AlterConfigs does not serve them (INVALID_REQUEST), as in Kafka.
"""

from __future__ import annotations

import enum
from collections import Counter
from typing import Any

from strata.broker.broker_logger import LoggerConfigError, alter_logger_levels
from strata.broker.broker_settings import SETTINGS_BY_NAME, ConfigType
from strata.broker.broker_state import BrokerState
from strata.broker.group import group_config
from strata.broker.handlers import ApiError
from strata.broker.handlers.alter_configs import (
    alter_each,
    alter_resource,
    current_configs,
    non_null,
)
from strata.broker.handlers.describe_configs import (
    ConfigResourceType,
    broker_key_type,
    broker_scope,
    topic_config_type,
)
from strata.broker.network.request_context import RequestContext
from strata.broker.telemetry import client_metrics_resource
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.storage.log_config import CONFIGS_BY_NAME, TOPIC_CONFIGS, LogConfig


class OpType(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _list_value_in_force(state: BrokerState, resource_type: int, resource_name: str,
                         name: str, configs: dict[str, str]) -> list[str]:
    """The current items of LIST config ``name`` (INVALID_REQUEST/CONFIG if not a list)."""
    if resource_type == ConfigResourceType.TOPIC:
        cdef = CONFIGS_BY_NAME.get(name)
        if cdef is None:
            raise ApiError(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
        if topic_config_type(cdef) is not ConfigType.LIST:
            raise ApiError(ErrorCode.invalid_request,
                           f"Config value append is not allowed for config key: {name}")
        raw = configs.get(name)
        if raw is None:
            raw = LogConfig.from_props({}, state.broker_defaults()).to_props()[name]
    elif resource_type == ConfigResourceType.CLIENT_METRICS:
        if client_metrics_resource.CONFIG_TYPES.get(name) is not ConfigType.LIST:
            raise ApiError(ErrorCode.invalid_request,
                           f"Config value append is not allowed for config key: {name}")
        raw = configs.get(name, "")
    elif resource_type == ConfigResourceType.GROUP:
        if name not in group_config.BROKER_KEYS:
            raise ApiError(ErrorCode.invalid_config, f"Unknown group config name: {name}")
        raise ApiError(ErrorCode.invalid_request,
                       f"Config value append is not allowed for config key: {name}")
    else:
        if broker_key_type(name) is not ConfigType.LIST:
            raise ApiError(ErrorCode.invalid_request,
                           f"Config value append is not allowed for config key: {name}")
        raw = configs.get(name) or state.broker_defaults().get(name)
        if raw is None and name in SETTINGS_BY_NAME:
            raw = state.config.get(name)  # a broker setting's default (sasl.enabled.mechanisms)
        if raw is None:
            raw = next((c.default for c in TOPIC_CONFIGS if c.broker_key == name), "")
    return [item.strip() for item in raw.split(",") if item.strip()]


def apply_operations(state: BrokerState, resource: Any) -> dict[str, str]:
    """The resource's dynamic configs after its operations (validated by ``alter_resource``)."""
    resource_type = int(resource.resource_type)
    configs = current_configs(state, resource_type, resource.resource_name)
    names = Counter(c.name for c in resource.configs)
    for config in resource.configs:
        name = config.name
        if names[name] > 1:
            raise ApiError(ErrorCode.invalid_request,
                           f"Error due to duplicate config keys: {name}")
        try:
            op = OpType(int(config.config_operation))
        except ValueError:
            raise ApiError(ErrorCode.invalid_request,
                           f"Unknown alter config operation {config.config_operation} for "
                           f"{name}") from None
        if op is OpType.DELETE:
            configs.pop(name, None)
            continue
        value = non_null(name, config.value)
        if op is OpType.SET:
            configs[name] = value
            continue
        items = _list_value_in_force(state, resource_type, resource.resource_name, name,
                                     configs)
        changes = [item.strip() for item in value.split(",") if item.strip()]
        if op is OpType.APPEND:
            items += [item for item in changes if item not in items]
        else:
            items = [item for item in items if item not in changes]
        configs[name] = ",".join(items)
    return configs


def alter_broker_loggers(state: BrokerState, resource: Any, validate_only: bool) -> None:
    """Set or reset logger levels of a BROKER_LOGGER resource (``broker_logger``'s rules)."""
    broker_scope(state, resource.resource_name)
    if resource.resource_name != str(state.node_id):
        raise ApiError(ErrorCode.invalid_request,
                       "The BROKER_LOGGER resource must name this broker's id")
    names = Counter(c.name for c in resource.configs)
    repeated = sorted(name for name, count in names.items() if count > 1)
    if repeated:
        raise ApiError(ErrorCode.invalid_request,
                       f"Error due to duplicate config keys: {', '.join(repeated)}")
    try:
        alter_logger_levels([(c.name, int(c.config_operation), c.value)
                             for c in resource.configs], validate_only=validate_only)
    except LoggerConfigError as exc:
        code = (ErrorCode.invalid_request if exc.error_name == "INVALID_REQUEST"
                else ErrorCode.invalid_config)
        raise ApiError(code, str(exc)) from None


async def handle(ctx: RequestContext, request: Any) -> Any:
    state = ctx.state
    validate_only = bool(request.validate_only)

    async def alter(resource: Any) -> None:
        resource_type = int(resource.resource_type)
        if resource_type == ConfigResourceType.BROKER_LOGGER:
            alter_broker_loggers(state, resource, validate_only)
            return
        await alter_resource(state, resource_type, resource.resource_name,
                             apply_operations(state, resource), validate_only)

    responses = await alter_each(ctx, request, alter)
    return build_response(ApiKey.INCREMENTAL_ALTER_CONFIGS, ctx.header.api_version,
                          {"throttle_time_ms": 0, "responses": responses})
