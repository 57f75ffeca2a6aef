"""``Cluster``: one broker's part in a multi-broker cluster, built when ``metadata.store`` is set.

Owns, and starts and stops in order, the pieces that connect a broker to the others:

* the ``MetadataStore`` (``strata.metadata``, chosen by the URL) and the ``MetadataCache``
  following it (``ClusterImage``);
* the cluster id, kept in the store (``/strata/cluster_id``: the first broker writes it);
* ``ClusterTopicStore`` (the broker's ``TopicStore``), ``BrokerLifecycle`` (registration,
  broker epoch, ISR changes, controlled shutdown), ``Controller`` (candidate; active on one
  broker), ``MetadataPublisher`` (partition roles) and the ``ReplicaFetcherManager``.

Start order (``KafkaServer.start`` drives it): ``open`` (store, cache loaded, cluster id) →
the log manager loads → ``attach`` (replica manager known: stray logs removed, the ISRs of the
previous incarnation left (``BrokerLifecycle.leave_isrs_on_restart``), registration,
first publish, then the watch and the controller run) → serving. Shutdown: ``leave`` (controlled
shutdown while still serving) → the server closes its listener and connections → ``close``
(fetchers, controller, registration revoked, watch, store).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from strata.broker.cluster.broker_lifecycle import BrokerLifecycle
from strata.broker.cluster.controller import Controller
from strata.broker.cluster.image import ROOT, BrokerRegistration, ClusterImage
from strata.broker.cluster.metadata_cache import MetadataCache
from strata.broker.cluster.metadata_publisher import MetadataPublisher
from strata.broker.cluster.topic_store import ClusterTopicStore
from strata.broker.config import BrokerConfig
from strata.broker.group.coordinator import GroupCoordinator
from strata.broker.network.listeners import inter_broker_client_security, inter_broker_listener_name
from strata.broker.replication.replica_fetcher import FetcherConfig, ReplicaFetcherManager
from strata.broker.replication.replica_manager import ReplicaManager
from strata.metadata.factory import open_store
from strata.metadata.store import MetadataStore
from strata.metadata.store_tls import StoreTls
from strata.storage.log_manager import LogManager

logger = logging.getLogger(__name__)

CLUSTER_ID_KEY = ROOT + "cluster_id"
CONTROLLED_SHUTDOWN_TIMEOUT_S = 15.0


def fetcher_config(config: BrokerConfig) -> FetcherConfig:
    return FetcherConfig(
        wait_max_ms=config.get_int("replica.fetch.wait.max.ms"),
        min_bytes=config.get_int("replica.fetch.min.bytes"),
        max_bytes=config.get_int("replica.fetch.response.max.bytes"),
        partition_max_bytes=config.get_int("replica.fetch.max.bytes"),
        backoff_ms=config.get_int("replica.fetch.backoff.ms"),
        socket_timeout_ms=config.get_int("replica.socket.timeout.ms"),
    )


class Cluster:
    def __init__(self, config: BrokerConfig, store: MetadataStore, cache: MetadataCache,
                 cluster_id: str) -> None:
        self.config = config
        self.node_id = config.node_id
        self.store = store
        self.cache = cache
        self.cluster_id = cluster_id
        self.topic_store = ClusterTopicStore(store, cache)
        self.lifecycle: BrokerLifecycle | None = None
        self.controller: Controller | None = None
        self.publisher: MetadataPublisher | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self._watch: asyncio.Task[None] | None = None

    @property
    def image(self) -> ClusterImage:
        return self.cache.image

    @classmethod
    async def open(cls, config: BrokerConfig, default_cluster_id: Callable[[], str]) -> Cluster:
        url = config.get("metadata.store")
        assert url
        store = open_store(url, tls=StoreTls(
            cafile=config.get("metadata.store.ssl.cafile"),
            certfile=config.get("metadata.store.ssl.certfile"),
            keyfile=config.get("metadata.store.ssl.keyfile"),
        ))
        try:
            entry = await store.get(CLUSTER_ID_KEY)
            if entry is None:
                wanted = config.cluster_id or default_cluster_id()
                await store.compare_and_set(CLUSTER_ID_KEY, wanted.encode(), version=0)
                entry = await store.get(CLUSTER_ID_KEY)
            assert entry is not None
            cluster_id = entry.value.decode()
            if config.cluster_id and config.cluster_id != cluster_id:
                raise ValueError(f"cluster.id {config.cluster_id} is not the id of the cluster "
                                 f"in {url}: {cluster_id}")
            cache = MetadataCache(store)
            await cache.load()
        except BaseException:
            await store.close()
            raise
        return cls(config, store, cache, cluster_id)

    def unclean(self, topic: str) -> bool:
        registration = self.image.topics.get(topic)
        value = registration.configs.get("unclean.leader.election.enable") if registration \
            else None
        if value is None:
            value = self.config.get("unclean.leader.election.enable") or "false"
        return value.strip().lower() == "true"

    def leader_of(self, topic: str, index: int) -> int | None:
        """The live leader of a partition as the metadata has it (None: none)."""
        image = self.image
        registration = image.partitions.get((topic, index))
        if registration is None or registration.leader not in image.brokers:
            return None
        return registration.leader

    def partition_racks(self, topic: str, index: int) -> frozenset[str]:
        """The racks of a partition's live replicas (rack-aware group assignment)."""
        image = self.image
        registration = image.partitions.get((topic, index))
        if registration is None:
            return frozenset()
        brokers = (image.brokers.get(r) for r in registration.replicas)
        return frozenset(b.rack for b in brokers if b is not None and b.rack)

    async def attach(self, *, host: str, port: int,
                     endpoints: tuple[tuple[str, str, int], ...] = (),
                     replica_manager: ReplicaManager,
                     log_manager: LogManager, group_coordinator: GroupCoordinator,
                     on_configs: Callable[[ClusterImage], None],
                     on_fenced: Callable[[], None]) -> None:
        config = self.config
        rack = config.get("broker.rack") or None
        self.lifecycle = lifecycle = BrokerLifecycle(
            self.store, self.cache,
            BrokerRegistration(self.node_id, host, port, rack, endpoints=endpoints),
            session_timeout_s=config.get_int("broker.session.timeout.ms") / 1000,
            on_fenced=on_fenced)
        self.fetchers = ReplicaFetcherManager(replica_manager, fetcher_config(config),
                                              security=inter_broker_client_security(config))
        self.publisher = publisher = MetadataPublisher(
            self.node_id, replica_manager, self.fetchers, log_manager, group_coordinator,
            broker_epoch=lambda: lifecycle.epoch, on_configs=on_configs,
            listener=inter_broker_listener_name(config))
        lifecycle.on_lease_lost = lambda: publisher.publish(self.cache.image)
        await asyncio.to_thread(publisher.remove_stray_logs, self.image)
        replica_manager.isr_change_handler = lifecycle.propose_isr
        group_coordinator.leader_lookup = self.leader_of
        group_coordinator.consumer_groups.partition_racks = self.partition_racks
        replica_manager.partition_exists = lambda tp: tp in self.cache.image.partitions
        # DeleteRecords' low watermark counts followers on registered brokers (Kafka: alive).
        replica_manager.broker_alive = lambda broker_id: broker_id in self.cache.image.brokers
        lifecycle.replica_manager = replica_manager
        await lifecycle.leave_isrs_on_restart()
        await self.cache.load()
        await lifecycle.register()
        await publisher.publish(self.image)
        rebalance = config.get_bool("auto.leader.rebalance.enable")
        self.controller = controller = Controller(
            self.store, self.node_id, lease_id=lifecycle.lease_id, unclean=self.unclean,
            rebalance_interval_s=(config.get_int("leader.imbalance.check.interval.seconds")
                                  if rebalance else None))
        self.cache.add_listener(lifecycle.on_image)
        self.cache.add_listener(publisher.publish)
        self.cache.add_listener(controller.on_image)
        self._watch = asyncio.get_running_loop().create_task(self.cache.run(),
                                                             name="strata-metadata-cache")
        controller.start(self.image)

    async def leave(self) -> None:
        """Controlled shutdown: move leadership away while this broker still serves."""
        if (self.lifecycle is not None and not self.lifecycle.stopped
                and self.config.get_bool("controlled.shutdown.enable")):
            await self.lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S)

    async def close(self) -> None:
        if self.fetchers is not None:
            await self.fetchers.shutdown()
        if self.controller is not None:
            await self.controller.stop()
        if self.lifecycle is not None:
            await self.lifecycle.deregister()
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        await self.store.close()
