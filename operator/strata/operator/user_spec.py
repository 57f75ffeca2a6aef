"""The ``User`` spec (Strimzi's KafkaUser): a frozen dataclass, parsed from the CR's ``spec``.

Owns the spec's vocabulary and its mapping to Kafka's names: the SCRAM mechanism of
``authentication.type``; each ACL rule of ``authorization.acls`` expanded into one
``AclRule`` per operation, in Kafka's enum names (``TOPIC``, ``PREFIXED``, ``READ``,
``ALLOW``); the quota fields' Kafka keys (``producerByteRate`` is ``producer_byte_rate``).

Defaults match the CRD (``user_crd.py``): the Kafka user name is the resource's name, the
mechanism SCRAM-SHA-512, an ACL's pattern type literal, host ``*``, type allow. Parsing never
raises on unknown keys; it raises ``SpecError`` on a value the schema would have refused.
Without ``authentication`` the User has no credential the operator manages (ACLs and quotas
only, e.g. for a principal that logs in with a client certificate). ``authentication.type:
tls`` (Strimzi's KafkaUser ``tls``): the operator issues a client certificate with subject
``CN=<userName>`` from the Broker's clients CA (``tls_users.py``); with Kafka's default
``ssl.principal.mapping.rules`` the principal is ``User:CN=<userName>``, and its quotas are
those of the user ``CN=<userName>`` (``kafka_user``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from strata.operator.model import SecretKeyRef, SpecError

# authentication.type -> the SCRAM mechanism.
AUTHENTICATION: Final = {"scram-sha-512": "SCRAM-SHA-512", "scram-sha-256": "SCRAM-SHA-256"}
DEFAULT_AUTHENTICATION: Final = "scram-sha-512"
TLS: Final = "tls"  # authentication.type: a client certificate the operator issues

# ACL vocabulary (Strimzi's spelling in the CR, Kafka's enum names inside).
RESOURCE_TYPES: Final = {"topic": "TOPIC", "group": "GROUP", "cluster": "CLUSTER",
                         "transactionalId": "TRANSACTIONAL_ID"}
PATTERN_TYPES: Final = {"literal": "LITERAL", "prefixed": "PREFIXED"}
OPERATIONS: Final = {"Read": "READ", "Write": "WRITE", "Create": "CREATE", "Delete": "DELETE",
                     "Alter": "ALTER", "Describe": "DESCRIBE", "ClusterAction": "CLUSTER_ACTION",
                     "DescribeConfigs": "DESCRIBE_CONFIGS", "AlterConfigs": "ALTER_CONFIGS",
                     "IdempotentWrite": "IDEMPOTENT_WRITE", "All": "ALL"}
PERMISSIONS: Final = {"allow": "ALLOW", "deny": "DENY"}
CLUSTER_RESOURCE_NAME: Final = "kafka-cluster"  # Kafka's one cluster resource

# quotas field -> Kafka's client quota key.
QUOTA_KEYS: Final = {"producerByteRate": "producer_byte_rate",
                     "consumerByteRate": "consumer_byte_rate",
                     "requestPercentage": "request_percentage",
                     "controllerMutationRate": "controller_mutation_rate"}


@dataclass(frozen=True, slots=True, order=True)
class AclRule:
    """One Kafka ACL binding of the User's principal, in Kafka's enum names."""

    resource_type: str
    resource_name: str
    pattern_type: str
    operation: str
    host: str = "*"
    permission: str = "ALLOW"

    def describe(self) -> str:
        return (f"{self.permission} {self.operation} on {self.resource_type.lower()} "
                f"{self.resource_name!r} ({self.pattern_type.lower()}) from {self.host}")


@dataclass(frozen=True, slots=True)
class UserSpec:
    broker: str
    user_name: str
    mechanism: str | None = "SCRAM-SHA-512"  # None: no credential managed
    password: SecretKeyRef | None = None  # None: generated into the User's own Secret
    acls: frozenset[AclRule] = frozenset()
    quotas: Mapping[str, float] = field(default_factory=dict)
    tls: bool = False  # a client certificate (CN=<userName>) instead of a SCRAM credential

    @property
    def kafka_user(self) -> str:
        """The user as Kafka names it: the principal's name (quotas' user entity)."""
        return f"CN={self.user_name}" if self.tls else self.user_name

    @property
    def principal(self) -> str:
        return f"User:{self.kafka_user}"

    @classmethod
    def parse(cls, spec: Mapping[str, Any], resource_name: str) -> UserSpec:
        broker = spec.get("broker")
        if not isinstance(broker, str) or not broker:
            raise SpecError("broker (the Broker's name) is required")
        user_name = str(spec.get("userName") or resource_name)
        tls = (spec.get("authentication") or {}).get("type") == TLS
        mechanism, password = _authentication(None if tls else spec.get("authentication"))
        return cls(broker=broker, user_name=user_name, mechanism=mechanism, password=password,
                   acls=_acls(spec.get("authorization")), quotas=_quotas(spec.get("quotas")),
                   tls=tls)


def _authentication(raw: Any) -> tuple[str | None, SecretKeyRef | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, Mapping):
        raise SpecError(f"authentication must be an object, got {raw!r}")
    kind = str(raw.get("type", DEFAULT_AUTHENTICATION))
    if kind not in AUTHENTICATION:
        raise SpecError(f"authentication.type must be one of {', '.join(AUTHENTICATION)}, "
                        f"{TLS}")
    secret = raw.get("passwordSecret")
    if secret is None:
        return AUTHENTICATION[kind], None
    if not isinstance(secret, Mapping) or not secret.get("name"):
        raise SpecError("authentication.passwordSecret.name is required")
    return AUTHENTICATION[kind], SecretKeyRef(str(secret["name"]),
                                              str(secret.get("key", "password")))


def _choice(raw: Mapping[str, Any], key: str, choices: Mapping[str, str], default: str,
            where: str) -> str:
    value = str(raw.get(key, default))
    if value not in choices:
        raise SpecError(f"{where}.{key} must be one of {', '.join(choices)}, got {value!r}")
    return choices[value]


def _acls(raw: Any) -> frozenset[AclRule]:
    if not raw:
        return frozenset()
    if not isinstance(raw, Mapping) or not isinstance(raw.get("acls", []), list):
        raise SpecError("authorization must be an object with a list acls")
    if str(raw.get("type", "simple")) != "simple":
        raise SpecError("authorization.type must be simple")
    rules: set[AclRule] = set()
    for index, item in enumerate(raw.get("acls") or ()):
        where = f"authorization.acls[{index}]"
        if not isinstance(item, Mapping):
            raise SpecError(f"{where} must be an object")
        resource = item.get("resource")
        if not isinstance(resource, Mapping):
            raise SpecError(f"{where}.resource is required")
        kind = _choice(resource, "type", RESOURCE_TYPES, "", f"{where}.resource")
        name = resource.get("name")
        if kind == "CLUSTER":
            name = CLUSTER_RESOURCE_NAME
        elif not isinstance(name, str) or not name:
            raise SpecError(f"{where}.resource.name is required for a {kind.lower()}")
        pattern = ("LITERAL" if kind == "CLUSTER" else
                   _choice(resource, "patternType", PATTERN_TYPES, "literal",
                           f"{where}.resource"))
        operations = item.get("operations")
        if not isinstance(operations, list) or not operations:
            raise SpecError(f"{where}.operations must list at least one operation")
        permission = _choice(item, "type", PERMISSIONS, "allow", where)
        host = str(item.get("host") or "*")
        for operation in operations:
            if operation not in OPERATIONS:
                raise SpecError(f"{where}.operations: {operation!r} is not one of "
                                f"{', '.join(OPERATIONS)}")
            rules.add(AclRule(kind, str(name), pattern, OPERATIONS[operation], host,
                              permission))
    return frozenset(rules)


def _quotas(raw: Any) -> dict[str, float]:
    if not raw:
        return {}
    if not isinstance(raw, Mapping):
        raise SpecError(f"quotas must be an object, got {raw!r}")
    out = {}
    for field_name, key in QUOTA_KEYS.items():
        value = raw.get(field_name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise SpecError(f"quotas.{field_name} must be a number >= 0, got {value!r}")
        out[key] = float(value)
    return out
