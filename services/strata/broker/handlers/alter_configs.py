"""AlterConfigs (key 33, v0-2; v2 is v1, flexible): replace a resource's whole dynamic config.

Also owns applying a config change, which IncrementalAlterConfigs shares (``alter_resource``):
validate, persist in the ``TopicStore``, then push to the logs through the ``LogManager``
(``set_topic_config`` for a topic; new broker defaults and every topic re-resolved for a broker).

Rules (Kafka's, KRaft flavour):

* topic resources: the topic must exist (UNKNOWN_TOPIC_OR_PARTITION); every key must be a topic
  config of ``TOPIC_CONFIGS`` with a valid value (INVALID_CONFIG);
* broker resources: the name is this node id or "" (the cluster default), else
  INVALID_REQUEST; the keys must be Kafka's dynamic broker configs, per-broker ones on a node
  id only (``strata.broker.dynamic_broker_config``), else INVALID_CONFIG; they are stored in
  the metadata store (``TopicStore.set_broker_configs``) and the broker defaults re-applied;
* client-metrics and group resources: ``client_metrics_resource`` and
  ``group_config_resource`` validate and store them (group configs: KIP-848's per-group
  consumer timeouts, INVALID_CONFIG outside the broker's bounds);
* a null value is INVALID_REQUEST; a resource named twice in one request is INVALID_REQUEST;
  other resource types are INVALID_REQUEST;
* ``validate_only`` checks and changes nothing;
* with an authorizer, AlterConfigs on the topic, the group or the Cluster
  (``check_config_access``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from strata.broker.broker_state import BrokerState
from strata.broker.dynamic_broker_config import (
    InvalidDynamicConfig,
    check_dynamic_broker_configs,
)
from strata.broker.group import group_config_resource
from strata.broker.group.group_config import GroupConfigError
from strata.broker.handlers import ApiError
from strata.broker.handlers.create_topics import check_topic_configs
from strata.broker.handlers.describe_configs import (
    ConfigResourceType,
    broker_scope,
    check_config_access,
    topic_record,
)
from strata.broker.network.request_context import RequestContext
from strata.broker.telemetry import client_metrics_resource
from strata.broker.telemetry.client_metrics_config import ClientMetricsConfigError
from strata.broker.topic_store import UnknownTopicError
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation
from strata.storage.errors import InvalidConfigError, StorageError
from strata.storage.log_config import LogConfig


def current_configs(state: BrokerState, resource_type: int, resource_name: str) -> dict[str, str]:
    """The dynamic configs a resource has now (what an incremental change starts from)."""
    if resource_type == ConfigResourceType.TOPIC:
        return dict(topic_record(state, resource_name).configs)
    if resource_type == ConfigResourceType.BROKER:
        return dict(state.topic_store.broker_configs(broker_scope(state, resource_name)))
    if resource_type == ConfigResourceType.CLIENT_METRICS:
        try:
            return client_metrics_resource.current(state.topic_store, resource_name)
        except ClientMetricsConfigError as exc:
            raise ApiError(ErrorCode[exc.error_name.lower()], str(exc)) from None
    if resource_type == ConfigResourceType.GROUP:
        try:
            return group_config_resource.current(state.topic_store, resource_name)
        except GroupConfigError as exc:
            raise ApiError(ErrorCode[exc.error_name.lower()], str(exc)) from None
    raise ApiError(ErrorCode.invalid_request,
                   f"Unsupported resource type {resource_type} for altering configs")


async def alter_resource(state: BrokerState, resource_type: int, resource_name: str,
                         configs: Mapping[str, str], validate_only: bool) -> None:
    """Make ``configs`` the resource's whole set of dynamic configs (see the module rules)."""
    if resource_type == ConfigResourceType.TOPIC:
        topic_record(state, resource_name)
        checked = check_topic_configs(state, configs)
        if validate_only:
            return
        try:
            await state.topic_store.set_topic_configs(resource_name, checked)
        except UnknownTopicError:
            raise ApiError(ErrorCode.unknown_topic_or_partition,
                           f"Topic {resource_name} does not exist.") from None
        state.log_manager.set_topic_config(resource_name, checked)
    elif resource_type == ConfigResourceType.BROKER:
        scope = broker_scope(state, resource_name)
        try:
            check_dynamic_broker_configs(configs, per_broker=scope != "")
        except InvalidDynamicConfig as exc:
            raise ApiError(ErrorCode.invalid_config, str(exc)) from None
        _check_broker_defaults(state, scope, configs)
        if validate_only:
            return
        await state.topic_store.set_broker_configs(scope, configs)
        state.apply_broker_defaults()
    elif resource_type == ConfigResourceType.CLIENT_METRICS:
        try:
            await client_metrics_resource.alter(state.topic_store, resource_name, configs,
                                                validate_only)
        except ClientMetricsConfigError as exc:
            raise ApiError(ErrorCode[exc.error_name.lower()], str(exc)) from None
    elif resource_type == ConfigResourceType.GROUP:
        try:
            await group_config_resource.alter(state.topic_store, state.config, resource_name,
                                              configs, validate_only)
        except GroupConfigError as exc:
            raise ApiError(ErrorCode[exc.error_name.lower()], str(exc)) from None
    else:
        raise ApiError(ErrorCode.invalid_request,
                       f"Unsupported resource type {resource_type} for altering configs")


