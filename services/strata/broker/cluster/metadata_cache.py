"""``MetadataCache``: this broker's view of the cluster, followed from the metadata store.

Owns the ``ClusterImage`` every broker component reads (brokers, controller, topics,
partitions) and keeps it current: ``load`` lists everything under ``cluster_image.ROOT``,
``run`` watches from that revision and, after each burst of changes, replaces the image —
built from the previous one and the keys the burst changed (``ImageBuilder``), so it names the
partitions that changed (``ClusterImage.changed_partitions``) — and calls the listeners in
registration order (among them the lifecycle's zombie check, the publisher that applies
partition roles and the controller). A watch whose history was compacted away lists again (the
image jumps to the new revision and names no delta: listeners compare everything).

Invariants: ``image`` is replaced, never mutated; listeners run one at a time on the event
loop, each with the image that was current when it was called; ``wait_for_revision(r)``
returns once the image is at revision ``r`` or later *and* every listener has run for it — so
a broker that wrote to the store can answer its client knowing its own state reflects the
write (read-your-writes for the broker that took the request).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Final, cast

from strata.broker.cluster.image import ROOT, ClusterImage
from strata.broker.cluster.image_builder import ImageBuilder
from strata.metadata.errors import CompactedError, StoreClosedError, StoreUnavailableError
from strata.metadata.store import EventKind, MetadataStore, WatchEvent

logger = logging.getLogger(__name__)

Listener = Callable[[ClusterImage], Awaitable[None]]

RETRY_S: Final = 0.5


class MetadataCache:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.image = ClusterImage()
        self._builder = ImageBuilder()  # the store's entries, and the image made of them
        self._listeners: list[Listener] = []
        self._published = asyncio.Condition()
        self._published_revision = 0

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def load(self) -> ClusterImage:
        """List the whole cluster state (no listeners called: the caller publishes it)."""
        entries, revision = await self.store.list(ROOT)
        self.image = self._builder.load({e.key: (e.value, e.version) for e in entries},
                                        revision)
        self._published_revision = revision
        return self.image

    async def run(self) -> None:
        """Follow the store until cancelled."""
        while True:
            try:
                await self._follow()
            except CompactedError:
                logger.warning("metadata history compacted past revision %d: listing again",
                               self.image.revision)
                await self.load()
                await self._publish()
            except (StoreUnavailableError, OSError) as exc:
                logger.warning("metadata store unavailable (%s); retrying", exc)
                await asyncio.sleep(RETRY_S)
            except StoreClosedError:
                return

    async def _follow(self) -> None:
        queue: asyncio.Queue[tuple[EventKind, str, bytes, int] | BaseException] = \
            asyncio.Queue()

        async def pump() -> None:
            try:
                watch = cast(AsyncGenerator[WatchEvent, None],
                             self.store.watch(ROOT, from_revision=self.image.revision))
                async with contextlib.aclosing(watch) as events:
                    async for event in events:
                        queue.put_nowait((event.kind, event.key, event.value, event.revision))
            except BaseException as exc:  # handed to the consumer, which re-raises it
                queue.put_nowait(exc)
                raise

        pumper = asyncio.get_running_loop().create_task(pump(), name="strata-metadata-watch")
        try:
            while True:
                item = await queue.get()
                batch = [item]
                # One transaction's events arrive together: take the whole burst, letting the
                # watch deliver the rest of a revision before the image is rebuilt.
                for _ in range(3):
                    while not queue.empty():
                        batch.append(queue.get_nowait())
                    await asyncio.sleep(0)
                revision = self.image.revision
                for entry in batch:
                    if isinstance(entry, BaseException):
                        if revision != self.image.revision:
                            self._rebuild(revision)
                            await self._publish()
                        raise entry
                    kind, key, value, rev = entry
                    if kind is EventKind.PUT:
                        self._builder.put(key, value, rev)
                    else:
                        self._builder.delete(key)
                    revision = max(revision, rev)
                self._rebuild(revision)
                await self._publish()
        finally:
            pumper.cancel()
            with contextlib.suppress(BaseException):
                await pumper

    def _rebuild(self, revision: int) -> None:
        # From the previous image and the keys the burst changed (``ImageBuilder``): the cost
        # follows the change, mappings that did not change keep their identity and the image
        # names the partitions that did (listeners skip the others).
        self.image = self._builder.build(revision)

    async def _publish(self) -> None:
        image = self.image
        for listener in self._listeners:
            try:
                await listener(image)
            except Exception:
                logger.exception("metadata listener %r failed at revision %d", listener,
                                 image.revision)
        async with self._published:
            self._published_revision = max(self._published_revision, image.revision)
            self._published.notify_all()

    async def wait_for_revision(self, revision: int, timeout_s: float = 10.0) -> bool:
        """Until the image at ``revision`` (or later) was published; False on timeout."""
        async def reached() -> None:
            async with self._published:
                await self._published.wait_for(lambda: self._published_revision >= revision)

        try:
            await asyncio.wait_for(reached(), timeout_s)
        except TimeoutError:
            return False
        return True
