"""Client quota configuration: which entities have which quotas, as Kafka keeps and reads them.

Owns the pure model behind DescribeClientQuotas, AlterClientQuotas and enforcement:

- an entity (``ClientQuotaEntity``) is a set of (entity type, name) pairs, types ``user``,
  ``client-id`` and ``ip``; a name of None is the type's *default* entity (``<default>`` in
  Kafka's tools). Valid combinations: user, client-id, user + client-id, ip;
- quota keys, with Kafka's types: ``producer_byte_rate`` and ``consumer_byte_rate`` (LONG,
  bytes per second), ``request_percentage`` and ``controller_mutation_rate`` (DOUBLE) for user
  and client-id entities; ``connection_creation_rate`` (LONG) for ip entities;
- ``ClientQuotas``: an immutable map entity -> {key: value}; ``describe`` answers a filter as
  Kafka's ``ClientQuotasImage.describe`` (exact, default and "specified" matches, strict or
  not); ``alter`` validates and applies AlterClientQuotas entries as Kafka's
  ``ClientQuotaControlManager`` (a value of None removes the key; an entity left with no keys
  disappears), returning the new map and a result per entry;
- ``resolve``: the quota that applies to a (user, client-id) pair for one key, walking Kafka's
  eight levels in order — user + client-id, user + default client-id, user, default user +
  client-id, default user + default client-id, default user, client-id, default client-id —
  and the metric tags whose sensor it is measured by (user and client-id for the user +
  client-id levels, the user alone for the user levels, the client-id alone for the client
  levels), so that, as in Kafka, a user quota is shared by all that user's clients.

Invariants: an invalid alteration changes nothing for its entity; no I/O, no clock.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
ENTITY_TYPES: Final = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
CONNECTION_CREATION_RATE: Final = "connection_creation_rate"

# key -> whether Kafka declares it LONG (else DOUBLE)
CLIENT_KEYS: Final = MappingProxyType({PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
                                       REQUEST_PERCENTAGE: False,
                                       CONTROLLER_MUTATION_RATE: False})
IP_KEYS: Final = MappingProxyType({CONNECTION_CREATION_RATE: True})

MATCH_EXACT: Final = 0
MATCH_DEFAULT: Final = 1
MATCH_SPECIFIED: Final = 2

_LONG_EPSILON: Final = 1e-6

ClientQuotaEntity = tuple[tuple[str, str | None], ...]
"""(entity type, name or None for the default) pairs, sorted by type."""


class QuotaRequestError(ValueError):
    """A filter or an alteration Kafka refuses; ``error_name`` is Kafka's error for it."""

    def __init__(self, message: str, error_name: str = "INVALID_REQUEST") -> None:
        super().__init__(message)
        self.error_name = error_name


