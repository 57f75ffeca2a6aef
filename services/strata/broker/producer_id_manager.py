"""``ProducerIdManager``: producer ids for InitProducerId, unique and increasing across restarts.

Kafka hands out producer ids in blocks (``ProducerIdManager`` + the controller's
``AllocateProducerIds``); the broker keeps one block in memory and persists only the end of the
last block it took, so a restart never reuses an id and costs one write per block, not per id.
A single broker persists that end in the first log dir; in a cluster the blocks come from the
metadata store (``ClusterProducerIdManager``), behind the same ``generate_producer_id``:

File ``<first log dir>/__strata_producer_ids.json``, written atomically (temp file, fsync,
rename, fsync of the directory)::

    {"version": 1, "next_block_start": 2000}

``next_block_start`` is the first id of the block *after* the one handed out last. Invariants:
ids handed out are < ``next_block_start`` on disk; a new block is persisted before any of its
ids is handed out; ids are never reused (ids left in a block at a crash or restart are
skipped). Ids stay below 2**63 - 1 (Kafka's int64).

Threads: ``generate_producer_id`` runs on the event loop; the block write (fsync) runs in a
worker thread, and concurrent callers wait for the one allocation in flight.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from strata.metadata.store import MetadataStore
from strata.storage.checkpoints import atomic_write

FILE_NAME = "__strata_producer_ids.json"
FORMAT_VERSION = 1
DEFAULT_BLOCK_SIZE = 1000
MAX_PRODUCER_ID = (1 << 63) - 1


class ProducerIdsExhaustedError(Exception):
    """No producer id below 2**63 - 1 is left (never in practice)."""


class ProducerIdManager:
    def __init__(self, data_dir: Path, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError(f"producer id block size must be positive, got {block_size}")
        self.path = Path(data_dir) / FILE_NAME
        self.block_size = block_size
        self._next_id = 0
        self._block_end = 0  # exclusive; _next_id == _block_end: no ids left in memory
        self._allocating: asyncio.Future[None] | None = None

    # ---------------------------------------------------------------- public
    async def generate_producer_id(self) -> int:
        """A new producer id (event loop). Allocates the next block in a worker thread when the
        current one is used up."""
        while self._next_id >= self._block_end:
            if self._allocating is None:
                loop = asyncio.get_running_loop()
                self._allocating = loop.create_future()
                try:
                    await self._allocate()
                    self._allocating.set_result(None)
                except BaseException as exc:
                    self._allocating.set_exception(exc)
                    self._allocating.exception()  # retrieved: callers see it via their await
                    raise
                finally:
                    self._allocating = None
            else:
                await asyncio.shield(self._allocating)
        producer_id = self._next_id
        self._next_id += 1
        return producer_id

    def generate_producer_id_blocking(self) -> int:
        """Same, allocating on the calling thread (tools and tests)."""
        if self._next_id >= self._block_end:
            self._allocate_block()
        producer_id = self._next_id
        self._next_id += 1
        return producer_id

    async def _allocate(self) -> None:
        await asyncio.to_thread(self._allocate_block)

    # -------------------------------------------------------------- on disk
    def _allocate_block(self) -> None:
        start = max(self._read_next_block_start(), self._block_end)
        end = start + self.block_size
        if end > MAX_PRODUCER_ID:
            raise ProducerIdsExhaustedError(f"no producer id block left after {start}")
        self._write_next_block_start(end)
        self._next_id, self._block_end = start, end

    def _read_next_block_start(self) -> int:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return 0
        data = json.loads(raw)
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unknown format version {data.get('version')!r}")
        value = data["next_block_start"]
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{self.path}: bad next_block_start {value!r}")
        return value

    def _write_next_block_start(self, value: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"version": FORMAT_VERSION, "next_block_start": value}).encode()
        atomic_write(self.path, body)

class ClusterProducerIdManager(ProducerIdManager):
    """Producer ids unique across a cluster: blocks taken from the metadata store.

    The store key ``/strata/producer_id_block`` holds ``{"next_block_start": N}``; a broker
    takes ``[N, N + block_size)`` by a compare-and-set to ``N + block_size`` (retrying when
    another broker won the race), so two brokers never hand out one id (Kafka's controller-side
    ``AllocateProducerIds``).
    """

    KEY = "/strata/producer_id_block"

    def __init__(self, store: MetadataStore, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        super().__init__(Path("."), block_size)
        self.store = store

    async def _allocate(self) -> None:
        while True:
            entry = await self.store.get(self.KEY)
            start = json.loads(entry.value)["next_block_start"] if entry is not None else 0
            end = start + self.block_size
            if end > MAX_PRODUCER_ID:
                raise ProducerIdsExhaustedError(f"no producer id block left after {start}")
            written = await self.store.compare_and_set(
                self.KEY, json.dumps({"next_block_start": end}).encode(),
                version=entry.version if entry is not None else 0)
            if written is not None:
                self._next_id, self._block_end = start, end
                return

    def generate_producer_id_blocking(self) -> int:
        raise NotImplementedError("a cluster allocates producer ids asynchronously")
