"""``Controller``: the one broker at a time that elects leaders and completes reassignments.

Every broker runs one; at most one is *active*. Election (Patroni's leader key, fenced by
KAFKA-6082's epoch rule): when the image shows no controller, a broker runs the transaction

    compares [/controller absent, /controller_epoch at the version it saw]
    ops      [put /controller {node_id, epoch+1} with its registration lease,
              put /controller_epoch epoch+1]

and the winner is active from then on, until its lease ends (it dies or stalls past
``broker.session.timeout.ms``) or it shuts down (it deletes the key first). Every write of the
active controller carries ``Compare(/controller_epoch, the version it won with)``: a deposed
controller's writes fail (``conflicts`` names the epoch key) and it steps down.

What the active controller does, in its own task (never inside the metadata listener, which
must stay quick): after every image change, ``partition_change.reconcile_partition`` on the
partitions — failover elections for dead or restarted leaders, ISR fencing of dead replicas,
offline partitions brought back, reassignments completed — each new registration written with
a compare on the partition's version (a leader's concurrent ISR change wins, and the partitions
of that transaction are reconciled again on the next image). Every
``leader.imbalance.check.interval.seconds`` with ``auto.leader.rebalance.enable``, the same
with ``preferred=True``.

Which partitions: ``reconcile_partition`` depends on nothing but the registration, the brokers,
``shutting_down``, ``unclean`` (topic and broker configs) and ``preferred``. So when the last
reconcile completed, at an image with the same brokers, topics, broker configs and
shutting_down, and without ``preferred``, only the partitions changed since
(``ClusterImage.changed_partitions``, accumulated over the images the task did not get to) and
those of transactions that lost a race are reconciled; every other one gave no change then and
gives none now. Anything else — becoming active, a broker registered or gone, a reconcile that
raised or was fenced, an image whose delta is unknown — reconciles every partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from strata.broker.cluster import image as ci
from strata.broker.cluster.image import ClusterImage, ControllerRegistration, PartitionRegistration
from strata.broker.cluster.partition_change import reconcile_partition
from strata.metadata.errors import MetadataStoreError
from strata.metadata.store import Compare, Delete, MetadataStore, Put

logger = logging.getLogger(__name__)

MAX_OPS_PER_TXN = 64  # etcd's default --max-txn-ops is 128


class Controller:
    def __init__(self, store: MetadataStore, node_id: int, *,
                 lease_id: Callable[[], int | None],
                 unclean: Callable[[str], bool],
                 rebalance_interval_s: float | None,
                 on_election: Callable[[], None] | None = None) -> None:
        self.store = store
        self.node_id = node_id
        self._lease_id = lease_id
        self._unclean = unclean
        self._rebalance_interval_s = rebalance_interval_s
        self._on_election = on_election or (lambda: None)
        self.active = False
        self.epoch = 0
        self._epoch_version = 0
        self.elections = 0  # leader changes written (a metric)
        self._image = ClusterImage()
        # Partitions changed since the image the task took last (None: unknown, reconcile all).
        self._dirty: set[ci.TopicPartition] | None = None
        self._reconciled: ClusterImage | None = None  # the image of the last complete reconcile
        self._retry: set[ci.TopicPartition] = set()  # in transactions that lost a race
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._rebalance_task: asyncio.Task[None] | None = None
        self._preferred_due = False

    # ------------------------------------------------------------------ lifecycle
    def start(self, image: ClusterImage) -> None:
        self._image, self._dirty = image, None
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name="strata-controller")
        if self._rebalance_interval_s:
            self._rebalance_task = loop.create_task(self._rebalance_timer(),
                                                    name="strata-leader-rebalance")
        self._changed.set()

    async def on_image(self, image: ClusterImage) -> None:
        """The metadata listener: remember the image (and what changed), wake the task."""
        if self._dirty is not None:
            changed = image.delta_since(self._image.revision)
            if changed is None:
                self._dirty = None
            else:
                self._dirty |= changed
        self._image = image
        self._changed.set()

    async def stop(self, *, resign: bool = True) -> None:
        for task in (self._task, self._rebalance_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._rebalance_task = None
        if resign and self.active:
            self.active = False
            with contextlib.suppress(MetadataStoreError, OSError):
                await self.store.transaction(
                    [Compare(ci.CONTROLLER_EPOCH, self._epoch_version)],
                    [Delete(ci.CONTROLLER)])

    # ------------------------------------------------------------------ the task
    async def _run(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                await self._step()
            except (MetadataStoreError, OSError) as exc:
                logger.warning("controller step failed (%s); retrying", exc)
                await asyncio.sleep(0.2)
                self._changed.set()
            except Exception:
                logger.exception("controller step failed")
                await asyncio.sleep(0.2)
                self._changed.set()

    async def _step(self) -> None:
        """One wake-up: the latest image, and what changed since the one taken last."""
        image, dirty = self._image, self._dirty
        self._dirty = set()
        # Until this step completes a reconcile, the next one reconciles every partition.
        base, self._reconciled = self._reconciled, None
        was_active = self.active
        if image.controller is None:
            await self._try_election(image)
        elif image.controller.node_id != self.node_id or \
                image.controller.epoch != self.epoch:
            if self.active:
                logger.info("controller %d (epoch %d) is no longer active",
                            self.node_id, self.epoch)
            self.active = False
        if self.active:
            preferred, self._preferred_due = self._preferred_due, False
            candidates = None
            if was_active and not preferred and dirty is not None and base is not None \
                    and _same_context(base, image):
                candidates = dirty | self._retry
            await self._reconcile(image, candidates, preferred=preferred)

    async def _try_election(self, image: ClusterImage) -> None:
        lease = self._lease_id()
        if lease is None or self.node_id not in image.brokers:
            return
        epoch = image.controller_epoch + 1
        result = await self.store.transaction(
            [Compare(ci.CONTROLLER, 0), Compare(ci.CONTROLLER_EPOCH,
                                                image.controller_epoch_version)],
            [Put(ci.CONTROLLER, ControllerRegistration(self.node_id, epoch).encode(), lease),
             Put(ci.CONTROLLER_EPOCH, ci.encode_epoch(epoch))])
        if result.succeeded:
            self.active = True
            self.epoch = epoch
            self._epoch_version = result.revision
            logger.info("broker %d is the active controller (epoch %d)", self.node_id, epoch)
            self._on_election()

    async def _reconcile(self, image: ClusterImage, candidates: set[ci.TopicPartition] | None,
                         *, preferred: bool) -> None:
        """``reconcile_partition`` on ``candidates`` (None: every partition) and the changes
        written; on completion, the image is the base of the next step's delta."""
        partitions = image.partitions
        selected = partitions.items() if candidates is None else [
            (tp, partitions[tp]) for tp in candidates if tp in partitions]
        changes: list[tuple[str, int, PartitionRegistration]] = []
        for (topic, index), registration in selected:
            new = reconcile_partition(registration, image.brokers,
                                      unclean=self._unclean(topic), preferred=preferred,
                                      shutting_down=image.shutting_down)
            if new is not None:
                changes.append((ci.partition_key(topic, index),
                                image.partition_versions[(topic, index)], new))
        lost: set[ci.TopicPartition] = set()
        for start in range(0, len(changes), MAX_OPS_PER_TXN):
            chunk = changes[start:start + MAX_OPS_PER_TXN]
            compares = [Compare(ci.CONTROLLER_EPOCH, self._epoch_version)]
            compares += [Compare(key, version) for key, version, _ in chunk]
            result = await self.store.transaction(
                compares, [Put(key, new.encode()) for key, _, new in chunk])
            if not result.succeeded:
                if ci.CONTROLLER_EPOCH in result.conflicts:
                    logger.warning("controller %d was fenced (epoch %d)", self.node_id,
                                   self.epoch)
                    self.active = False
                    return
                # A leader's ISR change won the race: the next image reconciles them again
                # (all of them: the others of the transaction are unchanged in the store).
                lost.update(ci.parse_partition_key(key) for key, _, _ in chunk)
                continue
            for key, _, new in chunk:
                old = image.partitions.get(ci.parse_partition_key(key))
                if old is None or old.leader != new.leader:
                    self.elections += 1
                    logger.info("elected %s leader %d (epoch %d, isr %s)",
                                key[len(ci.PARTITIONS):], new.leader, new.leader_epoch,
                                list(new.isr))
        self._reconciled, self._retry = image, lost

    async def _rebalance_timer(self) -> None:
        assert self._rebalance_interval_s
        while True:
            await asyncio.sleep(self._rebalance_interval_s)
            self._preferred_due = True
            self._changed.set()


def _same_context(base: ClusterImage, image: ClusterImage) -> bool:
    """Whether ``reconcile_partition`` of an unchanged partition gives at ``image`` what it
    gave at ``base``: the same brokers (and epochs), topic configs (``unclean``), broker
    configs and brokers in controlled shutdown."""
    return (image.brokers is base.brokers and image.topics is base.topics
            and image.broker_configs is base.broker_configs
            and image.shutting_down == base.shutting_down)