def _check_broker_defaults(state: BrokerState, scope: str, configs: Mapping[str, str]) -> None:
    """INVALID_CONFIG unless the broker defaults after the change are valid for every topic."""
    store = state.topic_store
    layered = {**state.config.log_manager_props(), **store.broker_configs("")}
    if scope == "":
        layered.update(configs)
        layered.update(store.broker_configs(str(state.node_id)))
    else:
        layered.update(configs)
    try:
        LogConfig.from_props({}, layered)
    except InvalidConfigError as exc:
        raise ApiError(ErrorCode.invalid_config, str(exc)) from None


def non_null(name: str, value: str | None) -> str:
    if value is None:
        raise ApiError(ErrorCode.invalid_request, f"Null value not supported for : {name}")
    return value


def duplicates(resources: Any) -> set[tuple[int, str]]:
    counts = Counter((int(r.resource_type), r.resource_name) for r in resources)
    return {key for key, count in counts.items() if count > 1}


def result(resource: Any, error: ErrorCode, message: str | None) -> dict[str, object]:
    return {"error_code": error, "error_message": message,
            "resource_type": resource.resource_type, "resource_name": resource.resource_name}


async def alter_each(
    ctx: RequestContext, request: Any, alter: Callable[[Any], Awaitable[None]]
) -> list[dict[str, object]]:
    """Run ``alter(resource)`` for each resource of an AlterConfigs or IncrementalAlterConfigs
    request once it is authorized and named once; one result per resource, errors per
    resource."""
    repeated = duplicates(request.resources)
    responses = []
    for resource in request.resources:
        error, message = ErrorCode.none, None
        try:
            if (int(resource.resource_type), resource.resource_name) in repeated:
                raise ApiError(ErrorCode.invalid_request,
                               f"Duplicate resource {resource.resource_name} in the request")
            check_config_access(ctx, int(resource.resource_type), resource.resource_name,
                                AclOperation.ALTER_CONFIGS)
            await alter(resource)
        except ApiError as exc:
            error, message = exc.error_code, exc.message
        except StorageError as exc:
            error, message = ErrorCode(exc.error_code), str(exc)
        responses.append(result(resource, error, message))
    return responses


async def handle(ctx: RequestContext, request: Any) -> Any:
    async def alter(resource: Any) -> None:
        configs = {c.name: non_null(c.name, c.value) for c in resource.configs}
        await alter_resource(ctx.state, int(resource.resource_type), resource.resource_name,
                             configs, bool(request.validate_only))

    responses = await alter_each(ctx, request, alter)
    return build_response(ApiKey.ALTER_CONFIGS, ctx.header.api_version,
                          {"throttle_time_ms": 0, "responses": responses})
