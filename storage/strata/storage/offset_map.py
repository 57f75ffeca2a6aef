"""The cleaner's offset map (Kafka's ``SkimpyOffsetMap``): key -> latest offset, bounded.

Step 3 of a cleaning round (``cleaner``): the keyed records of the dirty section, except control
batches and aborted transactions, go into an ``OffsetMap`` bounded by
``log.cleaner.dedupe.buffer.size`` (shared out among ``log.cleaner.threads``). If it fills up, the
round stops there: ``end_offset = map.latest_offset + 1`` is the next cleaner checkpoint. The
rewrite then keeps a keyed record at or below ``latest_offset`` only if it is its key's latest
(``batch_filter``).

Invariants: keys are held as 16-byte BLAKE2b digests, so every entry costs the same; the map never
holds more than ``capacity`` keys (``put`` of a new key beyond it is refused and stores nothing);
``latest_offset`` only grows until ``clear``, and every keyed record at or below it that the
cleaner may drop is accounted for.

Threads: each ``Cleaner`` owns one map, reused round after round and touched only by the worker
thread running that cleaner's round; not thread-safe. Pure: no I/O.
"""

from __future__ import annotations

import hashlib


class OffsetMap:
    """Key -> latest offset over the dirty section (Kafka's ``SkimpyOffsetMap``), bounded.

    Keys are stored as 16-byte BLAKE2b digests, so every entry costs the same whatever the key's
    size: about ``ENTRY_BYTES`` of CPython memory (digest object, int, dict slot; measured 130-160).
    ``capacity = memory * load_factor // ENTRY_BYTES`` entries; ``put`` of a new key beyond it is
    refused. As in Kafka, two keys with the same digest would count as one key (probability
    about n**2 / 2**129 for n keys).

    ``latest_offset`` is the last offset the map covers completely (every keyed record at or
    below it that the cleaner may drop is accounted for); records above it must be kept.
    """

    ENTRY_BYTES = 160

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.capacity = int(memory * load_factor) // self.ENTRY_BYTES
        if self.capacity < 1:
            raise ValueError(f"an offset map of {memory} bytes cannot hold a single key")
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    @staticmethod
    def digest(key: bytes) -> bytes:
        return hashlib.blake2b(key, digest_size=16).digest()

    @property
    def size(self) -> int:
        return len(self._offsets)

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.capacity

    def put(self, key: bytes, offset: int) -> bool:
        """Record ``offset`` as the latest of ``key``; False (nothing stored) when full."""
        digest = self.digest(key)
        if len(self._offsets) >= self.capacity and digest not in self._offsets:
            return False
        self._offsets[digest] = offset
        return True

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1 if the map does not know it."""
        return self._offsets.get(self.digest(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = max(self.latest_offset, offset)

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1
