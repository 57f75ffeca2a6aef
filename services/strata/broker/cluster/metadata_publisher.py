"""``MetadataPublisher``: makes this broker's partitions match the cluster image.

Kafka's ``BrokerMetadataPublisher`` / ``ReplicaManager.applyDelta``. On every published image,
for each partition:

* this broker is not a replica (the topic was deleted, or a reassignment moved the partition
  away): stop hosting it, stop fetching it, delete its log;
* the image names this broker leader *at its current broker epoch*: ``make_leader`` at the
  image's leader epoch with its replicas and ISR (or, at an unchanged leader epoch and replica
  set, adopt the new ISR: the leader's own ISR change coming back, or the controller fencing a
  dead follower); stop fetching it;
* otherwise: ``make_follower`` of the image's leader (leaderless while the partition is
  offline, or while the image still names a previous incarnation of this broker, until the
  controller elects anew) and fetch it from that leader (truncating first, KIP-101).

Also: each partition directory carries ``partition.metadata`` (Kafka's file: ``version: 0`` and
the topic id); a local log whose topic id differs from the image's belongs to a deleted
topic that was recreated while this broker was away and is deleted, never served. Logs on disk
for partitions this broker does not replicate are deleted on the first publish. Topic and
broker configs of the image are pushed to the logs. ``__consumer_offsets`` partitions tell the
group coordinator when this broker starts or stops leading them, and a topic that left the
image makes every group forget its committed offsets (Kafka's ``onPartitionsDeleted``).

The work per image follows the change (Kafka's ``applyDelta``): when the image was built from
the one this publisher applied last (``ClusterImage.changed_partitions``) and the brokers and
this broker's epoch are the same, only the changed partitions are looked at — plus those that
failed to be applied, which are retried on every image until they succeed. Otherwise (the
first image, a listing after compacted history, a broker registered or gone, a new broker epoch,
a publish that raised) every partition is compared with what this broker hosts — with the same
brokers and epoch, skipping those whose registration object was applied already.

Runs on the event loop inside the ``MetadataCache`` listener: quick, no store writes. The
blocking file work goes to worker threads: deleting logs, and creating the logs of partitions
new to this broker before they are hosted (``_create_logs``). One publish at a time (a lock:
the lease-loss re-publish may race the listener).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Final

from strata.broker.cluster.image import ClusterImage, PartitionRegistration
from strata.broker.group.coordinator import GroupCoordinator
from strata.broker.group.metadata_manager import OFFSETS_TOPIC
from strata.broker.replication.partition import PartitionError
from strata.broker.replication.replica_fetcher import LeaderEndpoint, ReplicaFetcherManager
from strata.broker.replication.replica_manager import ReplicaManager
from strata.storage.errors import StorageError
from strata.storage.log_manager import LogManager

logger = logging.getLogger(__name__)

PARTITION_METADATA_FILE: Final = "partition.metadata"

TopicPartition = tuple[str, int]


def read_partition_topic_id(log_dir: Path) -> uuid.UUID | None:
    """The topic id in ``log_dir/partition.metadata`` (None when absent or unreadable)."""
    try:
        text = (log_dir / PARTITION_METADATA_FILE).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            try:
                raw = base64.urlsafe_b64decode(value.strip() + "==")
                return uuid.UUID(bytes=raw)
            except ValueError:
                return None
    return None


def write_partition_topic_id(log_dir: Path, topic_id: uuid.UUID) -> None:
    encoded = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    (log_dir / PARTITION_METADATA_FILE).write_text(f"version: 0\ntopic_id: {encoded}\n")


class MetadataPublisher:
    def __init__(self, node_id: int, replica_manager: ReplicaManager,
                 fetchers: ReplicaFetcherManager, log_manager: LogManager,
                 group_coordinator: GroupCoordinator, *,
                 broker_epoch: Callable[[], int],
                 on_configs: Callable[[ClusterImage], None],
                 listener: str | None = None) -> None:
        self.node_id = node_id
        self.listener = listener  # the inter-broker listener name: followers fetch from it
        self.replica_manager = replica_manager
        self.fetchers = fetchers
        self.log_manager = log_manager
        self.group_coordinator = group_coordinator
        self._broker_epoch = broker_epoch
        self._on_configs = on_configs
        self._applied: dict[TopicPartition, tuple[PartitionRegistration, LeaderEndpoint | None,
                                                  bool]] = {}
        self._failed: dict[TopicPartition, tuple[PartitionRegistration, LeaderEndpoint | None,
                                                 bool]] = {}
        self._configs_revision: object = None
        self._topics: dict[str, int] = {}
        self._publishing = asyncio.Lock()
        self._seen_partitions: object = None  # the last image's mappings (identity only)
        self._seen_brokers: object = None
        self._seen_topics: object = None
        self._published_revision: int | None = None  # of the image applied last, in full
        self._seen_epoch = -1
        self._marked: dict[str, uuid.UUID] = {}  # log dir -> topic id its file is known to say

    def remove_stray_logs(self, image: ClusterImage) -> None:
        """Before hosting anything: delete logs of partitions this broker does not replicate,
        and of topics recreated under another id (blocking file work: call it in a thread)."""
        for (topic, index), log in list(self.log_manager.all_logs().items()):
            registration = image.partitions.get((topic, index))
            if registration is None or self.node_id not in registration.replicas:
                logger.warning("deleting %s-%d: not a replica here in the cluster metadata",
                               topic, index)
                self.log_manager.delete_log(topic, index)
                continue
            on_disk = read_partition_topic_id(Path(log.dir))
            if on_disk is not None and on_disk != registration.topic_id:
                logger.warning("deleting %s-%d: its topic id %s is not the topic's %s (deleted "
                               "and recreated while this broker was away)", topic, index,
                               on_disk, registration.topic_id)
                self.log_manager.delete_log(topic, index)

    async def publish(self, image: ClusterImage) -> None:
        """Make the hosted partitions match ``image`` (one publish at a time: the cache's
        listener and the lifecycle's resignation on a lost lease may both call it)."""
        async with self._publishing:
            await self._publish(image)

    async def _publish(self, image: ClusterImage) -> None:
        configs_key = (id(image.topics), id(image.broker_configs))
        if configs_key != self._configs_revision:
            self._configs_revision = configs_key
            self._on_configs(image)
        epoch = self._broker_epoch()
        # The image reuses unchanged registrations and mappings (``ImageBuilder``): with the
        # same brokers and broker epoch, a partition whose registration object was applied is
        # done — and when the image was built from the one applied last, it names the
        # partitions that are not (``changed_partitions``).
        same_brokers = image.brokers is self._seen_brokers and epoch == self._seen_epoch
        delta = image.delta_since(self._published_revision) if same_brokers else None
        self._published_revision = None  # until this image is applied in full
        self._follow_topics(image, delta)
        if delta is None:
            await self._publish_all(image, epoch, same_brokers)
        else:
            await self._publish_delta(image, epoch, delta)
        self._seen_partitions, self._seen_brokers, self._seen_epoch = (
            image.partitions, image.brokers, epoch)
        self._published_revision = image.revision

    async def _publish_all(self, image: ClusterImage, epoch: int, same_brokers: bool) -> None:
        """Every partition of ``image`` compared with what this broker hosts."""
        node_id = self.node_id
        wanted = {tp: p for tp, p in image.partitions.items() if node_id in p.replicas}
        if image.partitions is not self._seen_partitions:
            for tp in [tp for tp in self._hosted() if tp not in wanted]:
                await self._stop_hosting_and_delete(tp)
        applied_before = self._applied
        await self._create_missing_logs(wanted, image)
        for tp, registration in wanted.items():
            if same_brokers and tp not in self._failed:
                done = applied_before.get(tp)
                if done is not None and done[0] is registration:
                    continue
            self._apply_registration(tp, registration, image, epoch)

    async def _publish_delta(self, image: ClusterImage, epoch: int,
                             changed: frozenset[TopicPartition]) -> None:
        """Only the partitions that changed since the image applied last (the brokers and this
        broker's epoch the same): every other one is as that image had it and was applied —
        but for those that failed, which are retried on every image."""
        node_id = self.node_id
        partitions = image.partitions
        wanted: dict[TopicPartition, PartitionRegistration] = {}
        for tp in changed.union(self._failed):
            registration = partitions.get(tp)
            if registration is not None and node_id in registration.replicas:
                wanted[tp] = registration
        for tp in changed:
            if tp not in wanted and self.replica_manager.get_partition(*tp) is not None:
                await self._stop_hosting_and_delete(tp)
        await self._create_missing_logs(wanted, image)
        for tp, registration in wanted.items():
            self._apply_registration(tp, registration, image, epoch)

    def _follow_topics(self, image: ClusterImage,
                       changed: frozenset[TopicPartition] | None) -> None:
        """Keep ``_topics`` (each topic's partition count) current; a topic that left the
        image makes every coordinator forget its partitions' committed offsets."""
        if changed is None:
            gone = [(name, count) for name, count in self._topics.items()
                    if name not in image.topics]
            self._topics = {name: image.partition_count(name) for name in image.topics}
        else:
            gone = []
            if image.topics is not self._seen_topics:
                gone = [(name, count) for name, count in self._topics.items()
                        if name not in image.topics]
                for name, _ in gone:
                    del self._topics[name]
                for name in image.topics.keys() - self._topics.keys():
                    self._topics[name] = image.partition_count(name)
            self._count_partitions(image, changed)
        self._seen_topics = image.topics
        if gone:
            self.group_coordinator.on_partitions_deleted(
                [(name, i) for name, count in gone for i in range(count)])

    def _count_partitions(self, image: ClusterImage,
                          changed: frozenset[TopicPartition]) -> None:
        """The partition counts (``partition_count``: indexes 0..n-1 all present) of the
        topics with changed partitions, from the previous counts: a partition gone below the
        count cuts it there, and it grows over the partitions present from there."""
        counts: dict[str, int] = {}
        for topic, index in changed:
            count = counts.get(topic, self._topics.get(topic))
            if count is None:
                continue
            if (topic, index) not in image.partitions:
                count = min(count, index)
            counts[topic] = count
        for topic, count in counts.items():
            while (topic, count) in image.partitions:
                count += 1
            self._topics[topic] = count

    async def _stop_hosting_and_delete(self, tp: TopicPartition) -> None:
        self._stop_hosting(tp)
        # The files go in a thread: a large log's rmtree must not stall the loop.
        await asyncio.to_thread(self.log_manager.delete_log, *tp)

    async def _create_missing_logs(self, wanted: dict[TopicPartition, PartitionRegistration],
                                   image: ClusterImage) -> None:
        missing = [tp for tp in wanted if self.replica_manager.get_partition(*tp) is None
                   and self.log_manager.get_log(*tp) is None]
        if missing:  # a new topic's logs: file work of a few ms each, off the loop
            await asyncio.to_thread(self._create_logs, missing, image)

    def _apply_registration(self, tp: TopicPartition, registration: PartitionRegistration,
                            image: ClusterImage, epoch: int) -> None:
        """Host ``tp`` as ``registration`` says (nothing when that was applied already); a
        failure is remembered in ``_failed`` (retried on every image, logged once per
        registration)."""
        node_id = self.node_id
        leads = registration.leader == node_id and registration.leader_broker_epoch == epoch
        leader = None
        if not leads and registration.has_leader and registration.leader != node_id:
            broker = image.brokers.get(registration.leader)
            endpoint = (None if broker is None else broker.endpoint(self.listener)
                        if self.listener else (broker.host, broker.port))
            if broker is not None and endpoint is not None:
                leader = LeaderEndpoint(broker.node_id, *endpoint)
        applied = (registration, leader, leads)
        if self._applied.get(tp) == applied:
            return
        try:
            self._apply(tp, registration, leader, leads, image)
        except (StorageError, PartitionError) as exc:
            # Retried on every image (an EMFILE passes), logged once per registration.
            if self._failed.get(tp) != applied:
                self._failed[tp] = applied
                logger.error("cannot host %s-%d: %s", tp[0], tp[1], exc)
            return
        self._failed.pop(tp, None)
        self._applied[tp] = applied

    def _create_logs(self, missing: list[TopicPartition], image: ClusterImage) -> None:
        """Create the logs of partitions this broker is to host and has no log for (blocking:
        a worker thread), and write their ``partition.metadata``. Measured: ~5 ms of file work
        per partition, so a new 3,000-partition topic held the event loop — every client and
        replica of this broker — for seconds (acks=all produce to another topic meanwhile: p50
        18 s). One that fails here is left to ``_apply``, which retries it on the loop and
        reports it."""
        for topic, index in missing:
            try:
                log = self.log_manager.get_or_create_log(topic, index,
                                                         image.topics[topic].configs)
            except StorageError:
                continue
            self._mark(log.dir, image.partitions[(topic, index)])  # partition.metadata too

    def _hosted(self) -> list[TopicPartition]:
        return [(p.topic, p.partition) for p in self.replica_manager.partitions()]

    def _apply(self, tp: TopicPartition, reg: PartitionRegistration,
               leader: LeaderEndpoint | None, leads: bool, image: ClusterImage) -> None:
        topic, index = tp
        configs = image.topics[topic].configs
        hosted = self.replica_manager.get_partition(topic, index)
        if hosted is not None and hosted.topic_id != reg.topic_id:
            self._stop_hosting(tp)
            self.log_manager.delete_log(topic, index)  # rare: a recreated topic
            hosted = None
        isr = frozenset(reg.isr)
        if leads:
            self.fetchers.remove_partitions([tp])
            if (hosted is not None and hosted.is_leader
                    and hosted.leader_epoch == reg.leader_epoch
                    and hosted.replicas == reg.replicas):
                if hosted.partition_epoch < reg.partition_epoch:
                    self.replica_manager.apply_isr_change(hosted, isr, reg.partition_epoch)
            else:
                hosted = self.replica_manager.make_leader(
                    topic, index, reg.topic_id, reg.leader_epoch, configs=configs,
                    replicas=reg.replicas, isr=isr, partition_epoch=reg.partition_epoch)
                logger.info("leading %s-%d at leader epoch %d (isr %s)", topic, index,
                            reg.leader_epoch, sorted(isr))
            self._mark(hosted.log.dir, reg)
            if topic == OFFSETS_TOPIC:
                self.group_coordinator.on_election(index)
            return
        was_leader = hosted is not None and hosted.is_leader
        # Leaderless while the image names no leader, or names this node.id under another
        # broker epoch (a previous incarnation): never lead without the controller's word.
        leader_id = reg.leader if reg.has_leader and reg.leader != self.node_id else None
        hosted = self.replica_manager.make_follower(
            topic, index, reg.topic_id, leader_id,
            reg.leader_epoch, replicas=reg.replicas, isr=isr,
            partition_epoch=reg.partition_epoch, configs=configs)
        self._mark(hosted.log.dir, reg)
        if was_leader and topic == OFFSETS_TOPIC:
            self.group_coordinator.on_resignation(index)
        if leader is not None:
            self.fetchers.add_partitions({tp: (leader, reg.leader_epoch)})
        else:
            self.fetchers.remove_partitions([tp])

    def _mark(self, log_dir: Path | str, reg: PartitionRegistration) -> None:
        """``partition.metadata`` names the topic id (read once per log dir, not per ISR
        change)."""
        key = str(log_dir)
        if self._marked.get(key) == reg.topic_id:
            return
        path = Path(log_dir)
        if read_partition_topic_id(path) != reg.topic_id:
            try:
                write_partition_topic_id(path, reg.topic_id)
            except OSError as exc:
                logger.warning("cannot write %s in %s: %s", PARTITION_METADATA_FILE, path, exc)
                return
        self._marked[key] = reg.topic_id

    def _stop_hosting(self, tp: TopicPartition) -> None:
        topic, index = tp
        self.fetchers.remove_partitions([tp])
        hosted = self.replica_manager.get_partition(topic, index)
        if hosted is not None and hosted.is_leader and topic == OFFSETS_TOPIC:
            self.group_coordinator.on_resignation(index)
        if hosted is not None:
            self._marked.pop(str(hosted.log.dir), None)
        self.replica_manager.remove_partition(topic, index)
        self._applied.pop(tp, None)
        logger.info("stopped hosting %s-%d (its log is deleted)", topic, index)
