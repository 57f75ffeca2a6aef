"""``BrokerState``: the shared, explicit server state every handler gets (uvicorn's pattern).

Owns what a request handler may reach: the broker config, node and cluster ids, the clock, the
``LogManager``, the ``ReplicaManager``, the ``TopicStore``, the producer id manager, the handler
registry, metrics, the cluster (with ``metadata.store``), SCRAM credentials, the authorizer,
the advertised endpoints per listener, the ``GroupCoordinator`` and the transaction
coordinator (``TransactionRuntime``). Handlers get it through
``RequestContext.state``; nothing is global. ``KafkaServer.start`` builds it once.

Invariant: mutated only on the event loop; after startup only the control-plane handlers
change it (the topic store, the replica manager, the log manager's configs). The broker-level
config in force is static < dynamic cluster default < dynamic for this node
(``effective_broker_config``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strata.broker.cluster.cluster import Cluster
from strata.broker.config import BrokerConfig
from strata.broker.fetch_session import FetchSessionCache
from strata.broker.group.consumer_group_coordinator import consumer_group_config
from strata.broker.group.coordinator import GroupCoordinator, group_config, offsets_topic_config
from strata.broker.metrics.broker_metrics import BrokerMetrics
from strata.broker.network.request_context import Handler, RequestContext
from strata.broker.producer_id_manager import ProducerIdManager
from strata.broker.quotas.broker_quotas import BrokerQuotas
from strata.broker.replication.replica_alter_log_dirs import ReplicaAlterLogDirsManager
from strata.broker.replication.replica_manager import ReplicaManager
from strata.broker.security.authorization import BrokerAuthorizer
from strata.broker.telemetry.client_metrics_manager import ClientMetricsManager
from strata.broker.topic_store import TopicStore
from strata.broker.transaction.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from strata.broker.transaction.transaction_marker_sender import TransactionMarkerSender
from strata.broker.transaction.transaction_markers import WRITE_TXN_MARKERS_VERSION
from strata.broker.transaction.transaction_runtime import (
    TransactionRuntime,
    served_transaction_config,
)
from strata.protocol.api_keys import ApiKey
from strata.protocol.header import RequestHeader
from strata.protocol.registry import HandlerRegistry
from strata.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from strata.security.credentials import CredentialStore
from strata.storage.clock import Clock
from strata.storage.log_manager import LogManager


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A live broker as clients see it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(eq=False)
class BrokerState:
    """Everything a handler may use, built once by ``KafkaServer.start``."""

    config: BrokerConfig
    node_id: int
    cluster_id: str
    clock: Clock
    log_manager: LogManager
    replica_manager: ReplicaManager
    topic_store: TopicStore
    producer_id_manager: ProducerIdManager
    advertised_host: str
    advertised_port: int
    registry: HandlerRegistry[Handler] = field(default_factory=HandlerRegistry)
    metrics: BrokerMetrics | None = None
    cluster: Cluster | None = None  # set when metadata.store is (a multi-broker cluster)
    credentials: CredentialStore | None = None  # SCRAM users (strata.broker.security)
    authorizer: BrokerAuthorizer | None = None  # ACLs, with authorizer.class.name
    quotas: BrokerQuotas | None = None  # client quotas (strata.broker.quotas)
    # listener name -> (host, port) advertised; the first listener is advertised_host/_port
    advertised_endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)
    group_coordinator: GroupCoordinator = field(init=False)
    transaction_coordinator: TransactionRuntime = field(init=False)
    add_partitions_to_txn: AddPartitionsToTxnManager = field(init=False)  # KIP-890 checks
    fetch_sessions: FetchSessionCache = field(init=False)
    client_metrics: ClientMetricsManager = field(init=False)  # KIP-714 (strata.broker.telemetry)
    log_dir_movers: ReplicaAlterLogDirsManager = field(init=False)  # AlterReplicaLogDirs
    started_ms: int = field(init=False)  # ApiVersions' finalized_features_epoch

    def __post_init__(self) -> None:
        self.group_coordinator = GroupCoordinator(
            group=group_config(self.config), offsets=offsets_topic_config(self.config),
            clock=self.clock, replica_manager=self.replica_manager,
            topic_store=self.topic_store, create_topic=self.create_internal_topic,
            consumer=consumer_group_config(self.config))
        self.transaction_coordinator = TransactionRuntime(
            config=served_transaction_config(self.config), clock=self.clock,
            replica_manager=self.replica_manager, topic_store=self.topic_store,
            create_topic=self.create_internal_topic,
            producer_id_manager=self.producer_id_manager,
            sender=TransactionMarkerSender(
                node_id=self.node_id, clock=self.clock, replica_manager=self.replica_manager,
                topic_store=self.topic_store, local_writer=self.write_txn_markers_in_process))
        self.add_partitions_to_txn = AddPartitionsToTxnManager(
            node_id=self.node_id, runtime=self.transaction_coordinator,
            local_handler=self.add_partitions_to_txn_in_process)
        self.fetch_sessions = FetchSessionCache(
            self.config.get_int("max.incremental.fetch.session.cache.slots"),
            self.config.get_int("min.incremental.fetch.session.eviction.ms"))
        self.client_metrics = ClientMetricsManager(
            self.clock, self.topic_store.all_broker_configs,
            telemetry_max_bytes=self.config.get_int("telemetry.max.bytes"))
        self.log_dir_movers = ReplicaAlterLogDirsManager(self.replica_manager)
        self.started_ms = self.clock.milliseconds()

    def live_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        """The brokers clients are told about (Metadata, DescribeCluster), by node id: the
        registered ones in a cluster, else this one. With ``listener``, each broker's endpoint
        of that listener (a broker without one is left out, as in Kafka); else its first."""
        if self.cluster is not None:
            out = []
            for _, b in sorted(self.cluster.image.brokers.items()):
                endpoint = b.endpoint(listener) if listener else (b.host, b.port)
                if endpoint is not None:
                    out.append(BrokerEndpoint(b.node_id, endpoint[0], endpoint[1], b.rack))
            return out
        host, port = self.advertised_endpoints.get(
            listener or "", (self.advertised_host, self.advertised_port))
        return [BrokerEndpoint(self.node_id, host, port, self.config.get("broker.rack") or None)]

    def live_broker_ids(self) -> set[int]:
        if self.cluster is not None:
            return set(self.cluster.image.brokers)
        return {self.node_id}

    @property
    def controller_id(self) -> int:
        """The active controller's node id (-1: none now; this broker while it is alone)."""
        if self.cluster is not None:
            controller = self.cluster.image.controller
            return controller.node_id if controller is not None else -1
        return self.node_id

    async def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                                    configs: Mapping[str, str]) -> None:
        """Register and host an internal topic (``__consumer_offsets``, ``__transaction_state``),
        its replication factor capped at the live brokers (and its ``min.insync.replicas`` at
        that replication factor)."""
        from strata.broker.handlers import ApiError  # handlers import this module
        from strata.broker.handlers.create_topics import TopicSpec, create_topic
        from strata.protocol.error_codes import ErrorCode

        live = max(len(self.live_broker_ids()), 1)
        replication_factor = min(replication_factor, live)
        if "min.insync.replicas" in configs:  # writable with the replicas it has
            configs = {**configs, "min.insync.replicas": str(
                min(int(configs["min.insync.replicas"]), replication_factor))}
        spec = TopicSpec(name, partitions, replication_factor, configs)
        try:
            await create_topic(self, spec)
        except ApiError as exc:  # another broker of the cluster created it first
            if exc.error_code != ErrorCode.topic_already_exists:
                raise

    async def write_txn_markers_in_process(self, request: Any) -> Any:
        """WriteTxnMarkers from this broker's transaction coordinator to itself: the handler,
        called in-process as the broker (its own request needs no ACL)."""
        from strata.broker.handlers.write_txn_markers import handle  # handlers import this

        header = RequestHeader(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, 0,
                               f"strata-txn-coordinator-{self.node_id}")
        return await handle(_BrokerSelfContext(header, "", 0, self), request)

    async def add_partitions_to_txn_in_process(self, request: Any) -> Any:
        """A partition leader's AddPartitionsToTxn (v4+) to this broker's own transaction
        coordinator: the handler, called in-process as the broker."""
        from strata.broker.handlers.add_partitions_to_txn import handle  # handlers import this
        from strata.broker.transaction.transaction_verification import (
            ADD_PARTITIONS_TO_TXN_BROKER_VERSION,
        )

        header = RequestHeader(ApiKey.ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_TO_TXN_BROKER_VERSION,
                               0, f"strata-txn-verification-{self.node_id}")
        return await handle(_BrokerSelfContext(header, "", 0, self), request)

    def broker_defaults(self) -> dict[str, str]:
        """The broker-level config in force: static (file/env/flags) < dynamic cluster default
        < dynamic for this node. What the ``LogManager`` resolves topic configs against."""
        return effective_broker_config(self.config, self.topic_store, self.node_id)

    def apply_broker_defaults(self) -> None:
        """Push ``broker_defaults()`` and every topic's overrides to the logs and the
        replication throttles (after a change)."""
        self.log_manager.broker_config = defaults = self.broker_defaults()
        topics = self.topic_store.topics().values()
        for record in topics:
            self.log_manager.set_topic_config(record.name, record.configs)
        self.replica_manager.replication_quotas.configure(
            defaults, {r.name: r.configs for r in topics}, self.clock.milliseconds())


@dataclass(slots=True)
class _BrokerSelfContext(RequestContext):
    """A request this broker makes to itself: every operation is allowed."""

    def authorize(self, operation: AclOperation, resource_type: ResourceType,
                  name: str = CLUSTER_NAME) -> bool:
        return True


def effective_broker_config(
    config: BrokerConfig, store: TopicStore, node_id: int
) -> dict[str, str]:
    return {**config.log_manager_props(), **store.broker_configs(""),
            **store.broker_configs(str(node_id))}
