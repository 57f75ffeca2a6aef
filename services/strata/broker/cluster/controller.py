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
must stay quick): after every image change, ``partition_change.reconcile_partition`` on every
partition — failover elections for dead or restarted leaders, ISR fencing of dead replicas,
offline partitions brought back, reassignments completed — each new registration written with
a compare on the partition's version (a leader's concurrent ISR change wins, and the next image
is reconciled again). Every ``leader.imbalance.check.interval.seconds`` with
``auto.leader.rebalance.enable``, the same with ``preferred=True``.
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
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._rebalance_task: asyncio.Task[None] | None = None
        self._preferred_due = False

    # ------------------------------------------------------------------ lifecycle
    def start(self, image: ClusterImage) -> None:
        self._image = image
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name="strata-controller")
        if self._rebalance_interval_s:
            self._rebalance_task = loop.create_task(self._rebalance_timer(),
                                                    name="strata-leader-rebalance")
        self._changed.set()

    async def on_image(self, image: ClusterImage) -> None:
        """The metadata listener: remember the image, wake the controller task."""
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
            image = self._image
            try:
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
                    await self._reconcile(image, preferred=preferred)
            except (MetadataStoreError, OSError) as exc:
                logger.warning("controller step failed (%s); retrying", exc)
                await asyncio.sleep(0.2)
                self._changed.set()
            except Exception:
                logger.exception("controller step failed")
                await asyncio.sleep(0.2)
                self._changed.set()

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

    async def _reconcile(self, image: ClusterImage, *, preferred: bool) -> None:
        changes: list[tuple[str, int, PartitionRegistration]] = []
        for (topic, index), registration in image.partitions.items():
            new = reconcile_partition(registration, image.brokers,
                                      unclean=self._unclean(topic), preferred=preferred,
                                      shutting_down=image.shutting_down)
            if new is not None:
                changes.append((ci.partition_key(topic, index),
                                image.partition_versions[(topic, index)], new))
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
                # A leader's ISR change won the race: the next image is reconciled again.
                continue
            for key, _, new in chunk:
                old = image.partitions.get(_tp(key))
                if old is None or old.leader != new.leader:
                    self.elections += 1
                    logger.info("elected %s leader %d (epoch %d, isr %s)",
                                key[len(ci.PARTITIONS):], new.leader, new.leader_epoch,
                                list(new.isr))

    async def _rebalance_timer(self) -> None:
        assert self._rebalance_interval_s
        while True:
            await asyncio.sleep(self._rebalance_interval_s)
            self._preferred_due = True
            self._changed.set()

    def request_preferred_election(self) -> None:
        self._preferred_due = True
        self._changed.set()


def _tp(key: str) -> tuple[str, int]:
    topic, _, index = key[len(ci.PARTITIONS):].rpartition("/")
    return topic, int(index)
