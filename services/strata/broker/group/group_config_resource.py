"""The ``GROUP`` config resource in the config APIs: describe, current value, alter.

What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs do with a resource of type GROUP
(32), as Kafka (``ConfigHelper``, ``GroupConfig``): describing lists every group config, the
ones set on the group with source GROUP_CONFIG and the others at the broker's value with source
DEFAULT_CONFIG; altering validates the group's whole new set with ``group_config.validate``
and stores it under the scope ``group/<id>`` of the ``TopicStore`` (an empty set removes it).
The group coordinators read it from there (``in_force``) whenever they need a timeout, so a
change applies to the next heartbeat of the group's members, on whichever broker coordinates.
"""

from __future__ import annotations

from collections.abc import Mapping

from strata.broker.config import BrokerConfig
from strata.broker.group.group_config import (
    BROKER_KEYS,
    CONFIG_DOCS,
    GroupConfigValues,
    check_name,
    defaults,
    in_force,
    scope_of,
    validate,
)
from strata.broker.topic_store import TopicStore


def broker_values(config: BrokerConfig) -> dict[str, int]:
    """Every broker setting the group configs default to or are bounded by."""
    return {key: config.get_int(key) for keys in BROKER_KEYS.values() for key in keys}


def described(store: TopicStore, config: BrokerConfig, group_id: str
              ) -> list[tuple[str, str, bool, str]]:
    """(name, value, set on the group, documentation) of every group config."""
    check_name(group_id)
    stored = store.broker_configs(scope_of(group_id))
    fallback = defaults(broker_values(config))
    return [(name, stored.get(name, str(fallback[name])), name in stored, CONFIG_DOCS[name])
            for name in BROKER_KEYS]


def current(store: TopicStore, group_id: str) -> dict[str, str]:
    check_name(group_id)
    return dict(store.broker_configs(scope_of(group_id)))


async def alter(store: TopicStore, config: BrokerConfig, group_id: str,
                configs: Mapping[str, str], validate_only: bool) -> None:
    """Make ``configs`` the group's configs (``GroupConfigError`` if refused)."""
    check_name(group_id)
    validate(configs, broker_values(config))
    if not validate_only:
        await store.set_broker_configs(scope_of(group_id), configs)


def values_for(store: TopicStore, group_id: str, fallback: GroupConfigValues
               ) -> GroupConfigValues:
    """The timeouts in force for ``group_id``: its configs over ``fallback`` (the broker's)."""
    stored = store.broker_configs(scope_of(group_id))
    return in_force(stored, fallback) if stored else fallback
