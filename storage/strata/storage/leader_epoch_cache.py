"""``LeaderEpochFileCache``: leader epoch -> start offset of one partition (KIP-101, KIP-279).

Owns the partition dir's ``leader-epoch-checkpoint`` (format: ``checkpoints.py``, lines
"epoch startOffset"). Each entry says: the leader of ``epoch`` appended its first batch at
``start_offset``. Followers ask the leader (OffsetForLeaderEpoch) for the end offset of their
latest epoch and truncate where the logs diverge, instead of trusting the high watermark.

Invariants: entries are sorted, epochs strictly increasing and start offsets strictly
increasing; every epoch >= 0 and start offset >= 0. ``assign`` restores them by removing
conflicting entries from the end (Kafka's ``maybeTruncateNonMonotonicEntries``).

Persistence and crash policy: every change is written through at once, atomically (``<file>.tmp``,
rename), so the file always holds a state the cache had. Truncations are also fsynced (file and
dir) at once. ``assign`` — the append path: a new epoch's first batch on every partition after
each leader change — is not (Kafka's KAFKA-15046: an fsync per partition on the request path
stalled produce; here it blocked the event loop, 12% of a follower's samples while a
1,000-partition topic took its first writes): ``sync`` makes it durable, and the ``Log`` calls
it in ``flush`` before the recovery point moves and in ``close`` before the clean-shutdown marker,
so an entry not yet synced only ever describes batches above the recovery point, which recovery
after an OS crash re-reads and re-assigns anyway. A killed process loses nothing (the page cache
keeps the renamed file). After a crash the loader trims the cache to
``[log_start_offset, log_end_offset)`` again (``truncate_from_start`` / ``truncate_from_end``),
and re-assigns epochs of recovered batches. A malformed file is logged and
read as empty (``checkpoint_corrupt`` is then True, so the loader can rebuild it from the batches).
Entries read from the file pass through ``assign``'s rules, so a non-monotonic file is repaired in
memory (and on disk at the next change).

Who mutates: the owning ``Log``, on its owner thread (appends, follower truncation, retention,
DeleteRecords). Not thread-safe by design: there is no lock; readers such as ListOffsets run on
the same thread.
"""

from __future__ import annotations

import bisect
import logging
from pathlib import Path

from strata.storage.checkpoints import CorruptCheckpointError, EpochEntry, LeaderEpochCheckpointFile

logger = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    """Epoch -> start offset, persisted to ``leader-epoch-checkpoint`` on every change."""

    def __init__(self, checkpoint: LeaderEpochCheckpointFile | Path) -> None:
        if not isinstance(checkpoint, LeaderEpochCheckpointFile):
            checkpoint = LeaderEpochCheckpointFile(checkpoint)
        self.checkpoint = checkpoint
        self._entries: list[EpochEntry] = []
        self.checkpoint_corrupt = False
        try:
            stored = checkpoint.read()
        except CorruptCheckpointError as exc:
            logger.warning("leader epoch cache starts empty: %s", exc)
            self.checkpoint_corrupt = True
            stored = []
        for entry in stored:
            self._assign(entry)

    # --------------------------------------------------------------- updates
    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka's ``assign``).

        A no-op when ``epoch`` is the latest epoch and ``start_offset`` is not below its start.
        Otherwise every entry from the end whose epoch >= ``epoch`` or whose start offset >=
        ``start_offset`` is removed (they conflict with the new one) and the entry is appended.
        """
        if self._assign(EpochEntry(epoch, start_offset)):
            self.checkpoint.write(self._entries, durable=False)  # ``sync`` makes it durable

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid partition leader epoch entry {entry}")
        latest = self.latest_entry
        if latest is not None and entry.epoch == latest.epoch and \
                entry.start_offset >= latest.start_offset:
            return False
        removed: list[EpochEntry] = []
        while self._entries and (self._entries[-1].epoch >= entry.epoch or
                                 self._entries[-1].start_offset >= entry.start_offset):
            removed.append(self._entries.pop())
        self._entries.append(entry)
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            logger.warning("new epoch entry %s caused truncation of conflicting entries %s; "
                           "cache now holds %d entries", entry, removed, len(self._entries))
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop every entry with ``start_offset >= end_offset`` (the log was truncated there)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before ``start_offset``; the epoch holding it now starts there.

        Exclusive: ``truncate_from_start(6)`` keeps an entry starting at 6 unchanged.
        """
        kept_from = bisect.bisect_right([e.start_offset for e in self._entries], start_offset)
        if kept_from == 0:
            return
        holder = self._entries[kept_from - 1]
        self._entries[:kept_from] = [EpochEntry(holder.epoch, start_offset)]
        self._flush()

    def clear_and_flush(self) -> None:
        """Delete every entry (the log was truncated fully)."""
        self._entries.clear()
        self._flush()

    def _flush(self) -> None:
        self.checkpoint.write(self._entries)

    def sync(self) -> None:
        """Make an ``assign`` written without fsync durable (module docstring); thread-safe
        against ``assign`` (the checkpoint's lock). Raises ``KafkaStorageError``."""
        self.checkpoint.sync()

    # ---------------------------------------------------------------- queries
    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The current leader epoch: the latest epoch with messages assigned to it."""
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        for entry in self._entries:
            if entry.epoch == epoch:
                return entry
        return None

    def previous_epoch(self) -> int | None:
        """The epoch before the latest one, if any."""
        return self._entries[-2].epoch if len(self._entries) >= 2 else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset`` (None if it lies before the first entry)."""
        i = bisect.bisect_right([e.start_offset for e in self._entries], offset)
        return self._entries[i - 1].epoch if i else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: ``(largest epoch <= requested, end offset of that epoch)``.

        * ``requested_epoch`` is -1 (a bootstrapping follower), or larger than every cached
          epoch other than the latest, or the cache is empty: ``(-1, -1)`` (UNDEFINED).
        * ``requested_epoch`` is the latest epoch: ``(latest, log_end_offset)`` — the epoch is
          still being written to.
        * otherwise ``(floor epoch, start offset of the first epoch above requested)``; when no
          cached epoch is <= requested (retention removed them) the answer is
          ``(requested_epoch, start offset of the earliest epoch)``, as in Kafka since KIP-279:
          the follower then truncates to at most where the leader's known history starts.
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        latest = self.latest_epoch
        if latest is not None and latest == requested_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        end_offset = self._entries[higher].start_offset
        if higher == 0:
            return requested_epoch, end_offset
        return self._entries[higher - 1].epoch, end_offset

    def __repr__(self) -> str:
        body = ", ".join(f"{e.epoch}@{e.start_offset}" for e in self._entries)
        return f"LeaderEpochFileCache({self.checkpoint.path}: [{body}])"
