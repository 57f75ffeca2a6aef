"""The ``Broker`` and ``Topic`` specs as frozen dataclasses, and the names of owned objects.

Owns the defaults: a value absent from a CR's ``spec`` takes the default written here, and the
CRD schema (``crds.py``) publishes the same defaults (``test_crds`` checks they agree). Parsing
never raises on unknown keys (the API server has already pruned them); it raises ``SpecError``
on a value the schema would have refused, for CRs that reached us some other way.

Every object a Broker owns is named from the Broker's name by ``BrokerNames``: one place, so
the builders, the reconcile and the tests cannot disagree about ``<name>-brokers``.

Security (``SecuritySpec``): listeners by name (``plaintext`` on 9092 unless said otherwise),
each with ``tls`` and an ``authentication`` type; the TLS Secret (``tls.crt``, ``tls.key``,
``ca.crt``: cert-manager's layout); the inter-broker listener and, for a SASL one, the user
brokers log in as (its password in a Secret); ACL authorization and super users; the admin
service's credentials file and HTTPS Secrets. Secret *names* live in the spec, never values.

SCRAM users (``users``, Strimzi's KafkaUser inline): name, mechanism (SCRAM-SHA-512 unless
said otherwise) and the Secret key holding the password. One entry per (name, mechanism); the
inter-broker user is not one of them (the brokers' entrypoint owns it).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from strata.operator import jbod
from strata.operator.tls_spec import (
    CertificatesSpec,
    TlsSpecError,
    generated_secret_name,
    parse_certificates,
)

GROUP: Final = "strata.dev"
VERSION: Final = "v1beta1"  # served and stored
OLDER_VERSIONS: Final = ("v1alpha1",)  # still served (same schema), deprecated
API_VERSION: Final = f"{GROUP}/{VERSION}"

DEFAULT_IMAGE: Final = "strata:0.1.0"
DEFAULT_ETCD_IMAGE: Final = "registry.k8s.io/etcd:3.5.17-0"
KAFKA_PORT: Final = 9092
HTTP_PORT: Final = 9404
ADMIN_PORT: Final = 8080
ETCD_CLIENT_PORT: Final = 2379
ETCD_PEER_PORT: Final = 2380

# Kafka config keys the operator sets per cluster or per pod: a Broker's spec.config may not set
# them (a CEL rule rejects them at admission; ``BrokerSpec.parse`` drops them too).
OPERATOR_OWNED_CONFIG: Final = (
    "node.id",
    "broker.id",
    "listeners",
    "advertised.listeners",
    "log.dirs",
    "log.dir",
    "metadata.store",
    "broker.rack",
    "http.port",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "sasl.mechanism.inter.broker.protocol",
    "authorizer.class.name",
    "super.users",
)

# listeners[].authentication.type -> the listener's SASL mechanism (None: no SASL).
AUTHENTICATION_TYPES: Final = {"none": None, "tls": None, "plain": "PLAIN",
                               "scram-sha-256": "SCRAM-SHA-256",
                               "scram-sha-512": "SCRAM-SHA-512"}
AUTHORIZATION_TYPES: Final = ("none", "simple")
SCRAM_MECHANISMS: Final = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_SCRAM_MECHANISM: Final = "SCRAM-SHA-512"
STANDARD_AUTHORIZER: Final = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
LISTENER_NAME_PATTERN: Final = r"^[a-z][a-z0-9]{0,14}$"

# Kafka's topic name rules (``org.apache.kafka.common.internals.Topic.validate``).
TOPIC_NAME_PATTERN: Final = r"^[a-zA-Z0-9._-]+$"
TOPIC_NAME_MAX_LENGTH: Final = 249


def topic_name_problem(name: str) -> str | None:
    """Why Kafka would refuse ``name`` as a topic name (``INVALID_TOPIC_EXCEPTION``), or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > TOPIC_NAME_MAX_LENGTH:
        return (f"topic name is {len(name)} characters long, Kafka allows at most "
                f"{TOPIC_NAME_MAX_LENGTH}")
    if not re.match(TOPIC_NAME_PATTERN, name):
        return (f"topic name {name!r} is illegal: only ASCII letters, digits, '.', '_' and "
                "'-' are allowed")
    return None


