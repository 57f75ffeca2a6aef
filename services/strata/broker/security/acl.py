"""Kafka ACLs: the vocabulary (resource, pattern, operation, permission), filters, and the rule.

Pure: no I/O, no clock, no asyncio. The broker's handlers, the ACL APIs, the ACL stores and the
REST admin all build on these types. Numeric codes are Kafka's wire codes (``ResourceType``,
``PatternType``, ``AclOperation``, ``AclPermissionType`` in ``org.apache.kafka.common``).

The rule (Kafka's ``StandardAuthorizer`` / ``AclAuthorizer``), for a request by ``principal``
from ``host`` to do ``operation`` on resource ``(resource_type, name)``:

1. a principal in ``super.users`` is allowed everything;
2. the bindings *on the resource* are those whose pattern matches its name: LITERAL with the
   same name, LITERAL ``*`` (every resource of the type), PREFIXED with a prefix of the name;
3. if there are none at all (whoever they name), the answer is ``allow.everyone.if.no.acl.found``;
4. of those, the entries that *apply* name the principal (or ``User:*``) and the host (or ``*``);
5. an applying DENY for the operation (or ``All``) denies — deny always wins;
6. an applying ALLOW for the operation, for ``All``, or for an operation implying it
   (Read, Write, Delete, Alter imply Describe; AlterConfigs implies DescribeConfigs) allows;
7. otherwise denied.

Invariants: ``Authorizer`` never mutates a binding; its index is rebuilt wholesale by
``Authorizer.update`` (one writer: the task that watches the ACL store) and lookups read the
current index only, so a decision never sees half an update. Decisions are memoised per
(principal, host, operation, resource) and the memo is dropped on every update.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Self

WILDCARD: Final = "*"
"""A LITERAL resource name matching every resource of its type; also the any-host value."""
WILDCARD_PRINCIPAL: Final = "User:*"
CLUSTER_NAME: Final = "kafka-cluster"
"""The one Cluster resource's name (Kafka's ``Resource.CLUSTER_NAME``)."""


class _Named(enum.IntEnum):
    """An enum parsed from Kafka's spellings: ``DESCRIBE_CONFIGS``, ``DescribeConfigs``, ``3``."""

    @classmethod
    def parse(cls, text: str | int) -> Self:
        if isinstance(text, int) or text.strip().lstrip("-").isdigit():
            return cls(int(text))
        key = text.strip().replace("_", "").replace("-", "").lower()
        for member in cls:
            if member.name.replace("_", "").lower() == key:
                return member
        choices = ", ".join(m.kafka_name for m in cls if m.name not in ("UNKNOWN",))
        raise ValueError(f"unknown {cls.__name__} {text!r} (one of: {choices})")

    @classmethod
    def of(cls, code: int) -> Self:
        """The member of a wire code; UNKNOWN (0) for a code this Strata does not know."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @property
    def kafka_name(self) -> str:
        """``DescribeConfigs``, ``TransactionalId``: how Kafka's tools print it."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_IMPLIED_BY: Final[dict[AclOperation, frozenset[AclOperation]]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}

SUPPORTED_OPERATIONS: Final[dict[ResourceType, tuple[AclOperation, ...]]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}
"""Operations meaningful per resource type: what ``authorized_operations`` fields report."""

AUTHORIZED_OPERATIONS_OMITTED: Final = -2147483648
"""The ``*_authorized_operations`` value when the client did not ask (Kafka's INT32 min)."""


def all_operations(resource_type: ResourceType) -> int:
    """The ``authorized_operations`` bit field of every operation supported on the type."""
    return sum(1 << op.value for op in SUPPORTED_OPERATIONS.get(resource_type, ()))


