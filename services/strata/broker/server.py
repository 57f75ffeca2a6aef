"""``KafkaServer``: one broker process — startup order, listeners, periodic work, shutdown.

Owns the broker's lifecycle; it builds the shared server state every handler gets
(``broker_state.BrokerState``) once, before the listeners open (step 5).

Startup, in order (each step needs the one before):

0. raise the soft open file limit to the hard one and log both with the partition capacity
   they give (``partition_capacity``: creations beyond it are refused with POLICY_VIOLATION);
1. resolve the cluster id (``cluster.id``, else the one in a log dir's ``meta.properties``,
   else a new one) and open the ``TopicStore`` in the first log dir;
2. start the ``LogManager`` (in a thread: it reads and recovers every partition), with the
   static and dynamic broker configs as defaults and each topic's overrides registered first;
   a partition whose log cannot be loaded is offline alone (one error line; not hosted), the
   broker starts anyway;
3. reconcile the logs found with the registry: a log of an unknown topic (or beyond its
   partition count) is deleted, except when the registry file did not exist yet, in which case
   the logs found are adopted as topics (a data dir from before the registry, or a lost file);
4. ``ReplicaManager``: a ``Partition`` for every partition of every topic, as leader at the
   persisted leader epoch; then the ``GroupCoordinator`` starts replaying the
   ``__consumer_offsets`` partitions it leads (groups of a partition still loading answer
   COORDINATOR_LOAD_IN_PROGRESS);
5. the Kafka listeners (``listeners``, each with its security protocol from
   ``listener.security.protocol.map``: TLS and SASL per ``strata.broker.security``; port 0
   picks a free port, and ``advertised.listeners`` with port 0 follows it; a cluster registers
   every advertised listener, and Metadata answers each client with the endpoints of the
   listener it connected to, Kafka's rule), then the HTTP health server (``http.port``), then
   the periodic tasks (``periodic_tasks``: flushes, checkpoints, retention, expiry, cleaners);
6. ready: ``/readyz`` answers 200 and one line on stdout names the bound addresses
   (``... serving Kafka on HOST:PORT ... HTTP on HOST:PORT``) for scripts and tests.

Shutdown (SIGTERM or SIGINT): stop accepting; the group coordinator unloads its groups
(parked JoinGroup/SyncGroup requests are answered NOT_COORDINATOR, so clients move on at once);
every connection stops reading, finishes the request in hand (bounded by ``SHUTDOWN_GRACE_S``)
and closes; the periodic tasks stop (a flush in progress completes, a cleaning round is
aborted); ``LogManager.shutdown()`` flushes, writes the checkpoints and the clean-shutdown
marker; the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

import uvloop

from strata.broker.broker_state import BrokerState, effective_broker_config
from strata.broker.cluster.cluster import Cluster
from strata.broker.cluster.image import ClusterImage
from strata.broker.config import BrokerConfig, ConfigError
from strata.broker.garbage_collection import tune_garbage_collector
from strata.broker.metrics.broker_metrics import BrokerMetrics
from strata.broker.metrics.fetch_session_metrics import FetchSessionMetrics
from strata.broker.metrics.transaction_metrics import TransactionMetrics
from strata.broker.network.connection import KafkaConnection, RequestQueueLimit
from strata.broker.network.http import HealthServer
from strata.broker.network.listeners import (
    advertised_endpoints,
    inter_broker_client_security,
    inter_broker_listener_name,
    listener_security,
)
from strata.broker.partition_capacity import (
    MAX_PARTITIONS_CONFIG,
    current_capacity,
    raise_open_file_limit,
)
from strata.broker.periodic_tasks import PeriodicTasks
from strata.broker.producer_id_manager import ClusterProducerIdManager, ProducerIdManager
from strata.broker.quotas.broker_quotas import open_quotas
from strata.broker.quotas.client_quota_manager import QuotaWindow
from strata.broker.replication.replica_manager import ReplicaManager
from strata.broker.replication.replication_quota_metrics import ReplicationQuotaMetrics
from strata.broker.security.authorization import open_authorizer
from strata.broker.telemetry.client_metrics_collector import ClientMetricsCollector
from strata.broker.topic_store import FileTopicStore, TopicRecord, TopicStore, TopicStoreError
from strata.metadata.errors import MetadataStoreError
from strata.security.credentials import (
    CredentialStore,
    FileCredentialStore,
    MetadataCredentialStore,
)
from strata.storage.clock import Clock, SystemClock
from strata.storage.errors import StorageError
from strata.storage.log_manager import LogManager
from strata.storage.meta_properties import generate_directory_id, read_meta_properties

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_S: Final = 10.0
"""How long in-flight requests (a long-poll fetch, at most its max wait) may take at shutdown."""


class KafkaServer:
    """One broker. ``await start()``, then ``await shutdown()``; or ``serve()`` for both."""

    def __init__(self, config: BrokerConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.state: BrokerState | None = None
        self.ready = False
        self.kafka_port = 0
        self.http_port = 0
        self._kafka_server: asyncio.Server | None = None  # the first listener's
        self._kafka_servers: list[asyncio.Server] = []
        self._http = HealthServer(lambda: self.ready)
        self._connections: set[KafkaConnection] = set()
        self._stopping = asyncio.Event()
        self._periodic = PeriodicTasks(config, self._stopping)
        self._shut_down = False
        self._log_manager: LogManager | None = None
        self._cluster: Cluster | None = None

    # ------------------------------------------------------------------ startup
    async def start(self) -> None:
        from strata.broker.handlers import build_registry  # handlers import this module

        config = self.config
        node_id = config.node_id
        log_dirs = config.log_dirs
        soft, hard = raise_open_file_limit()
        capacity = current_capacity(config.get(MAX_PARTITIONS_CONFIG))
        logger.info("open file limit %d (hard %d): up to %d partition replicas (%s)", soft,
                    hard if hard >= 0 else soft, capacity.limit, capacity.describe())
        cluster_id = config.cluster_id
        cluster: Cluster | None = None
        store: TopicStore
        if config.get("metadata.store"):
            self._cluster = cluster = await Cluster.open(
                config, lambda: _cluster_id_from_disk(log_dirs))
            cluster_id, store = cluster.cluster_id, cluster.topic_store
        else:
            if not cluster_id:
                cluster_id = await asyncio.to_thread(_cluster_id_from_disk, log_dirs)
            store = await asyncio.to_thread(FileTopicStore.open, log_dirs[0])
        log_manager = LogManager(log_dirs, effective_broker_config(config, store, node_id),
                                 self.clock, cluster_id=cluster_id, node_id=node_id)
        for record in store.topics().values():
            log_manager.set_topic_config(record.name, record.configs)
        await asyncio.to_thread(log_manager.startup)
        self._log_manager = log_manager  # from here on, shutdown() must close it
        logger.info("loaded %d partition logs from %s", len(log_manager.all_logs()),
                    ", ".join(map(str, log_dirs)))

        replica_manager = ReplicaManager(log_manager, self.clock, node_id)
        if isinstance(store, FileTopicStore):
            await _reconcile_logs(store, log_manager)
            for record in store.topics().values():
                for index in range(record.partitions):
                    try:
                        replica_manager.make_leader(record.name, index, record.topic_id,
                                                    record.leader_epochs[index],
                                                    configs=record.configs)
                    except StorageError as exc:
                        if (record.name, index) not in log_manager.offline_partitions:
                            logger.error("cannot host %s-%d: %s", record.name, index, exc)

        listener = config.listener
        advertised = config.advertised_listener
        credentials: CredentialStore = (MetadataCredentialStore(cluster.store)
                                        if cluster is not None
                                        else FileCredentialStore(log_dirs[0]))
        securities = {entry.name: listener_security(config, entry.name, credentials)
                      for entry in config.listeners}
        # The sockets are bound first: a cluster registers the ports clients will be told.
        socks = {entry.name: _bind(entry.host, entry.port) for entry in config.listeners}
        bound_ports = {name: int(sock.getsockname()[1]) for name, sock in socks.items()}
        bound_port = bound_ports[listener.name]
        endpoints = advertised_endpoints(config, bound_ports)
        self.state = state = BrokerState(
            config=config, node_id=node_id, cluster_id=cluster_id, clock=self.clock,
            log_manager=log_manager, replica_manager=replica_manager, topic_store=store,
            producer_id_manager=(ClusterProducerIdManager(cluster.store) if cluster is not None
                                 else ProducerIdManager(log_dirs[0])),
            advertised_host=advertised.host,
            advertised_port=advertised.port or bound_port, cluster=cluster,
            advertised_endpoints={name: (host, port) for name, host, port in endpoints},
            credentials=credentials,
        )
        state.registry = build_registry()
        state.authorizer = await open_authorizer(config, cluster, log_dirs[0])
        state.quotas = await open_quotas(cluster, log_dirs[0], quota_window(config))
        def controller_state() -> tuple[bool, int]:
            if cluster is None:
                return True, 0
            elections = cluster.controller.elections if cluster.controller is not None else 0
            return state.controller_id == node_id, elections

        state.metrics = metrics = BrokerMetrics(
            [r.api_key for r in state.registry], replica_manager.partitions,
            replica_manager.get_partition, state.group_coordinator.groups,
            replica_manager=replica_manager, controller=controller_state,
            quotas=lambda: state.quotas,
            consumer_groups=state.group_coordinator.consumer_groups.groups)
        replica_manager.log_metrics = metrics.log
        replica_manager.replication_metrics = metrics.replication
        FetchSessionMetrics(metrics.registry, state.fetch_sessions)
        ReplicationQuotaMetrics(metrics.registry, replica_manager.replication_quotas,
                                self.clock.milliseconds)
        state.group_coordinator.metrics = metrics.groups
        state.transaction_coordinator.metrics = TransactionMetrics(
            metrics.registry, state.transaction_coordinator)
        state.client_metrics.exporter = ClientMetricsCollector(state.clock, metrics.registry)
        self._http.metrics = metrics
        if cluster is not None:
            def on_configs(image: ClusterImage) -> None:
                state.apply_broker_defaults()

            await cluster.attach(host=state.advertised_host, port=state.advertised_port,
                                 endpoints=tuple(endpoints),
                                 replica_manager=replica_manager, log_manager=log_manager,
                                 group_coordinator=state.group_coordinator,
                                 on_configs=on_configs, on_fenced=self.request_stop)
        await state.group_coordinator.startup()
        if cluster is not None:
            wire_transaction_cluster(state, cluster)
        await state.transaction_coordinator.startup()

        loop = asyncio.get_running_loop()
        limit = RequestQueueLimit(config.queued_max_requests)

        def acceptor(name: str) -> Callable[[], KafkaConnection]:
            def accept() -> KafkaConnection:
                connection = KafkaConnection(state, limit, self._connections.discard,
                                             securities[name])
                self._connections.add(connection)
                return connection
            return accept

        for name, sock in socks.items():
            server = await loop.create_server(acceptor(name), sock=sock, backlog=1024,
                                              ssl=securities[name].ssl_context)
            self._kafka_servers.append(server)
            if name != listener.name:
                logger.info("serving Kafka listener %s (%s) on port %d", name,
                            securities[name].protocol.value, bound_ports[name])
        self._kafka_server = self._kafka_servers[0]
        self.kafka_port = bound_port
        self.http_port = await self._http.start(listener.host, config.http_port)

        self._periodic.start(state)
        self.ready = True
        host = listener.host or "0.0.0.0"
        line = (
            f"Strata broker {node_id} (cluster {cluster_id}) serving Kafka on "
            f"{host}:{self.kafka_port} (advertised {state.advertised_host}:"
            f"{state.advertised_port}), HTTP on {host}:{self.http_port}"
        )
        logger.info("%s", line)
        print(line, flush=True)

    # ------------------------------------------------------------------ running
    async def serve(self) -> None:
        """Start, serve until SIGTERM/SIGINT, shut down."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            await self.start()
            await self._stopping.wait()
        finally:
            await self.shutdown()

    def _on_signal(self, sig: int) -> None:
        logger.info("received %s: shutting down", signal.Signals(sig).name)
        self._stopping.set()

    def request_stop(self) -> None:
        self._stopping.set()

    async def shutdown(self) -> None:
        if self._shut_down:
            return
        self._shut_down = True
        self._stopping.set()
        self.ready = False
        if self._cluster is not None and self.state is not None:
            await self._cluster.leave()  # leadership moves while this broker still serves
        for kafka_server in self._kafka_servers:
            kafka_server.close()
        if self.state is not None:  # parked JoinGroup/SyncGroup answered NOT_COORDINATOR
            await self.state.group_coordinator.shutdown()
            await self.state.transaction_coordinator.shutdown()
            await self.state.add_partitions_to_txn.close()
        connections = list(self._connections)
        if connections:
            _, pending = await asyncio.wait(
                [asyncio.ensure_future(c.stop()) for c in connections], timeout=SHUTDOWN_GRACE_S)
            for connection in list(self._connections):
                connection.abort()
            for task in pending:
                task.cancel()
        if self._log_manager is not None:
            for tp in self._log_manager.all_logs():  # a cleaning round in progress stops early
                self._log_manager.cleaner.abort_and_pause_cleaning(tp)
        await self._periodic.join()
        if self.state is not None and self.state.authorizer is not None:
            await self.state.authorizer.close()
        if self.state is not None and self.state.quotas is not None:
            await self.state.quotas.close()
        if self._cluster is not None:
            await self._cluster.close()
        if self._log_manager is not None:
            await asyncio.to_thread(self._log_manager.shutdown)
        await self._http.close()
        for kafka_server in self._kafka_servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(kafka_server.wait_closed(), 1.0)
        logger.info("shut down cleanly")