class SpecError(ValueError):
    """A spec value the CRD schema would have rejected."""


def _int(raw: Mapping[str, Any], key: str, default: int, minimum: int) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise SpecError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return value


def _config(raw: Any) -> dict[str, str]:
    """Kafka config values as strings (the CRD allows int-or-string; booleans written as text)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SpecError(f"config must be a map, got {raw!r}")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in raw.items()}


@dataclass(frozen=True, slots=True)
class StorageSpec:
    size: str = "10Gi"
    storage_class_name: str | None = None
    delete_claim: bool = False
    type: str = jbod.PERSISTENT_CLAIM
    jbod_volumes: tuple[jbod.Volume, ...] = ()

    @property
    def volumes(self) -> tuple[jbod.Volume, ...]:
        """Every volume of a broker (``jbod.py``): the JBOD ones, else the single claim."""
        return jbod.volumes_of(self.size, self.storage_class_name, self.delete_claim,
                               self.jbod_volumes)


@dataclass(frozen=True, slots=True)
class MetadataSpec:
    """Where the brokers keep cluster metadata: given etcd endpoints, or an etcd we run."""

    etcd_endpoints: tuple[str, ...] = ()
    managed: bool = False
    managed_replicas: int = 3
    etcd_image: str = DEFAULT_ETCD_IMAGE
    managed_storage_size: str = "1Gi"
    managed_storage_class_name: str | None = None


@dataclass(frozen=True, slots=True)
class PlacementSpec:
    """Where broker pods may run: Kubernetes' own pod-spec fields, passed through as given
    (the API server has validated them against the CRD's schema)."""

    affinity: Mapping[str, Any] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    topology_spread_constraints: tuple[Mapping[str, Any], ...] = ()
    priority_class_name: str | None = None


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """One Kafka listener: name (lower case here, upper case in Kafka), port, TLS, who logs in."""

    name: str
    port: int
    tls: bool = False
    authentication: str = "none"

    @property
    def kafka_name(self) -> str:
        return self.name.upper()

    @property
    def mechanism(self) -> str | None:
        return AUTHENTICATION_TYPES[self.authentication]

    @property
    def protocol(self) -> str:
        """Kafka's security protocol (``listener.security.protocol.map``)."""
        sasl = self.mechanism is not None
        if self.tls or self.authentication == "tls":
            return "SASL_SSL" if sasl else "SSL"
        return "SASL_PLAINTEXT" if sasl else "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class SecretKeyRef:
    name: str
    key: str = "password"


@dataclass(frozen=True, slots=True)
class SecuritySpec:
    """Everything about who may connect and what they may do (see the module docstring)."""

    tls_secret: str | None = None
    inter_broker_listener: str | None = None  # None: plaintext, else the first listener
    inter_broker_username: str | None = None
    inter_broker_password: SecretKeyRef | None = None
    authorization: str = "none"
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    admin_auth_secret: str | None = None  # key auth.json: strata.admin.credentials' file
    admin_tls_secret: str | None = None  # tls.crt + tls.key: the admin service serves HTTPS


@dataclass(frozen=True, slots=True)
class ScramUserSpec:
    """A SCRAM user the operator keeps in the cluster, its password from a Secret."""

    name: str
    password: SecretKeyRef
    mechanism: str = DEFAULT_SCRAM_MECHANISM

    @property
    def key(self) -> tuple[str, str]:
        return self.name, self.mechanism


def _users(raw: Any, inter_broker_username: str | None) -> tuple[ScramUserSpec, ...]:
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise SpecError(f"users must be a list, got {raw!r}")
    users: dict[tuple[str, str], ScramUserSpec] = {}
    for item in raw:
        name = item.get("name") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not name:
            raise SpecError(f"users[].name is required, got {item!r}")
        mechanism = str(item.get("mechanism", DEFAULT_SCRAM_MECHANISM))
        if mechanism not in SCRAM_MECHANISMS:
            raise SpecError(f"users[{name}].mechanism must be one of "
                            f"{', '.join(SCRAM_MECHANISMS)}")
        secret = item.get("passwordSecret") or {}
        if not secret.get("name"):
            raise SpecError(f"users[{name}].passwordSecret.name is required")
        if name == inter_broker_username:
            raise SpecError(f"users[{name}] is the inter-broker user (interBroker.username), "
                            "which the brokers create themselves")
        user = ScramUserSpec(name, SecretKeyRef(str(secret["name"]),
                                                str(secret.get("key", "password"))), mechanism)
        if user.key in users:
            raise SpecError(f"users[{name}] is listed twice for {mechanism}")
        users[user.key] = user
    return tuple(users.values())


def _listeners(raw: Any) -> dict[str, ListenerSpec]:
    if not raw:
        return {"plaintext": ListenerSpec("plaintext", KAFKA_PORT)}
    if not isinstance(raw, Mapping):
        raise SpecError(f"listeners must be a map of name to listener, got {raw!r}")
    out = {}
    for name, item in sorted(raw.items()):
        item = item or {}
        if not re.match(LISTENER_NAME_PATTERN, str(name)):
            raise SpecError(f"listener name {name!r} must match {LISTENER_NAME_PATTERN}")
        authentication = str((item.get("authentication") or {}).get("type", "none"))
        if authentication not in AUTHENTICATION_TYPES:
            raise SpecError(f"listeners.{name}.authentication.type must be one of "
                            f"{', '.join(AUTHENTICATION_TYPES)}")
        out[str(name)] = ListenerSpec(str(name), _int(item, "port", KAFKA_PORT, 1),
                                      bool(item.get("tls", False)), authentication)
    if len({listener.port for listener in out.values()}) != len(out):
        raise SpecError("two listeners use the same port")
    return out


def _security(spec: Mapping[str, Any], listeners: Mapping[str, ListenerSpec],
              broker_name: str | None) -> SecuritySpec:
    tls = spec.get("tls") or {}
    inter = spec.get("interBroker") or {}
    authz = spec.get("authorization") or {}
    admin = spec.get("admin") or {}
    password = inter.get("passwordSecret")
    listener = inter.get("listener")
    if listener is not None and listener not in listeners:
        raise SpecError(f"interBroker.listener {listener!r} is not one of the listeners")
    authorization = str(authz.get("type", "none"))
    if authorization not in AUTHORIZATION_TYPES:
        raise SpecError(f"authorization.type must be one of {', '.join(AUTHORIZATION_TYPES)}")
    security = SecuritySpec(
        tls_secret=(tls.get("secretName") or None),  # operator-made: set by _parse
        inter_broker_listener=listener,
        inter_broker_username=inter.get("username") or None,
        inter_broker_password=(SecretKeyRef(str(password["name"]),
                                            str(password.get("key", "password")))
                               if password else None),
        authorization=authorization,
        super_users=tuple(str(u) for u in authz.get("superUsers") or ()),
        allow_everyone_if_no_acl_found=bool(authz.get("allowEveryoneIfNoAclFound", False)),
        admin_auth_secret=((admin.get("authentication") or {}).get("secretName") or None),
        admin_tls_secret=((admin.get("tls") or {}).get("secretName") or None),
    )
    if _tls_needed(listeners) and security.tls_secret is None and broker_name is None:
        raise SpecError("a TLS listener needs tls.secretName (tls.crt, tls.key, ca.crt), or "
                        "the Broker's name (the operator makes the certificates)")
    return security


def _tls_needed(listeners: Mapping[str, ListenerSpec]) -> bool:
    return any(lst.tls or lst.authentication == "tls" for lst in listeners.values())


@dataclass(frozen=True, slots=True)
class BrokerSpec:
    replicas: int = 3
    image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    resources: Mapping[str, Any] = field(default_factory=dict)
    storage: StorageSpec = StorageSpec()
    config: Mapping[str, str] = field(default_factory=dict)
    rack_topology_key: str | None = None
    metadata: MetadataSpec = MetadataSpec()
    admin_enabled: bool = True
    admin_replicas: int = 1
    metrics_enabled: bool = True
    listeners: Mapping[str, ListenerSpec] = field(
        default_factory=lambda: {"plaintext": ListenerSpec("plaintext", KAFKA_PORT)})
    security: SecuritySpec = SecuritySpec()
    users: tuple[ScramUserSpec, ...] = ()
    placement: PlacementSpec = PlacementSpec()
    certificates: CertificatesSpec = field(default_factory=CertificatesSpec)

    @property
    def client_listener(self) -> ListenerSpec:
        """The listener ``status.bootstrapServers`` names: ``plaintext``, else the lowest port."""
        return self.listeners.get("plaintext") or min(self.listeners.values(),
                                                      key=lambda lst: lst.port)

    @property
    def bootstrap_listener(self) -> ListenerSpec:
        """The listener ``status.bootstrapServers`` names: among the listeners that
        authenticate clients, if any (an unauthenticated one is never advertised next to
        them), else among all: ``plaintext`` if there, else the lowest port."""
        pool = [lst for lst in self.listeners.values() if lst.authentication != "none"]
        pool = pool or list(self.listeners.values())
        named = [lst for lst in pool if lst.name == "plaintext"]
        return named[0] if named else min(pool, key=lambda lst: lst.port)

    @property
    def kafka_port(self) -> int:
        return self.client_listener.port

    @property
    def inter_broker_listener(self) -> ListenerSpec:
        """The brokers' own listener, also the one the operator and the admin service use."""
        name = self.security.inter_broker_listener
        return self.listeners[name] if name else self.client_listener

    def validate_inter_broker(self) -> None:
        listener = self.inter_broker_listener
        if listener.mechanism is not None and (self.security.inter_broker_username is None
                                               or self.security.inter_broker_password is None):
            raise SpecError(f"the inter-broker listener {listener.name!r} uses SASL: set "
                            "interBroker.username and interBroker.passwordSecret")

    @classmethod
    def parse(cls, spec: Mapping[str, Any], broker_name: str | None = None) -> BrokerSpec:
        """``broker_name``: the Broker's name, which names the Secret of certificates the
        operator or cert-manager makes (``tls_spec``); without it such a spec is refused."""
        parsed = cls._parse(spec, broker_name)
        parsed.validate_inter_broker()
        return parsed

    @classmethod
    def _parse(cls, spec: Mapping[str, Any], broker_name: str | None = None) -> BrokerSpec:
        storage = spec.get("storage") or {}
        rack = spec.get("rack") or {}
        meta = spec.get("metadata") or {}
        admin = spec.get("admin") or {}
        metrics = spec.get("metrics") or {}
        listeners = _listeners(spec.get("listeners"))
        etcd = meta.get("etcd") or {}
        config = {k: v for k, v in _config(spec.get("config")).items()
                  if k not in OPERATOR_OWNED_CONFIG}
        security = _security(spec, listeners, broker_name)
        try:
            storage_type, volumes = jbod.parse_volumes(storage)
        except jbod.VolumeSpecError as exc:
            raise SpecError(str(exc)) from exc
        try:
            certificates = parse_certificates(spec.get("tls"), _tls_needed(listeners))
        except TlsSpecError as exc:
            raise SpecError(str(exc)) from exc
        if certificates.generated and broker_name is not None:
            security = dataclasses.replace(security,
                                           tls_secret=generated_secret_name(broker_name))
        return cls(
            replicas=_int(spec, "replicas", 3, 0),
            image=str(spec.get("image", DEFAULT_IMAGE)),
            image_pull_policy=str(spec.get("imagePullPolicy", "IfNotPresent")),
            resources=dict(spec.get("resources") or {}),
            storage=StorageSpec(
                size=str(storage.get("size", "10Gi")),
                storage_class_name=storage.get("storageClassName"),
                delete_claim=bool(storage.get("deleteClaim", False)),
                type=storage_type, jbod_volumes=volumes,
            ),
            config=config,
            rack_topology_key=rack.get("topologyKey") or None,
            metadata=MetadataSpec(
                etcd_endpoints=tuple(str(e) for e in etcd.get("endpoints") or ()),
                managed=bool(meta.get("managed", False)),
                managed_replicas=_int(meta, "managedReplicas", 3, 1),
                etcd_image=str(meta.get("etcdImage", DEFAULT_ETCD_IMAGE)),
                managed_storage_size=str((meta.get("managedStorage") or {}).get("size", "1Gi")),
                managed_storage_class_name=(meta.get("managedStorage") or {}).get(
                    "storageClassName") or None,
            ),
            admin_enabled=bool(admin.get("enabled", True)),
            admin_replicas=_int(admin, "replicas", 1, 0),
            metrics_enabled=bool(metrics.get("enabled", True)),
            listeners=listeners,
            security=security,
            users=_users(spec.get("users"), security.inter_broker_username),
            placement=_placement(spec),
            certificates=certificates,
        )


def _placement(spec: Mapping[str, Any]) -> PlacementSpec:
    def listed(key: str) -> tuple[Mapping[str, Any], ...]:
        raw = spec.get(key) or []
        if not isinstance(raw, list) or not all(isinstance(i, Mapping) for i in raw):
            raise SpecError(f"{key} must be a list of objects")
        return tuple(dict(i) for i in raw)

    affinity = spec.get("affinity") or {}
    node_selector = spec.get("nodeSelector") or {}
    if not isinstance(affinity, Mapping) or not isinstance(node_selector, Mapping):
        raise SpecError("affinity and nodeSelector must be objects")
    priority = spec.get("priorityClassName")
    return PlacementSpec(
        affinity=dict(affinity),
        tolerations=listed("tolerations"),
        node_selector={str(k): str(v) for k, v in node_selector.items()},
        topology_spread_constraints=listed("topologySpreadConstraints"),
        priority_class_name=str(priority) if priority else None,
    )


@dataclass(frozen=True, slots=True)
class TopicSpec:
    broker: str
    topic_name: str
    partitions: int = 1
    replicas: int | None = None  # None: the cluster's default.replication.factor (KIP-464)
    config: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: Mapping[str, Any], resource_name: str) -> TopicSpec:
        broker = spec.get("broker")
        if not isinstance(broker, str) or not broker:
            raise SpecError("broker (the Broker's name) is required")
        replicas = spec.get("replicas")
        topic_name = str(spec.get("topicName") or resource_name)
        problem = topic_name_problem(topic_name)
        if problem is not None:
            raise SpecError(problem + (" (spec.topicName)" if spec.get("topicName") else
                                       " (the resource name; set spec.topicName)"))
        return cls(
            broker=broker,
            topic_name=topic_name,
            partitions=_int(spec, "partitions", 1, 1),
            replicas=None if replicas is None else _int(spec, "replicas", 1, 1),
            config=_config(spec.get("config")),
        )


