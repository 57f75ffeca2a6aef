"""DescribeConfigs (key 32, v1-4): topic and broker configs, where each value comes from.

Owns the config *view* the alter handlers share: resource and source enums (Kafka's numbers),
the layers a broker-level value can come from, and the config type of each key.

Topic resources (type 2): every config of ``strata.storage.log_config.TOPIC_CONFIGS`` with its
value in force. Source, highest precedence first: DYNAMIC_TOPIC_CONFIG (the topic's override),
DYNAMIC_BROKER_CONFIG (AlterConfigs on this node), DYNAMIC_DEFAULT_BROKER_CONFIG (on the
cluster default, resource name ""), STATIC_BROKER_CONFIG (file, ``STRATA_*`` env or flags),
DEFAULT_CONFIG (Kafka's default). With ``include_synonyms`` each entry lists every layer that
sets it, in that order, under the topic key and its broker keys (``retention.ms``,
``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours``), ending with the
default. Unknown topic: UNKNOWN_TOPIC_OR_PARTITION; illegal name: INVALID_TOPIC_EXCEPTION.

Broker resources (type 4): the resource name is this node id or "" (the dynamic cluster
defaults only); another id is INVALID_REQUEST. For this node: every broker setting, every
``log.*`` default, and every other dynamic key set in some layer (``log.cleaner.threads``,
``listener.name.<l>.<key>``...), each with the source of its value, highest first:
DYNAMIC_BROKER_CONFIG (AlterConfigs on this node), DYNAMIC_DEFAULT_BROKER_CONFIG (on ""),
STATIC_BROKER_CONFIG, DEFAULT_CONFIG; with ``include_synonyms``, every layer setting it. A key
is read-only unless it is one of Kafka's dynamic broker configs
(``strata.broker.dynamic_broker_config``); PASSWORD values are never sent.

Broker-logger resources (type 8, named by this node's id): the broker's Python loggers and
their levels (``strata.broker.broker_logger``), source DYNAMIC_BROKER_LOGGER_CONFIG.
Client-metrics resources (type 16): ``strata.broker.telemetry.client_metrics_resource``. Group
resources (type 32, KIP-848): every group config, GROUP_CONFIG where set on the group, else
DEFAULT_CONFIG at the broker's value (``strata.broker.group.group_config_resource``).

Authorization (shared with the alter handlers, ``check_config_access``): DescribeConfigs (or
AlterConfigs) on the topic, else TOPIC_AUTHORIZATION_FAILED; on the Cluster for broker
resources, else CLUSTER_AUTHORIZATION_FAILED; on the group for group resources, else
GROUP_AUTHORIZATION_FAILED.

``configuration_keys`` null means every key; a list means those keys only (Kafka's rule, so an
empty list answers none). v3 adds ``config_type`` and, when asked, ``documentation``; v4 is
v3 in the flexible encoding.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from strata.broker.broker_logger import logger_levels
from strata.broker.broker_settings import BROKER_SETTINGS, ConfigType
from strata.broker.broker_state import BrokerState
from strata.broker.config import (
    BROKER_UNIT_SYNONYMS,
    CLEANER_KEYS,
    LOG_DEFAULT_KEYS,
    UNIT_SYNONYM_KEYS,
)
from strata.broker.dynamic_broker_config import config_type as dynamic_config_type
from strata.broker.dynamic_broker_config import is_dynamic
from strata.broker.group import group_config_resource
from strata.broker.group.group_config import GroupConfigError
from strata.broker.handlers import ApiError
from strata.broker.network.request_context import RequestContext
from strata.broker.telemetry import client_metrics_resource
from strata.broker.telemetry.client_metrics_config import ClientMetricsConfigError
from strata.broker.topic_store import TopicRecord, invalid_topic_name_reason
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType
from strata.storage.log_config import INT_MAX, TOPIC_CONFIGS, ConfigDef, LogConfig


class ConfigResourceType(enum.IntEnum):
    """Kafka's ``ConfigResource.Type``."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(enum.IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigSource``."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


