"""``BrokerLifecycle``: this broker's membership in the cluster — registration, epoch, leaving.

Kafka's ``BrokerLifecycleManager`` plus the leader's ``AlterPartition`` path. Owns:

* **leaving the ISRs on start** (``leave_isrs_on_restart``, before registering): a new
  incarnation is not in sync until it has caught up again (``partition_change``), so it takes
  itself out of every ISR it is not the last member of, each a compare-and-set;
* **registration**: ``/strata/brokers/<node.id>`` put with a lease of
  ``broker.session.timeout.ms`` (kept alive every TTL/3 by the store). The entry's version is
  the *broker epoch*. A restarted ``node.id`` registers at once over its old entry (a larger
  epoch), so the controller sees that the old incarnation is gone even before its lease would
  have expired. A lease that is lost (the store was unreachable past the TTL) is replaced by a
  new registration; meanwhile the broker epoch is 0 and ``on_lease_lost`` re-publishes the
  image, so this broker leads nothing until registered again (the controller is moving its
  leaderships: answering producers as a zombie leader, from a log and producer state that miss
  the new leader's writes, would fail them with OUT_OF_ORDER_SEQUENCE_NUMBER);
* **zombie fencing**: an image showing this ``node.id`` registered at a larger epoch than ours
  means another process took the id: this one stops serving (``on_fenced``);
* **ISR changes** proposed by this broker as a leader (``propose_isr``, the replica manager's
  ``isr_change_handler``): a compare-and-set of the partition's registration at the version
  this leader's state came from, adding only live brokers; accepted changes are adopted at
  once, refused ones aborted (the next image carries whatever won);
* **controlled shutdown**: before the broker exits, it marks itself shutting down (a leased
  key: no leadership is handed to it, nor to any other broker shutting down at the same time),
  then leadership of every partition it leads moves to another live ISR member (each a
  compare-and-set), until nothing is left to move or ``timeout_s`` passes; then the
  registration is revoked, which also ends a controllership held under the same lease, and
  the controller takes the broker out of the ISRs it was in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from strata.broker.cluster import image as ci
from strata.broker.cluster.image import BrokerRegistration
from strata.broker.cluster.metadata_cache import MetadataCache
from strata.broker.cluster.partition_change import controlled_shutdown, leave_isr_on_restart
from strata.broker.replication.partition import Partition
from strata.broker.replication.replica_manager import ReplicaManager
from strata.metadata.errors import MetadataStoreError
from strata.metadata.leases import Lease
from strata.metadata.store import MetadataStore

logger = logging.getLogger(__name__)


class BrokerLifecycle:
    def __init__(self, store: MetadataStore, cache: MetadataCache, registration: BrokerRegistration,
                 *, session_timeout_s: float, on_fenced: Callable[[], None]) -> None:
        self.store = store
        self.cache = cache
        self.registration = registration
        self.node_id = registration.node_id
        self.session_timeout_s = session_timeout_s
        self.epoch = 0
        self.lease: Lease | None = None
        self.replica_manager: ReplicaManager | None = None
        self._on_fenced = on_fenced
        # Called when the registration lease is lost (the cluster re-publishes its image at
        # broker epoch 0: every partition this broker led becomes leaderless here).
        self.on_lease_lost: Callable[[], Awaitable[None]] | None = None
        self._registering = False
        self._watch_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopped = False

    @property
    def stopped(self) -> bool:
        return self._stopped

    def lease_id(self) -> int | None:
        lease = self.lease
        return None if lease is None or lease.lost else lease.id

    # ------------------------------------------------------------ starting
    async def leave_isrs_on_restart(self, attempts: int = 5) -> int:
        """Take this ``node.id`` out of every ISR it is not the last member of (and out of
        leadership there); a compare-and-set per partition, re-read and retried on a
        concurrent change. Returns how many partitions changed."""
        changed = 0
        for tp, registration in self.cache.image.partitions.items():
            version = self.cache.image.partition_versions.get(tp, 0)
            key = ci.partition_key(*tp)
            for _ in range(attempts):
                new = leave_isr_on_restart(registration, self.node_id)
                if new is None:
                    break
                if await self.store.compare_and_set(key, new.encode(),
                                                    version=version) is not None:
                    changed += 1
                    break
                entry = await self.store.get(key)
                if entry is None:  # the topic was deleted meanwhile
                    break
                registration = ci.PartitionRegistration.decode(entry.value)
                version = entry.version
            else:
                raise MetadataStoreError(f"{tp[0]}-{tp[1]}: the partition kept changing while "
                                         f"broker {self.node_id} left its ISR")
        if changed:
            logger.info("broker %d left the ISR of %d partition(s) until it catches up again",
                        self.node_id, changed)
        return changed

    # ------------------------------------------------------------ registration
    async def register(self) -> int:
        self._registering = True
        try:
            lease = await self.store.grant_lease(self.session_timeout_s)
            self.epoch = await self.store.put(ci.broker_key(self.node_id),
                                              self.registration.encode(), lease=lease.id)
            self.lease = lease
        finally:
            self._registering = False
        logger.info("broker %d registered (broker epoch %d)", self.node_id, self.epoch)
        if self._watch_task is None:
            self._watch_task = asyncio.get_running_loop().create_task(
                self._keep_registered(), name="strata-broker-registration")
        return self.epoch

    async def _keep_registered(self) -> None:
        while not self._stopped:
            lease = self.lease
            if lease is None:
                return
            await lease.wait_lost()
            if self.stopped:
                return
            # The store dropped our registration: the controller moves our leaderships away,
            # so until we are registered again this broker leads nothing (a zombie leader
            # would answer producers from a stale log and producer state).
            logger.warning("broker %d lost its registration lease; leading nothing until it "
                           "is registered again", self.node_id)
            self.epoch = 0
            if self.on_lease_lost is not None:
                await self.on_lease_lost()
            while not self._stopped:
                try:
                    await self.register()
                    break
                except (MetadataStoreError, OSError) as exc:
                    logger.warning("registration failed (%s); retrying", exc)
                    await asyncio.sleep(0.5)

    async def on_image(self, image: ci.ClusterImage) -> None:
        registered = image.brokers.get(self.node_id)
        if (registered is not None and not self._registering and self.epoch
                and registered.epoch > self.epoch and not self._stopped):
            logger.error("node.id %d was registered by another process (broker epoch %d > %d):"
                         " this broker is fenced and stops", self.node_id, registered.epoch,
                         self.epoch)
            self._stopped = True
            self._on_fenced()

    # ------------------------------------------------------------ ISR changes
    def propose_isr(self, partition: Partition, isr: frozenset[int]) -> None:
        task = asyncio.get_running_loop().create_task(self._alter_isr(partition, isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alter_isr(self, partition: Partition, isr: frozenset[int]) -> None:
        tp = (partition.topic, partition.partition)
        try:
            image = self.cache.image
            registration = image.partitions.get(tp)
            version = image.partition_versions.get(tp, 0)
            if (registration is None or registration.leader != self.node_id
                    or registration.leader_epoch != partition.leader_epoch
                    or registration.partition_epoch != partition.partition_epoch):
                partition.abort_isr_change()
                return
            live = image.brokers
            ordered = tuple(r for r in registration.replicas
                            if r in isr and (r in live or r == self.node_id))
            if set(ordered) == set(registration.isr):
                partition.abort_isr_change()
                return
            new = registration.with_changes(isr=ordered)
            written = await self.store.compare_and_set(ci.partition_key(*tp), new.encode(),
                                                       version=version)
        except (MetadataStoreError, OSError) as exc:
            logger.warning("ISR change of %s-%d failed: %s", tp[0], tp[1], exc)
            partition.abort_isr_change()
            return
        if written is None:
            partition.abort_isr_change()
            return
        logger.info("%s-%d: ISR %s -> %s", tp[0], tp[1], list(registration.isr), list(ordered))
        if self.replica_manager is not None:
            self.replica_manager.apply_isr_change(partition, frozenset(ordered),
                                                  new.partition_epoch)

    # ------------------------------------------------------------ leaving
    async def controlled_shutdown(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        lease = self.lease_id()
        if lease is None:
            return
        try:  # from now on nobody hands leadership to this broker
            revision = await self.store.put(ci.shutting_down_key(self.node_id), b"{}",
                                            lease=lease)
        except (MetadataStoreError, OSError) as exc:
            logger.warning("controlled shutdown: %s", exc)
            return
        await self.cache.wait_for_revision(revision, timeout_s)
        while loop.time() < deadline:
            image = self.cache.image
            changes = []
            for tp, registration in image.partitions.items():
                new = controlled_shutdown(registration, self.node_id, image.electable())
                if new is not None:
                    changes.append((tp, image.partition_versions[tp], new))
            if not changes:
                return
            revision = 0
            for (topic, index), version, new in changes:
                try:
                    written = await self.store.compare_and_set(
                        ci.partition_key(topic, index), new.encode(), version=version)
                except (MetadataStoreError, OSError) as exc:
                    logger.warning("controlled shutdown: %s", exc)
                    return
                if written is not None:
                    revision = max(revision, written)
            if revision:
                await self.cache.wait_for_revision(revision, max(deadline - loop.time(), 0.1))
            else:
                await asyncio.sleep(0.05)
        logger.warning("controlled shutdown did not move every leadership within %.0f s",
                       timeout_s)

    async def deregister(self) -> None:
        self._stopped = True
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch_task
        for task in list(self._tasks):
            task.cancel()
        lease = self.lease
        if lease is not None:
            with contextlib.suppress(MetadataStoreError, OSError):
                await self.store.revoke_lease(lease.id)