def _bind(host: str, port: int) -> socket.socket:
    """The Kafka listener's socket, bound (port 0: a free one) but not yet listening."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                               flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def quota_window(config: BrokerConfig) -> QuotaWindow:
    """``quota.window.num`` samples of ``quota.window.size.seconds`` (each at least 1)."""
    samples = config.get_int("quota.window.num")
    seconds = config.get_int("quota.window.size.seconds")
    for key, value in (("quota.window.num", samples), ("quota.window.size.seconds", seconds)):
        if value < 1:
            raise ConfigError(f"{key} must be at least 1, got {value}")
    return QuotaWindow(samples, seconds * 1000)


def _cluster_id_from_disk(log_dirs: list[Path]) -> str:
    for directory in log_dirs:
        meta = read_meta_properties(directory)
        if meta is not None:
            return meta.cluster_id
    return generate_directory_id()


async def _reconcile_logs(store: FileTopicStore, log_manager: LogManager) -> None:
    """Make the logs on disk and the registry agree (step 3 of startup)."""
    found: dict[str, int] = {}
    for topic, partition in log_manager.all_logs():
        found[topic] = max(found.get(topic, 0), partition + 1)
    if not store.existed:
        for topic, count in sorted(found.items()):
            logger.warning("adopting topic %s (%d partitions) found on disk without a registry",
                           topic, count)
            await store.create_topic(TopicRecord.new(topic, count, 1))
        return
    topics = store.topics()
    for topic, partition in sorted(log_manager.all_logs()):
        record = topics.get(topic)
        if record is None or partition >= record.partitions:
            logger.warning("deleting stray log %s-%d: not in the topic registry", topic, partition)
            await asyncio.to_thread(log_manager.delete_log, topic, partition)


# ---------------------------------------------------------------------- entry point


def run(config: BrokerConfig) -> int:
    """Run a broker until SIGTERM/SIGINT; the process exit code (0 after a clean shutdown)."""
    server = KafkaServer(config)
    tune_garbage_collector()
    try:
        uvloop.run(server.serve())
    except (ConfigError, TopicStoreError, StorageError, OSError, ValueError,
            MetadataStoreError) as exc:
        logger.error("broker failed: %s", exc)
        return 1
    return 0


def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def wire_transaction_cluster(state: BrokerState, cluster: Cluster) -> None:
    """The transaction coordinator in a cluster: partition leaders from the metadata, and the
    other brokers' inter-broker listener for WriteTxnMarkers."""
    listener = inter_broker_listener_name(state.config)

    def broker_address(node_id: int) -> tuple[str, int] | None:
        broker = cluster.image.brokers.get(node_id)
        return broker.endpoint(listener) if broker is not None else None

    runtime = state.transaction_coordinator
    runtime.leader_lookup = cluster.leader_of
    runtime.sender.leader_lookup = cluster.leader_of
    runtime.sender.broker_address = broker_address
    runtime.sender.security = inter_broker_client_security(state.config)
    state.add_partitions_to_txn.broker_address = broker_address
    state.add_partitions_to_txn.security = runtime.sender.security
