"""The ``Broker`` and ``Topic`` specs as frozen dataclasses, and the names of owned objects.

Owns the defaults: a value absent from a CR's ``spec`` takes the default written here, and the
CRD schema (``crds.py``) publishes the same defaults (``test_crds`` checks they agree). Parsing
never raises on unknown keys (the API server has already pruned them); it raises ``SpecError``
on a value the schema would have refused, for CRs that reached us some other way.

Every object a Broker owns is named from the Broker's name by ``BrokerNames``: one place, so
the builders, the reconcile and the tests cannot disagree about ``<name>-brokers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

GROUP: Final = "strata.dev"
VERSION: Final = "v1alpha1"
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
)


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


@dataclass(frozen=True, slots=True)
class MetadataSpec:
    """Where the brokers keep cluster metadata: given etcd endpoints, or an etcd we run."""

    etcd_endpoints: tuple[str, ...] = ()
    managed: bool = False
    managed_replicas: int = 3
    etcd_image: str = DEFAULT_ETCD_IMAGE


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
    kafka_port: int = KAFKA_PORT

    @classmethod
    def parse(cls, spec: Mapping[str, Any]) -> BrokerSpec:
        storage = spec.get("storage") or {}
        rack = spec.get("rack") or {}
        meta = spec.get("metadata") or {}
        admin = spec.get("admin") or {}
        metrics = spec.get("metrics") or {}
        plaintext = (spec.get("listeners") or {}).get("plaintext") or {}
        etcd = meta.get("etcd") or {}
        config = {k: v for k, v in _config(spec.get("config")).items()
                  if k not in OPERATOR_OWNED_CONFIG}
        return cls(
            replicas=_int(spec, "replicas", 3, 0),
            image=str(spec.get("image", DEFAULT_IMAGE)),
            image_pull_policy=str(spec.get("imagePullPolicy", "IfNotPresent")),
            resources=dict(spec.get("resources") or {}),
            storage=StorageSpec(
                size=str(storage.get("size", "10Gi")),
                storage_class_name=storage.get("storageClassName"),
                delete_claim=bool(storage.get("deleteClaim", False)),
            ),
            config=config,
            rack_topology_key=rack.get("topologyKey") or None,
            metadata=MetadataSpec(
                etcd_endpoints=tuple(str(e) for e in etcd.get("endpoints") or ()),
                managed=bool(meta.get("managed", False)),
                managed_replicas=_int(meta, "managedReplicas", 3, 1),
                etcd_image=str(meta.get("etcdImage", DEFAULT_ETCD_IMAGE)),
            ),
            admin_enabled=bool(admin.get("enabled", True)),
            admin_replicas=_int(admin, "replicas", 1, 0),
            metrics_enabled=bool(metrics.get("enabled", True)),
            kafka_port=_int(plaintext, "port", KAFKA_PORT, 1),
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
        return cls(
            broker=broker,
            topic_name=str(spec.get("topicName") or resource_name),
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

    def admin_url(self) -> str:
        return f"http://{self.service_dns(self.admin)}:{ADMIN_PORT}"

    def etcd_endpoints(self, replicas: int) -> tuple[str, ...]:
        """Per-member client URLs of the managed etcd (stable DNS through the peer Service)."""
        return tuple(
            f"{self.etcd}-{i}.{self.service_dns(self.etcd_peers)}:{ETCD_CLIENT_PORT}"
            for i in range(replicas)
        )