def implying(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations whose ALLOW grants ``operation`` (itself, ``All``, and the implying ones)."""
    return _IMPLIED_BY.get(operation, frozenset({operation})) | {AclOperation.ALL}


def parse_principal(text: str) -> str:
    """Validate ``Type:name`` (Kafka's ``SecurityUtils.parseKafkaPrincipal``); returns it."""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"could not parse principal {text!r}: expected Type:name, e.g. User:alice")
    return text


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    """A resource or a set of resources: LITERAL ``name`` (``*``: all) or PREFIXED ``name``."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def validate(self) -> None:
        """Raise ``ValueError`` unless this is a definite pattern an ACL may be stored with."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"resource type {self.resource_type.kafka_name} is not a resource")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError("pattern type must be LITERAL or PREFIXED, "
                             f"not {self.pattern_type.name}")
        if not self.name:
            raise ValueError("resource name must not be empty")
        if self.resource_type is ResourceType.CLUSTER and (
                self.name != CLUSTER_NAME or self.pattern_type is not PatternType.LITERAL):
            raise ValueError(f"the Cluster resource is LITERAL {CLUSTER_NAME!r}")

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern covers the concrete resource ``(resource_type, name)``."""
        if resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    """Who (principal, host) may or may not (permission) do what (operation)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def validate(self) -> None:
        parse_principal(self.principal)
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"operation {self.operation.name} is not an operation")
        if self.permission_type in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
            raise ValueError("permission type must be ALLOW or DENY, "
                             f"not {self.permission_type.name}")
        if not self.host:
            raise ValueError("host must be '*' or an address")

    def applies_to(self, principal: str, host: str) -> bool:
        return ((self.principal == principal or self.principal == WILDCARD_PRINCIPAL)
                and (self.host == host or self.host == WILDCARD))


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def validate(self) -> None:
        """Raise ``ValueError`` naming what is wrong (CreateAcls answers it as INVALID_REQUEST)."""
        self.pattern.validate()
        self.entry.validate()


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Kafka's ``ResourcePatternFilter``: None or ANY fields match anything.

    ``pattern_type`` MATCH with a name selects every stored pattern that *covers* the name:
    LITERAL equal, LITERAL ``*``, and PREFIXED prefixes of it. ANY with a name selects stored
    patterns with exactly that name, whatever their type.
    """

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not ResourceType.ANY and \
                self.resource_type is not pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and \
                self.pattern_type is not pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH
        if pattern.pattern_type is PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD
        return self.name.startswith(pattern.name)

    def unknown_field(self) -> str | None:
        if self.resource_type is ResourceType.UNKNOWN:
            return "resource type"
        if self.pattern_type is PatternType.UNKNOWN:
            return "pattern type"
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Kafka's ``AccessControlEntryFilter``: None or ANY fields match anything."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission_type in (AclPermissionType.ANY, entry.permission_type))

    def unknown_field(self) -> str | None:
        if self.operation is AclOperation.UNKNOWN:
            return "operation"
        if self.permission_type is AclPermissionType.UNKNOWN:
            return "permission type"
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select; ``AclBindingFilter()`` selects every binding."""

    pattern: ResourcePatternFilter = field(default_factory=ResourcePatternFilter)
    entry: AccessControlEntryFilter = field(default_factory=AccessControlEntryFilter)

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def validate(self) -> None:
        """Raise ``ValueError`` if a field is UNKNOWN (Kafka answers INVALID_REQUEST)."""
        unknown = self.pattern.unknown_field() or self.entry.unknown_field()
        if unknown:
            raise ValueError(f"filter has an unknown {unknown}")


def select(bindings: Iterable[AclBinding], acl_filter: AclBindingFilter) -> list[AclBinding]:
    """The bindings a filter selects, sorted (a stable order for responses and the CLI)."""
    return sorted(b for b in bindings if acl_filter.matches(b))


@dataclass(frozen=True, slots=True)
class _TypeIndex:
    """The bindings of one resource type, indexed for lookups by concrete name."""

    literal: dict[str, tuple[AccessControlEntry, ...]]
    wildcard: tuple[AccessControlEntry, ...]
    prefixed: dict[str, tuple[AccessControlEntry, ...]]
    prefix_lengths: tuple[int, ...]  # the distinct prefix lengths, for slicing the name

    def entries_on(self, name: str) -> list[AccessControlEntry]:
        found = list(self.literal.get(name, ()))
        found.extend(self.wildcard)
        for length in self.prefix_lengths:
            if length > len(name):
                break
            found.extend(self.prefixed.get(name[:length], ()))
        return found