def entity(pairs: Iterable[tuple[str, str | None]]) -> ClientQuotaEntity:
    """The entity of (type, name) pairs; ``QuotaRequestError`` for an empty one, a repeated or
    unknown type, an empty name, or a combination Kafka does not allow."""
    seen: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type in seen:
            raise QuotaRequestError(
                f"Invalid empty client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in ENTITY_TYPES:
            raise QuotaRequestError(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise QuotaRequestError(f"Empty {entity_type} not supported")
        seen[entity_type] = name
    if not seen or (IP in seen and len(seen) > 1):
        raise QuotaRequestError("Invalid empty client quota entity")
    address = seen.get(IP)
    if address is not None:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise QuotaRequestError(f"{address} is not a valid IP or resolvable host.") from None
    return tuple(sorted(seen.items()))


def keys_for(quota_entity: ClientQuotaEntity) -> Mapping[str, bool]:
    """The quota keys ``quota_entity`` may have (key -> is LONG)."""
    return IP_KEYS if quota_entity[0][0] == IP else CLIENT_KEYS


def validate_value(quota_entity: ClientQuotaEntity, key: str, value: float) -> None:
    """``QuotaRequestError`` unless ``key`` suits the entity and ``value`` its type."""
    keys = keys_for(quota_entity)
    if key not in keys:
        raise QuotaRequestError(f"Invalid configuration key {key}")
    if not math.isfinite(value):
        raise QuotaRequestError(f"Configuration {key} must be a finite number")
    if keys[key] and abs(math.floor(value + _LONG_EPSILON) - value) > _LONG_EPSILON:
        raise QuotaRequestError(f"Configuration {key} must be a Long value")


@dataclass(frozen=True, slots=True)
class FilterComponent:
    """One component of a DescribeClientQuotas filter."""

    entity_type: str
    match_type: int
    match: str | None = None


@dataclass(frozen=True, slots=True)
class Alteration:
    """One AlterClientQuotas entry: the entity and key -> new value (None: remove the key)."""

    entity: Sequence[tuple[str, str | None]]
    ops: Mapping[str, float | None]


@dataclass(frozen=True, slots=True)
class Resolution:
    """The quota that applies to a client for one key (None: unlimited) and the metric tags
    (user, client-id; "" where not part of the quota) of the sensor that measures it."""

    limit: float | None
    user_tag: str
    client_id_tag: str


@dataclass(frozen=True)
class ClientQuotas:
    """Every entity with at least one quota, and its quotas."""

    entries: Mapping[ClientQuotaEntity, Mapping[str, float]] = field(default_factory=dict)

    def describe(self, components: Sequence[FilterComponent], strict: bool
                 ) -> list[tuple[ClientQuotaEntity, Mapping[str, float]]]:
        """The entities a DescribeClientQuotas filter matches, sorted."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for component in components:
            kind = component.entity_type
            if not kind:
                raise QuotaRequestError("Invalid empty entity type.")
            if kind in exact or kind in specified:
                raise QuotaRequestError(
                    f"Entity type {kind} cannot appear more than once in the filter.")
            if kind not in ENTITY_TYPES:
                raise QuotaRequestError(f"Unsupported entity type {kind}",
                                        "UNSUPPORTED_VERSION")
            if component.match_type == MATCH_EXACT:
                if component.match is None:
                    raise QuotaRequestError(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[kind] = component.match
            elif component.match_type in (MATCH_DEFAULT, MATCH_SPECIFIED):
                if component.match is not None:
                    label = "DEFAULT" if component.match_type == MATCH_DEFAULT else "SPECIFIED"
                    raise QuotaRequestError(f"Request specified MATCH_TYPE_{label}, but also "
                                            "specified a match string.")
                if component.match_type == MATCH_DEFAULT:
                    exact[kind] = None
                else:
                    specified.add(kind)
            else:
                raise QuotaRequestError(f"Unknown match type {component.match_type}")
        types = set(exact) | specified
        if IP in types and types & {USER, CLIENT_ID}:
            raise QuotaRequestError("Invalid entity filter component combination. IP filter "
                                    "component should not be used with user or clientId "
                                    "filter component.")
        matched = []
        for quota_entity, values in sorted(self.entries.items(), key=_entity_order):
            names = dict(quota_entity)
            if any(kind not in names or names[kind] != name for kind, name in exact.items()):
                continue
            if any(kind not in names for kind in specified):
                continue
            if strict and len(names) != len(types):
                continue
            matched.append((quota_entity, values))
        return matched

    def alter(self, alterations: Sequence[Alteration]
              ) -> tuple[ClientQuotas, list[QuotaRequestError | None]]:
        """The map after ``alterations`` and, per alteration, None or why it was refused."""
        entries = {k: dict(v) for k, v in self.entries.items()}
        results: list[QuotaRequestError | None] = []
        for alteration in alterations:
            try:
                quota_entity = entity(alteration.entity)
                for key, value in alteration.ops.items():
                    if value is not None:
                        validate_value(quota_entity, key, value)
            except QuotaRequestError as exc:
                results.append(exc)
                continue
            values = entries.setdefault(quota_entity, {})
            for key, value in alteration.ops.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
            if not values:
                del entries[quota_entity]
            results.append(None)
        return ClientQuotas(entries), results

    def resolve(self, key: str, user: str, client_id: str) -> Resolution:
        """The quota for ``key`` of principal name ``user`` with ``client_id``, and its tags."""
        levels: tuple[tuple[ClientQuotaEntity, str, str], ...] = (
            (((CLIENT_ID, client_id), (USER, user)), user, client_id),
            (((CLIENT_ID, None), (USER, user)), user, client_id),
            (((USER, user),), user, ""),
            (((CLIENT_ID, client_id), (USER, None)), user, client_id),
            (((CLIENT_ID, None), (USER, None)), user, client_id),
            (((USER, None),), user, ""),
            (((CLIENT_ID, client_id),), "", client_id),
            (((CLIENT_ID, None),), "", client_id),
        )
        for quota_entity, user_tag, client_tag in levels:
            value = self.entries.get(quota_entity, {}).get(key)
            if value is not None:
                return Resolution(value, user_tag, client_tag)
        return Resolution(None, "", client_id)

    def has_any(self, key: str) -> bool:
        """Whether any entity has a quota for ``key`` (none: nothing to measure)."""
        return any(key in values for values in self.entries.values())


def _entity_order(item: tuple[ClientQuotaEntity, Mapping[str, float]]
                  ) -> tuple[tuple[str, str], ...]:
    return tuple((kind, "" if name is None else f"={name}") for kind, name in item[0])
