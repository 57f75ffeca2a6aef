"""Group configs (KIP-848): the per-group overrides of the consumer group timeouts.

A ``GROUP`` config resource (``ConfigResource`` type 32) is named by a group id and holds
Kafka's ``GroupConfig`` names for consumer groups:

``consumer.session.timeout.ms`` (INT)
    the group's session timeout; default the broker's ``group.consumer.session.timeout.ms``.
``consumer.heartbeat.interval.ms`` (INT)
    the heartbeat interval told to the group's members; default the broker's
    ``group.consumer.heartbeat.interval.ms``.

Kafka's rules (``GroupConfig.validate``), checked on the resource's whole new set, the values
not set taking their defaults: an unknown name, a value that is not an integer or is below 1,
a value outside the broker's ``group.consumer.min/max.*`` bounds, or a session timeout not
greater than the heartbeat interval is INVALID_CONFIG; an empty group name is INVALID_REQUEST.
Kafka 4.0 also knows ``share.*`` group configs; Strata has no share groups (KIP-932), so those
names are unknown here. The group need not exist: its configs wait for it, as in Kafka.

Where they live: in the ``TopicStore``'s dynamic-config scopes (the metadata store in a
cluster), under ``group/<id>`` (``scope_of``), which no broker scope ("" or a node id) and no
``client-metrics/`` scope can equal. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

CONSUMER_SESSION_TIMEOUT_MS: Final = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS: Final = "consumer.heartbeat.interval.ms"
SCOPE_PREFIX: Final = "group/"

# group config -> (the broker setting giving its default, its min bound, its max bound)
BROKER_KEYS: Final[Mapping[str, tuple[str, str, str]]] = {
    CONSUMER_SESSION_TIMEOUT_MS: ("group.consumer.session.timeout.ms",
                                  "group.consumer.min.session.timeout.ms",
                                  "group.consumer.max.session.timeout.ms"),
    CONSUMER_HEARTBEAT_INTERVAL_MS: ("group.consumer.heartbeat.interval.ms",
                                     "group.consumer.min.heartbeat.interval.ms",
                                     "group.consumer.max.heartbeat.interval.ms"),
}
CONFIG_DOCS: Final[Mapping[str, str]] = {
    CONSUMER_SESSION_TIMEOUT_MS: "The timeout to detect client failures when using the "
                                 "consumer group protocol.",
    CONSUMER_HEARTBEAT_INTERVAL_MS: "The heartbeat interval given to the members of a "
                                    "consumer group.",
}


class GroupConfigError(Exception):
    """A refused group config; ``error_name`` is the Kafka error (INVALID_CONFIG/REQUEST)."""

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


@dataclass(frozen=True, slots=True)
class GroupConfigValues:
    """The timeouts in force for one consumer group."""

    session_timeout_ms: int
    heartbeat_interval_ms: int


def scope_of(group_id: str) -> str:
    """The dynamic-config scope a group's configs are stored under."""
    return SCOPE_PREFIX + group_id


def check_name(group_id: str) -> None:
    if not group_id:
        raise GroupConfigError("INVALID_REQUEST", "Group name must not be empty")


def defaults(broker: Mapping[str, int]) -> dict[str, int]:
    """Each group config's default: the broker setting it overrides (``broker`` maps every
    setting of ``BROKER_KEYS`` to its value)."""
    return {name: broker[keys[0]] for name, keys in BROKER_KEYS.items()}


def validate(configs: Mapping[str, str], broker: Mapping[str, int]) -> dict[str, int]:
    """The values in force after setting ``configs`` (the unset ones at their defaults), or
    ``GroupConfigError`` with Kafka's message."""
    values = defaults(broker)
    for name, raw in configs.items():
        if name not in BROKER_KEYS:
            raise GroupConfigError("INVALID_CONFIG", f"Unknown group config name: {name}")
        try:
            value = int(raw.strip())
        except ValueError:
            raise GroupConfigError(
                "INVALID_CONFIG", f"Invalid value {raw} for configuration {name}: Not a number "
                "of type INT") from None
        if value < 1:
            raise GroupConfigError(
                "INVALID_CONFIG", f"Invalid value {value} for configuration {name}: Value "
                "must be at least 1")
        values[name] = value
    for name, (_, low_key, high_key) in BROKER_KEYS.items():
        if values[name] < broker[low_key]:
            raise GroupConfigError("INVALID_CONFIG",
                                   f"{name} must be greater than or equal to {low_key}")
        if values[name] > broker[high_key]:
            raise GroupConfigError("INVALID_CONFIG",
                                   f"{name} must be less than or equal to {high_key}")
    if values[CONSUMER_SESSION_TIMEOUT_MS] <= values[CONSUMER_HEARTBEAT_INTERVAL_MS]:
        raise GroupConfigError("INVALID_CONFIG", f"{CONSUMER_SESSION_TIMEOUT_MS} must be "
                                                 f"greater than {CONSUMER_HEARTBEAT_INTERVAL_MS}")
    return values


def in_force(configs: Mapping[str, str], fallback: GroupConfigValues) -> GroupConfigValues:
    """The timeouts of a group with the stored ``configs``; ``fallback`` (the broker's) for
    each one not set. Stored values passed ``validate``; one that does not parse falls back."""
    def pick(name: str, default: int) -> int:
        raw = configs.get(name)
        try:
            return int(raw) if raw is not None else default
        except ValueError:
            return default

    return GroupConfigValues(pick(CONSUMER_SESSION_TIMEOUT_MS, fallback.session_timeout_ms),
                             pick(CONSUMER_HEARTBEAT_INTERVAL_MS,
                                  fallback.heartbeat_interval_ms))