def _index(bindings: Iterable[AclBinding]) -> dict[ResourceType, _TypeIndex]:
    by_type: dict[ResourceType, tuple[dict[str, list[AccessControlEntry]], list[AccessControlEntry],
                                      dict[str, list[AccessControlEntry]]]] = {}
    for binding in set(bindings):
        literal, wildcard, prefixed = by_type.setdefault(binding.pattern.resource_type,
                                                         ({}, [], {}))
        pattern = binding.pattern
        if pattern.pattern_type is PatternType.PREFIXED:
            prefixed.setdefault(pattern.name, []).append(binding.entry)
        elif pattern.name == WILDCARD:
            wildcard.append(binding.entry)
        else:
            literal.setdefault(pattern.name, []).append(binding.entry)
    return {
        rtype: _TypeIndex(
            literal={k: tuple(v) for k, v in literal.items()},
            wildcard=tuple(wildcard),
            prefixed={k: tuple(v) for k, v in prefixed.items()},
            prefix_lengths=tuple(sorted({len(k) for k in prefixed})),
        )
        for rtype, (literal, wildcard, prefixed) in by_type.items()
    }


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    if not value:
        return frozenset()
    return frozenset(parse_principal(p.strip()) for p in value.split(";") if p.strip())


class Authorizer:
    """Decides requests against a set of bindings (the rule in the module docstring).

    Cheap on the hot path: bindings are indexed by resource type and name (literal names in a
    dict, prefixes by length), and every decision is memoised until the next ``update``.
    """

    MAX_CACHED_DECISIONS: Final = 65536

    def __init__(self, bindings: Iterable[AclBinding] = (), *,
                 super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._bindings: frozenset[AclBinding] = frozenset()
        self._index: dict[ResourceType, _TypeIndex] = {}
        self._decisions: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}
        self.update(bindings)

    @property
    def bindings(self) -> frozenset[AclBinding]:
        return self._bindings

    def update(self, bindings: Iterable[AclBinding]) -> None:
        """Replace the whole set of bindings (and forget every memoised decision)."""
        frozen = frozenset(bindings)
        self._index = _index(frozen)
        self._bindings = frozen
        self._decisions = {}

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        key = (principal, host, operation, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._decisions) >= self.MAX_CACHED_DECISIONS:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def _decide(self, principal: str, host: str, operation: AclOperation,
                resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        index = self._index.get(resource_type)
        entries = index.entries_on(name) if index is not None else []
        if not entries:
            return self.allow_everyone_if_no_acl_found
        allowing = implying(operation)
        allowed = False
        for entry in entries:
            if not entry.applies_to(principal, host):
                continue
            if entry.permission_type is AclPermissionType.DENY:
                if entry.operation in (operation, AclOperation.ALL):
                    return False
            elif entry.operation in allowing:
                allowed = True
        return allowed

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Kafka's ``authorizeByResourceType``: may the principal do ``operation`` on *some*
        resource of the type? True if an applying ALLOW pattern exists that no applying DENY
        (literal ``*``, the same literal name, or a covering prefix) takes back — used by
        InitProducerId for idempotent producers (KIP-679)."""
        if principal in self.super_users:
            return True
        index = self._index.get(resource_type)
        if index is None:
            return self.allow_everyone_if_no_acl_found
        allowing = implying(operation)

        def applying(entries: Iterable[AccessControlEntry], permission: AclPermissionType,
                     ops: frozenset[AclOperation]) -> bool:
            return any(e.permission_type is permission and e.operation in ops
                       and e.applies_to(principal, host) for e in entries)

        deny_ops = frozenset({operation, AclOperation.ALL})
        if applying(index.wildcard, AclPermissionType.DENY, deny_ops):
            return False
        deny_prefixes = [p for p, es in index.prefixed.items()
                         if applying(es, AclPermissionType.DENY, deny_ops)]
        if applying(index.wildcard, AclPermissionType.ALLOW, allowing):
            return True

        def denied(name: str, literal: bool) -> bool:
            if any(name.startswith(p) for p in deny_prefixes):
                return True
            return literal and applying(index.literal.get(name, ()), AclPermissionType.DENY,
                                        deny_ops)

        for name, entries in index.literal.items():
            if applying(entries, AclPermissionType.ALLOW, allowing) and not denied(name, True):
                return True
        for name, entries in index.prefixed.items():
            if applying(entries, AclPermissionType.ALLOW, allowing) and not denied(name, False):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              name: str) -> int:
        """The ``*_authorized_operations`` bit field: bit ``op.value`` per allowed operation."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation.value
        return bits
