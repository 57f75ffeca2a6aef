"""The broker's log cleaner (Kafka's ``LogCleaner``): its settings and the driver that compacts
one log per call. Which log, and how far each is clean, is ``log_cleaner_manager``; the compaction
of one log itself is ``cleaner.Cleaner``.

``LogCleaner.clean_one`` asks the manager for the filthiest compacted log (marking it in
progress), runs one ``Cleaner`` round on it with the manager's abort check and guarded swap, and
reports the round's end offset back (the manager checkpoints it unless the round was aborted). A
disk error propagates (the log dir goes offline); an unexpected failure marks the partition
uncleanable.

Threads: ``LogCleaner.clean_one`` runs on a worker thread (the log manager's scheduler calls it
every ``log.cleaner.backoff.ms`` while it finds nothing, at once again while it does); several
workers may call it concurrently, up to ``log.cleaner.threads`` (each takes its own ``Cleaner``
and its share of ``log.cleaner.dedupe.buffer.size``). Time is injected (``now_ms``); nothing here
sleeps or starts a thread. Not implemented: ``log.cleaner.io.max.bytes.per.second`` throttling.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from strata.storage.cleaner import Cleaner, CleanerStats, LogCleaningAbortedError
from strata.storage.clock import Clock, SystemClock
from strata.storage.errors import InvalidConfigError, KafkaStorageError
from strata.storage.log_cleaner_manager import (
    CleanerLog,
    LogCleanerManager,
    LogToClean,
    TopicPartition,
)
from strata.storage.offset_map import OffsetMap

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------- config
@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Broker-level cleaner settings (Kafka's ``CleanerConfig``), Kafka's defaults."""

    enable: bool = True  # log.cleaner.enable
    threads: int = 1  # log.cleaner.threads
    dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size (all threads)
    io_buffer_load_factor: float = 0.9  # log.cleaner.io.buffer.load.factor
    io_buffer_size: int = 512 * 1024  # log.cleaner.io.buffer.size
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms: the scheduler's wait when idle

    @classmethod
    def from_props(cls, broker: Mapping[str, str]) -> CleanerConfig:
        """Read the ``log.cleaner.*`` keys; a bad value raises ``InvalidConfigError``."""

        def get(key: str, default: str) -> str:
            return str(broker.get(key, default)).strip()

        try:
            enable = get("log.cleaner.enable", "true").lower()
            if enable not in ("true", "false"):
                raise ValueError("expected true or false")
            config = cls(
                enable=enable == "true",
                threads=int(get("log.cleaner.threads", "1")),
                dedupe_buffer_size=int(get("log.cleaner.dedupe.buffer.size", "134217728")),
                io_buffer_load_factor=float(get("log.cleaner.io.buffer.load.factor", "0.9")),
                io_buffer_size=int(get("log.cleaner.io.buffer.size", "524288")),
                backoff_ms=int(get("log.cleaner.backoff.ms", "15000")),
            )
        except ValueError as exc:
            raise InvalidConfigError(f"invalid log.cleaner setting: {exc}") from None
        if config.threads < 1 or config.io_buffer_size < 1 or config.backoff_ms < 0:
            raise InvalidConfigError("log.cleaner.threads and io.buffer.size must be >= 1")
        if not 0.0 < config.io_buffer_load_factor <= 1.0:
            raise InvalidConfigError("log.cleaner.io.buffer.load.factor must be in (0, 1]")
        if config.dedupe_buffer_size // config.threads < OffsetMap.ENTRY_BYTES * 2:
            raise InvalidConfigError("log.cleaner.dedupe.buffer.size is too small")
        return config


