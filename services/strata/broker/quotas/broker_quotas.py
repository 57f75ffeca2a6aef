"""One broker's client quotas: the configuration in force, kept current, and its enforcers.

Owns the ``ClientQuotas`` this broker enforces and the three ``ClientQuotaManager`` s that
measure against them (``produce``: ``producer_byte_rate``, ``fetch``: ``consumer_byte_rate``,
``request``: ``request_percentage``) and the ``controller_mutation_rate`` token buckets
(``mutation``), with Kafka's window (``quota.window.num`` samples of
``quota.window.size.seconds``). Where the configuration comes from:

- a cluster: the metadata image (``ClusterImage.client_quotas``), at start-up and on every
  published image (``on_image``);
- a single broker: ``client-quotas.json`` (``quota_store.FileQuotaStore``), loaded at start-up
  and re-read when another process (``strata quotas --log-dir``) rewrites it.

``alter`` writes through the store and returns once this broker enforces the result
(read-your-writes: the image has caught up with the write's revision, or the file was
re-read), so a DescribeClientQuotas right after an AlterClientQuotas sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from strata.broker.file_follower import FileFollower
from strata.broker.quotas.client_quota_manager import ClientQuotaManager, QuotaWindow
from strata.broker.quotas.client_quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Alteration,
    ClientQuotaEntity,
    ClientQuotas,
    FilterComponent,
    QuotaRequestError,
)
from strata.broker.quotas.controller_mutation_quota import ControllerMutationQuotaManager
from strata.broker.quotas.quota_store import FileQuotaStore, MetadataQuotaStore, QuotaStore

if TYPE_CHECKING:
    from strata.broker.cluster.cluster import Cluster
    from strata.broker.cluster.image import ClusterImage

logger = logging.getLogger(__name__)

WaitForRevision = Callable[[int], Awaitable[object]]


class BrokerQuotas:
    """The quotas one broker enforces, and the way to change them."""

    def __init__(self, store: QuotaStore, window: QuotaWindow, *,
                 wait_for_revision: WaitForRevision | None = None) -> None:
        self.store = store
        self.window = window
        self.quotas = ClientQuotas()
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, window)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, window)
        # Kafka bounds a request-quota throttle at one window (ClientRequestQuotaManager).
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, window,
                                          max_throttle_ms=window.size_ms)
        self.mutation = ControllerMutationQuotaManager(window)
        self._wait_for_revision = wait_for_revision
        self._follower: FileFollower | None = None

    @property
    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return self.produce, self.fetch, self.request

    def apply(self, quotas: ClientQuotas) -> None:
        if quotas == self.quotas:
            return
        self.quotas = quotas
        for manager in self.managers:
            manager.update_quotas(quotas)
        self.mutation.update_quotas(quotas)
        logger.info("client quotas now %d entities", len(quotas.entries))

    # ---------------------------------------------------------------- keeping current
    def apply_image(self, image: ClusterImage) -> None:
        self.apply(image.client_quotas)

    async def on_image(self, image: ClusterImage) -> None:
        """The metadata cache's listener: every published image."""
        self.apply_image(image)

    async def start_file(self) -> None:
        """A single broker: load ``client-quotas.json`` and follow other writers."""
        assert isinstance(self.store, FileQuotaStore)
        self._follower = FileFollower(self.store.file, self._load_file, "client quotas")
        await self._follower.start()

    async def _load_file(self) -> None:
        quotas, _ = await self.store.quotas()
        self.apply(quotas)

    async def close(self) -> None:
        if self._follower is not None:
            await self._follower.close()

    # ---------------------------------------------------------------- API
    def describe(self, components: Sequence[FilterComponent], strict: bool
                 ) -> list[tuple[ClientQuotaEntity, dict[str, float]]]:
        """DescribeClientQuotas from the configuration in force (``QuotaRequestError``)."""
        return [(entity, dict(values))
                for entity, values in self.quotas.describe(components, strict)]

    async def alter(self, alterations: Sequence[Alteration], validate_only: bool
                    ) -> list[QuotaRequestError | None]:
        """AlterClientQuotas: per alteration None or why it was refused; returns once this
        broker enforces the result."""
        results, revision = await self.store.alter(alterations, validate_only)
        if isinstance(self.store, MetadataQuotaStore):
            if revision and self._wait_for_revision is not None:
                await self._wait_for_revision(revision)
        elif not validate_only and self._follower is not None:
            await self._follower.reload_now()
        return results

    def expire_inactive(self, now_ms: int) -> int:
        """Drop every manager's sensors idle for an hour."""
        return sum(manager.expire_inactive(now_ms) for manager in self.managers)


async def open_quotas(cluster: Cluster | None, log_dir: Path, window: QuotaWindow
                      ) -> BrokerQuotas:
    """The broker's quotas, loaded: following the cluster's metadata cache, or the single
    broker's ``client-quotas.json``."""
    if cluster is None:
        quotas = BrokerQuotas(FileQuotaStore(log_dir), window)
        await quotas.start_file()
    else:
        quotas = BrokerQuotas(MetadataQuotaStore(cluster.store), window,
                              wait_for_revision=cluster.cache.wait_for_revision)
        quotas.apply_image(cluster.image)
        cluster.cache.add_listener(quotas.on_image)
    return quotas
