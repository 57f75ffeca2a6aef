"""The ``client-metrics`` config resource (KIP-714): subscriptions, their validation and matching.

A subscription is a ``client-metrics`` config resource (``ConfigResource`` type
CLIENT_METRICS = 16) named by the operator, with Kafka's three configs:

``metrics`` (LIST, default empty)
    metric-name prefixes the matching clients push; ``*`` (or an empty item) is every metric;
    an empty list subscribes to nothing.
``interval.ms`` (INT, default 300000)
    the push interval, 100 to 3600000 ms.
``match`` (LIST, default empty: every client)
    ``selector=regex`` items, all of which must match (a full match of the regex) the client's
    ``client_instance_id``, ``client_id``, ``client_software_name``,
    ``client_software_version``, ``client_source_address`` or ``client_source_port``.

Kafka's errors (``ClientMetricsConfigs.validate``): an empty name or an unknown config is
INVALID_REQUEST, as is an ``interval.ms`` out of range; a value that is not of the config's
type, or a ``match`` item that is not ``selector=regex`` with a known selector and a valid
regex, is INVALID_CONFIG.

Where subscriptions live: with the other dynamic configs, in the ``TopicStore``'s broker-config
scopes (the metadata store in a cluster, ``__strata_topics.json`` alone), under the scope
``client-metrics/<name>`` (``scope_of``), which no broker scope ("" or a node id) can equal.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

METRICS_CONFIG: Final = "metrics"
INTERVAL_MS_CONFIG: Final = "interval.ms"
MATCH_CONFIG: Final = "match"

CLIENT_INSTANCE_ID: Final = "client_instance_id"
CLIENT_ID: Final = "client_id"
CLIENT_SOFTWARE_NAME: Final = "client_software_name"
CLIENT_SOFTWARE_VERSION: Final = "client_software_version"
CLIENT_SOURCE_ADDRESS: Final = "client_source_address"
CLIENT_SOURCE_PORT: Final = "client_source_port"
MATCH_SELECTORS: Final = frozenset({
    CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION,
    CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT,
})

ALL_SUBSCRIBED_METRICS: Final = "*"
INTERVAL_MS_DEFAULT: Final = 5 * 60 * 1000
MIN_INTERVAL_MS: Final = 100
MAX_INTERVAL_MS: Final = 3_600_000

CONFIG_DOCS: Final[Mapping[str, str]] = {
    METRICS_CONFIG: "Telemetry metric name prefix list",
    INTERVAL_MS_CONFIG: "Metrics push interval in milliseconds",
    MATCH_CONFIG: "Client match criteria",
}
CONFIG_DEFAULTS: Final[Mapping[str, str]] = {
    METRICS_CONFIG: "", INTERVAL_MS_CONFIG: str(INTERVAL_MS_DEFAULT), MATCH_CONFIG: "",
}

SCOPE_PREFIX: Final = "client-metrics/"


class ClientMetricsConfigError(ValueError):
    """A refused subscription: ``error_name`` is INVALID_REQUEST or INVALID_CONFIG."""

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


def scope_of(name: str) -> str:
    """The broker-config scope a subscription is stored under."""
    return SCOPE_PREFIX + name


def name_of(scope: str) -> str | None:
    """The subscription stored under ``scope``, None for a broker scope."""
    return scope[len(SCOPE_PREFIX):] if scope.startswith(SCOPE_PREFIX) else None


def parse_list(value: str) -> list[str]:
    """Kafka's LIST parsing: comma-separated, items trimmed; a blank value is the empty list."""
    if not value.strip():
        return []
    return [item.strip() for item in value.split(",")]


@dataclass(frozen=True, slots=True)
class Subscription:
    """One validated ``client-metrics`` resource."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: Mapping[str, re.Pattern[str]]

    @property
    def all_metrics(self) -> bool:
        return ALL_SUBSCRIBED_METRICS in self.metrics or "" in self.metrics


def parse_match(patterns: Iterable[str]) -> dict[str, re.Pattern[str]]:
    """``selector=regex`` items to compiled patterns (INVALID_CONFIG if one is not)."""
    parsed: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        # Java's String.split drops trailing empty strings: "client_id=" has one part.
        parts = pattern.split("=")
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            raise ClientMetricsConfigError(
                "INVALID_CONFIG", f"Illegal client matching pattern: {pattern}")
        try:
            parsed[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise ClientMetricsConfigError(
                "INVALID_CONFIG", f"Illegal client matching pattern: {pattern}") from None
    return parsed


def _interval(value: str) -> int:
    try:
        interval = int(value.strip())
    except ValueError:
        raise ClientMetricsConfigError(
            "INVALID_CONFIG", f"Invalid value {value} for configuration {INTERVAL_MS_CONFIG}: "
                              "Not a number of type INT") from None
    if not -2**31 <= interval < 2**31:
        raise ClientMetricsConfigError(
            "INVALID_CONFIG", f"Invalid value {value} for configuration {INTERVAL_MS_CONFIG}: "
                              "Not a number of type INT")
    return interval


def validate(name: str, configs: Mapping[str, str]) -> None:
    """Kafka's ``ClientMetricsConfigs.validate`` (``ClientMetricsConfigError`` if refused)."""
    if not name:
        raise ClientMetricsConfigError("INVALID_REQUEST", "Subscription name can't be empty")
    for key in configs:
        if key not in CONFIG_DEFAULTS:
            raise ClientMetricsConfigError(
                "INVALID_REQUEST", f"Unknown client metrics configuration: {key}")
    if INTERVAL_MS_CONFIG in configs:
        interval = _interval(configs[INTERVAL_MS_CONFIG])
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ClientMetricsConfigError(
                "INVALID_REQUEST", f"Invalid value {interval} for {INTERVAL_MS_CONFIG}, "
                                   "interval must be between 100 and 3600000 (1 hour)")
    if MATCH_CONFIG in configs:
        parse_match(parse_list(configs[MATCH_CONFIG]))


def subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """The subscription of a stored resource (validated, defaults filled in)."""
    validate(name, configs)
    values = {**CONFIG_DEFAULTS, **configs}
    return Subscription(name, tuple(parse_list(values[METRICS_CONFIG])),
                        _interval(values[INTERVAL_MS_CONFIG]),
                        parse_match(parse_list(values[MATCH_CONFIG])))


def subscriptions_of(stored: Mapping[str, Mapping[str, str]]) -> list[Subscription]:
    """The subscriptions among stored broker-config scopes; an unreadable one is left out (it
    was validated when written; a newer Strata's may not parse here)."""
    found = []
    for scope, configs in sorted(stored.items()):
        name = name_of(scope)
        if name is None or not configs:
            continue
        try:
            found.append(subscription(name, configs))
        except ClientMetricsConfigError:
            continue
    return found


@dataclass(frozen=True, slots=True)
class ClientInstanceMetadata:
    """What a subscription's ``match`` is tested against (Kafka's
    ``ClientMetricsInstanceMetadata``): None where the client did not say (no ApiVersions v3)."""

    client_instance_id: str
    client_id: str | None
    client_software_name: str | None
    client_software_version: str | None
    client_source_address: str | None
    client_source_port: str | None

    def attribute(self, selector: str) -> str | None:
        value: str | None = getattr(self, selector)
        return value

    def matches(self, match: Mapping[str, re.Pattern[str]]) -> bool:
        """Every selector's regex fully matches its attribute (no selectors: every client)."""
        for selector, pattern in match.items():
            value = self.attribute(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True
