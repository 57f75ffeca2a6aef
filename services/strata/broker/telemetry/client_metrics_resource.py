"""The ``client-metrics`` config resource in the config APIs: describe, current value, alter.

What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs do with a resource of type
CLIENT_METRICS (16), as Kafka: the name must not be empty (INVALID_REQUEST); describing lists
only the configs set on it (none for a name never set: no error), each with source
CLIENT_METRICS_CONFIG; altering validates the resource's whole new set of configs with
``client_metrics_config.validate`` and stores it as the dynamic configs of scope
``client-metrics/<name>`` of the ``TopicStore`` (an empty set deletes the subscription).
Brokers read subscriptions from there on each telemetry request, so a change applies to the
next GetTelemetrySubscriptions of every client, on every broker of a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping

from strata.broker.broker_settings import ConfigType
from strata.broker.telemetry.client_metrics_config import (
    CONFIG_DOCS,
    INTERVAL_MS_CONFIG,
    ClientMetricsConfigError,
    scope_of,
    validate,
)
from strata.broker.topic_store import TopicStore

CONFIG_TYPES: dict[str, ConfigType] = {
    name: ConfigType.INT if name == INTERVAL_MS_CONFIG else ConfigType.LIST
    for name in CONFIG_DOCS
}


def check_name(name: str) -> None:
    if not name:
        raise ClientMetricsConfigError("INVALID_REQUEST",
                                       "Client metrics subscription name must not be empty")


def described(store: TopicStore, name: str) -> list[tuple[str, str, ConfigType, str]]:
    """(name, value, type, documentation) of each config set on the resource."""
    check_name(name)
    return [(key, value, CONFIG_TYPES.get(key, ConfigType.STRING), CONFIG_DOCS.get(key, ""))
            for key, value in sorted(store.broker_configs(scope_of(name)).items())]


def current(store: TopicStore, name: str) -> dict[str, str]:
    check_name(name)
    return dict(store.broker_configs(scope_of(name)))


async def alter(store: TopicStore, name: str, configs: Mapping[str, str],
                validate_only: bool) -> None:
    """Make ``configs`` the subscription's configs (``ClientMetricsConfigError`` if refused)."""
    check_name(name)
    validate(name, configs)
    if not validate_only:
        await store.set_broker_configs(scope_of(name), configs)