@dataclass(frozen=True, slots=True)
class BrokerNames:
    """Names and DNS of everything one Broker owns, derived from its name and namespace."""

    name: str
    namespace: str

    @property
    def config_map(self) -> str:
        return f"{self.name}-config"

    @property
    def headless_service(self) -> str:
        return f"{self.name}-brokers"

    @property
    def client_service(self) -> str:
        return f"{self.name}-bootstrap"

    @property
    def stateful_set(self) -> str:
        return self.name

    @property
    def pdb(self) -> str:
        return self.name

    @property
    def admin(self) -> str:
        return f"{self.name}-admin"

    @property
    def etcd(self) -> str:
        return f"{self.name}-etcd"

    @property
    def etcd_peers(self) -> str:
        return f"{self.name}-etcd-peers"

    def pod(self, ordinal: int) -> str:
        return f"{self.stateful_set}-{ordinal}"

    def service_dns(self, service: str) -> str:
        return f"{service}.{self.namespace}.svc"

    def bootstrap_servers(self, port: int = KAFKA_PORT) -> str:
        return f"{self.service_dns(self.client_service)}:{port}"

    def admin_url(self, https: bool = False) -> str:
        return f"{'https' if https else 'http'}://{self.service_dns(self.admin)}:{ADMIN_PORT}"

    def etcd_endpoints(self, replicas: int) -> tuple[str, ...]:
        """Per-member client URLs of the managed etcd (stable DNS through the peer Service)."""
        return tuple(
            f"{self.etcd}-{i}.{self.service_dns(self.etcd_peers)}:{ETCD_CLIENT_PORT}"
            for i in range(replicas)
        )