_BROKER_SETTING_NAMES: Final = frozenset(s.name for s in BROKER_SETTINGS)


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    config_type: ConfigType
    documentation: str
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = ()

    @property
    def sensitive(self) -> bool:
        """A PASSWORD config: its value is never sent (Kafka's rule)."""
        return int(self.config_type) == ConfigType.PASSWORD


# ------------------------------------------------------------------ types


# Lists Kafka types LIST that ``LogConfig`` keeps as their text (the throttles parse it).
_LISTS_KEPT_AS_TEXT: Final = frozenset({"leader.replication.throttled.replicas",
                                        "follower.replication.throttled.replicas"})


def topic_config_type(cdef: ConfigDef) -> ConfigType:
    """Kafka's type of a topic config, read off ``LogConfig``'s field and the validator."""
    if cdef.name in _LISTS_KEPT_AS_TEXT:
        return ConfigType.LIST
    annotation = str(next(f.type for f in dataclasses.fields(LogConfig) if f.name == cdef.attr))
    if annotation == "bool":
        return ConfigType.BOOLEAN
    if annotation == "float":
        return ConfigType.DOUBLE
    if annotation.startswith("frozenset"):
        return ConfigType.LIST
    if annotation == "int":
        try:
            cdef.parse(str(INT_MAX + 1))
        except ValueError:
            return ConfigType.INT
        return ConfigType.LONG
    return ConfigType.STRING


_TOPIC_BY_BROKER_KEY: Final[Mapping[str, ConfigDef]] = {
    c.broker_key: c for c in TOPIC_CONFIGS if c.broker_key is not None
}


def broker_key_type(key: str) -> ConfigType:
    for setting in BROKER_SETTINGS:
        if setting.name == key:
            return setting.type
    cdef = _TOPIC_BY_BROKER_KEY.get(key)
    if cdef is not None:
        return topic_config_type(cdef)
    if key in UNIT_SYNONYM_KEYS:
        return ConfigType.INT if key.endswith("hours") else ConfigType.LONG
    return dynamic_config_type(key)


# ------------------------------------------------------------------ layers


def broker_layers(state: BrokerState) -> list[tuple[ConfigSource, Mapping[str, str]]]:
    """Where a broker-level value may come from, highest precedence first."""
    store = state.topic_store
    return [
        (ConfigSource.DYNAMIC_BROKER_CONFIG, store.broker_configs(str(state.node_id))),
        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, store.broker_configs("")),
        (ConfigSource.STATIC_BROKER_CONFIG, state.config.explicit()),
    ]


def broker_synonym_keys(cdef: ConfigDef) -> list[str]:
    """The broker keys standing for a topic config, most precise first (Kafka's order)."""
    if cdef.broker_key is None:
        return []
    return [cdef.broker_key] + [k for k, _ in BROKER_UNIT_SYNONYMS.get(cdef.broker_key, ())]


def describe_topic(state: BrokerState, record: TopicRecord) -> Iterator[ConfigEntry]:
    resolved = LogConfig.from_props(record.configs, state.broker_defaults()).to_props()
    layers = broker_layers(state)
    for cdef in TOPIC_CONFIGS:
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if cdef.name in record.configs:
            synonyms.append((cdef.name, record.configs[cdef.name],
                             ConfigSource.DYNAMIC_TOPIC_CONFIG))
        for key in broker_synonym_keys(cdef):
            for source, values in layers:
                if key in values:
                    synonyms.append((key, values[key], source))
        if cdef.broker_key is not None:
            synonyms.append((cdef.broker_key, cdef.default, ConfigSource.DEFAULT_CONFIG))
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        yield ConfigEntry(cdef.name, resolved[cdef.name], source, False,
                          topic_config_type(cdef), cdef.doc, tuple(synonyms))