# ------------------------------------------------------------------------------ cleaner
class LogCleaner:
    """Compacts the broker's logs one round per ``clean_one`` call (Kafka's ``LogCleaner``).

    Built by the log manager with its data dirs and ``all_logs``; its scheduler calls
    ``clean_one(now_ms)`` from a worker thread: a result means "call again soon", None means
    "nothing to do: back off ``config.backoff_ms``".
    """

    def __init__(
        self,
        config: CleanerConfig,
        log_dirs: Sequence[Path],
        logs: Callable[[], Mapping[TopicPartition, CleanerLog]],
        *,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.manager = LogCleanerManager(log_dirs, logs)
        memory = config.dedupe_buffer_size // config.threads
        self._cleaners: queue.SimpleQueue[Cleaner] = queue.SimpleQueue()
        for _ in range(config.threads):
            self._cleaners.put(Cleaner(
                OffsetMap(memory, config.io_buffer_load_factor),
                clock=clock if clock is not None else SystemClock(),
                io_buffer_size=config.io_buffer_size,
            ))

    def clean_one(self, now_ms: int) -> CleanerStats | None:
        """Clean the filthiest compacted log once; its stats, or None if nothing qualified
        (or every cleaner is busy, or the round was aborted or failed).

        A disk error (``KafkaStorageError``, or an ``OSError`` wrapped in one) propagates: the
        caller takes the log dir offline. A failure after an abort or under a truncation ends the
        round quietly; any other failure marks the partition uncleanable (logged), so it is not
        retried.
        """
        if not self.config.enable:
            return None
        try:
            cleaner = self._cleaners.get_nowait()
        except queue.Empty:
            return None
        try:
            cleanable = self.manager.grab_filthiest_compacted_log(now_ms)
            if cleanable is None:
                return None
            return self._clean(cleaner, cleanable, now_ms)
        finally:
            self._cleaners.put(cleaner)

    def _clean(self, cleaner: Cleaner, cleanable: LogToClean, now_ms: int) -> CleanerStats | None:
        tp, log = cleanable.topic_partition, cleanable.log
        name = f"{tp[0]}-{tp[1]}"
        end_offset: int | None = None
        start_before, end_before = log.log_start_offset, log.log_end_offset
        try:
            logger.info("cleaning %s: offsets [%d, %d), %.1f%% dirty", name,
                        cleanable.first_dirty_offset, cleanable.first_uncleanable_offset,
                        100 * cleanable.cleanable_ratio)
            stats = cleaner.clean(
                log, cleanable.first_dirty_offset, cleanable.first_uncleanable_offset, now_ms,
                check_done=lambda: self.manager.check_cleaning_aborted(tp),
                swap=self.manager.swap_unless_aborted(tp, log),
            )
            end_offset = stats.end_offset
            logger.info("cleaned %s up to %d: %d of %d records removed, %d bytes -> %d, "
                        "%.0f ms", name, end_offset, stats.records_removed,
                        stats.messages_read, stats.bytes_read, stats.bytes_written,
                        stats.duration_ms)
            return stats
        except LogCleaningAbortedError as exc:
            logger.info("cleaning of %s stopped: %s", name, exc)
            return None
        except Exception as exc:
            moved = log.log_end_offset < end_before or log.log_start_offset > start_before
            if self.manager.is_aborted(tp) or moved:  # a truncation pulled segments away
                logger.info("cleaning of %s was interrupted by a truncation or deletion", name,
                            exc_info=True)
                return None
            if isinstance(exc, KafkaStorageError):
                raise
            if isinstance(exc, OSError):
                raise KafkaStorageError(f"cleaning of {name} failed: {exc}") from exc
            logger.exception("cleaning of %s failed; it is marked uncleanable", name)
            self.manager.mark_uncleanable(tp)
            return None
        finally:
            self.manager.done_cleaning(tp, log.dir.parent, end_offset)

    # -- the log manager's hooks (see LogCleanerManager)
    def abort_and_pause_cleaning(self, tp: TopicPartition) -> bool:
        return self.manager.abort_and_pause_cleaning(tp)

    def resume_cleaning(self, tp: TopicPartition) -> None:
        self.manager.resume_cleaning(tp)

    def abort_cleaning(self, tp: TopicPartition, data_dir: Path | None = None) -> None:
        self.manager.abort_cleaning(tp, data_dir)

    def maybe_truncate_checkpoint(self, data_dir: Path, tp: TopicPartition, offset: int) -> None:
        self.manager.maybe_truncate_checkpoint(data_dir, tp, offset)