def describe_broker(state: BrokerState, scope: str) -> Iterator[ConfigEntry]:
    """Entries of a broker resource: ``scope`` is "" (cluster defaults) or this node's id."""
    if scope == "":
        for key, value in sorted(state.topic_store.broker_configs("").items()):
            source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            yield ConfigEntry(key, value, source, False, broker_key_type(key), "",
                              ((key, value, source),))
        return
    layers = broker_layers(state)
    for setting in BROKER_SETTINGS:
        synonyms: list[tuple[str, str | None, ConfigSource]] = [
            (setting.name, values[setting.name], source) for source, values in layers
            if setting.name in values]
        synonyms.append((setting.name, setting.default, ConfigSource.DEFAULT_CONFIG))
        _, current, origin = synonyms[0]
        if origin is ConfigSource.DEFAULT_CONFIG:
            current = state.config.get(setting.name)  # a default derived from other settings
        yield ConfigEntry(setting.name, current, origin, not is_dynamic(setting.name),
                          setting.type, setting.doc, tuple(synonyms))
    resolved = LogConfig.from_props({}, state.broker_defaults()).to_props()
    for cdef in TOPIC_CONFIGS:
        broker_key = cdef.broker_key
        if broker_key is None or broker_key in _BROKER_SETTING_NAMES:
            continue
        synonyms = [(k, values[k], source) for k in broker_synonym_keys(cdef)
                    for source, values in layers if k in values]
        synonyms.append((broker_key, cdef.default, ConfigSource.DEFAULT_CONFIG))
        yield ConfigEntry(broker_key, resolved[cdef.name], synonyms[0][2], False,
                          topic_config_type(cdef), cdef.doc, tuple(synonyms))
    described = _BROKER_SETTING_NAMES | LOG_DEFAULT_KEYS
    others = {key for _, values in layers for key in values} - described
    for key in sorted(others):
        if key not in UNIT_SYNONYM_KEYS and not is_dynamic(key) and key not in CLEANER_KEYS:
            continue  # an unknown static key: logged at start-up, not a config of Strata's
        synonyms = [(key, values[key], source) for source, values in layers if key in values]
        yield ConfigEntry(key, synonyms[0][1], synonyms[0][2], not is_dynamic(key),
                          broker_key_type(key), "", tuple(synonyms))


def broker_scope(state: BrokerState, resource_name: str) -> str:
    """"" or this node's id, as the store keys dynamic broker configs; else INVALID_REQUEST."""
    if resource_name == "" or resource_name == str(state.node_id):
        return resource_name
    try:
        int(resource_name)
    except ValueError:
        raise ApiError(ErrorCode.invalid_request,
                       f"Broker id must be an integer, but it is: {resource_name}") from None
    raise ApiError(ErrorCode.invalid_request,
                   f"Unexpected broker id, expected {state.node_id} or empty string, but "
                   f"received {resource_name}")


def topic_record(state: BrokerState, name: str) -> TopicRecord:
    """The topic a config resource names; UNKNOWN_TOPIC_OR_PARTITION / INVALID_TOPIC_EXCEPTION."""
    reason = invalid_topic_name_reason(name)
    if reason is not None:
        raise ApiError(ErrorCode.invalid_topic_exception, reason)
    record = state.topic_store.get(name)
    if record is None:
        raise ApiError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
    return record


# ------------------------------------------------------------------ the handler


def check_config_access(ctx: RequestContext, resource_type: int, name: str,
                        operation: AclOperation) -> None:
    """``ApiError`` TOPIC/CLUSTER_AUTHORIZATION_FAILED unless ``operation`` is allowed on the
    config resource (a topic, or the Cluster for a broker or broker-logger resource)."""
    if resource_type == ConfigResourceType.TOPIC:
        if not ctx.authorize(operation, ResourceType.TOPIC, name):
            raise ApiError(ErrorCode.topic_authorization_failed,
                           f"{operation.kafka_name} on topic {name} is not authorized")
    elif resource_type == ConfigResourceType.GROUP:
        if not ctx.authorize(operation, ResourceType.GROUP, name):
            raise ApiError(ErrorCode.group_authorization_failed,
                           f"{operation.kafka_name} on group {name} is not authorized")
    elif resource_type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER,
                           ConfigResourceType.CLIENT_METRICS) and \
            not ctx.authorize(operation, ResourceType.CLUSTER):
        raise ApiError(ErrorCode.cluster_authorization_failed,
                       f"{operation.kafka_name} on the cluster is not authorized")


def _entries(state: BrokerState, resource: Any) -> list[ConfigEntry]:
    resource_type = int(resource.resource_type)
    if resource_type == ConfigResourceType.TOPIC:
        return list(describe_topic(state, topic_record(state, resource.resource_name)))
    if resource_type == ConfigResourceType.BROKER:
        return list(describe_broker(state, broker_scope(state, resource.resource_name)))
    if resource_type == ConfigResourceType.BROKER_LOGGER:
        if broker_scope(state, resource.resource_name) == "":
            raise ApiError(ErrorCode.invalid_request,
                           "The BROKER_LOGGER resource must name this broker's id")
        source = ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG
        return [ConfigEntry(name, level, source, False, ConfigType.STRING, "")
                for name, level in logger_levels()]
    if resource_type == ConfigResourceType.CLIENT_METRICS:
        try:
            entries = client_metrics_resource.described(state.topic_store,
                                                        resource.resource_name)
        except ClientMetricsConfigError as exc:
            raise ApiError(ErrorCode[exc.error_name.lower()], str(exc)) from None
        source = ConfigSource.CLIENT_METRICS_CONFIG
        return [ConfigEntry(name, value, source, False, config_type, doc, ((name, value, source),))
                for name, value, config_type, doc in entries]
    if resource_type == ConfigResourceType.GROUP:
        try:
            described = group_config_resource.described(state.topic_store, state.config,
                                                        resource.resource_name)
        except GroupConfigError as exc:
            raise ApiError(ErrorCode[exc.error_name.lower()], str(exc)) from None
        out = []
        for name, value, is_set, doc in described:
            source = ConfigSource.GROUP_CONFIG if is_set else ConfigSource.DEFAULT_CONFIG
            out.append(ConfigEntry(name, value, source, False, ConfigType.INT, doc,
                                   ((name, value, source),)))
        return out
    raise ApiError(ErrorCode.invalid_request,
                   f"Unsupported resource type {resource_type} for DescribeConfigs")


async def handle(ctx: RequestContext, request: Any) -> Any:
    state = ctx.state
    with_synonyms = bool(request.include_synonyms)
    with_docs = bool(getattr(request, "include_documentation", False))
    results = []
    for resource in request.resources:
        error, message, configs = ErrorCode.none, None, []
        try:
            check_config_access(ctx, int(resource.resource_type), resource.resource_name,
                                AclOperation.DESCRIBE_CONFIGS)
            entries = _entries(state, resource)
        except ApiError as exc:
            error, message, entries = exc.error_code, exc.message, []
        wanted = resource.configuration_keys
        for entry in entries:
            if wanted is not None and entry.name not in wanted:
                continue
            sensitive = entry.sensitive
            configs.append({
                "name": entry.name,
                "value": None if sensitive else entry.value,
                "read_only": entry.read_only,
                "config_source": int(entry.source),
                "is_sensitive": sensitive,
                "synonyms": [{"name": n, "value": None if sensitive else v, "source": int(s)}
                             for n, v, s in entry.synonyms] if with_synonyms else [],
                "config_type": int(entry.config_type),
                "documentation": entry.documentation if with_docs else None,
            })
        results.append({
            "error_code": error, "error_message": message,
            "resource_type": resource.resource_type, "resource_name": resource.resource_name,
            "configs": configs,
        })
    return build_response(ApiKey.DESCRIBE_CONFIGS, ctx.header.api_version,
                          {"throttle_time_ms": 0, "results": results})
