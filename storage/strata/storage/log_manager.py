"""``LogManager``: every partition log of one broker across its ``log.dirs``.

Owns the data directories: ``meta.properties`` per dir, the ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint`` and ``replication-offset-checkpoint`` (high watermarks) per dir,
the clean-shutdown marker (``.kafka_cleanshutdown``, Kafka's name), and the map
``(topic, partition) -> Log``.

A log's high watermark after a restart is the one checkpointed in ``replication-offset-checkpoint``
(Kafka's rule: never its log end offset, whose tail may not be on any other replica), clamped
into [log start offset, log end offset]; replication moves it on from there.

Lifecycle: ``startup()`` loads every partition concurrently (``num.recovery.threads.per.data.dir``
threads per dir), skipping recovery scans when the marker says the last shutdown was clean, then
deletes the marker so a crash from here on is seen as unclean. ``shutdown()`` flushes every log,
writes the checkpoints, closes the logs and writes the marker last.

Periodic work is exposed as plain methods that a scheduler calls on the broker's injected
clock, so tests drive them deterministically: ``flush_dirty_logs`` (fsync by ``flush.messages``
/ ``flush.ms``; blocking, for a worker thread), ``checkpoint_recovery_points``,
``checkpoint_high_watermarks`` (``replica.high.watermark.checkpoint.interval.ms``),
``cleanup_logs`` (retention + delayed file deletion), ``clean_one`` (compaction).

Observability: ``events`` (``log_events.LogEvents``) hears of every flush (with its duration),
retention deletion and cleaner round; ``recovery_seconds`` is how long ``startup()`` took.

Disk errors: a log that hits ``KafkaStorageError`` reports it here; its whole log dir goes
offline (every log in it answers KAFKA_STORAGE_ERROR), the broker keeps serving the others.
A partition whose log cannot be loaded at startup (damage recovery cannot repair, a file that
cannot be opened) goes offline alone: one error line names it, its directory is
left untouched, it is in ``offline_partitions`` and ``get_or_create_log`` refuses it with
KAFKA_STORAGE_ERROR (so it is not hosted: in a cluster the other replicas serve it), until a
``delete_log`` removes it; every other partition loads and serves.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from strata.storage import log_file_names as names
from strata.storage.checkpoints import OffsetCheckpointFile
from strata.storage.cleaner import CleanerStats
from strata.storage.clock import Clock
from strata.storage.errors import KafkaStorageError, LogDirOfflineError, StorageError
from strata.storage.log import Log
from strata.storage.log_cleaner import CleanerConfig, LogCleaner
from strata.storage.log_config import LogConfig
from strata.storage.log_events import LogEvents
from strata.storage.log_loader import load_log
from strata.storage.meta_properties import ensure_meta_properties

logger = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

TopicPartition = tuple[str, int]


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[Path],
        broker_config: Mapping[str, str],
        clock: Clock,
        *,
        cluster_id: str | None = None,
        node_id: int | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("log.dirs names no directory")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.broker_config = dict(broker_config)
        self.clock = clock
        self.cluster_id = cluster_id
        self.node_id = node_id
        self._logs: dict[TopicPartition, Log] = {}
        self._topic_overrides: dict[str, dict[str, str]] = {}
        # The broker_config object each topic's overrides were last applied over.
        self._defaults_applied: dict[str, Mapping[str, str]] = {}
        self.offline_dirs: set[Path] = set()
        # Partitions whose log could not be loaded: their dir and why (see the docstring).
        self.offline_partitions: dict[TopicPartition, tuple[Path, str]] = {}
        self._lock = threading.Lock()  # guards _logs against concurrent create/delete
        self.had_clean_shutdown: dict[Path, bool] = {}
        self.producer_id_expiration_ms = int(
            self.broker_config.get("producer.id.expiration.ms", "86400000"))
        self.cleaner_config = CleanerConfig.from_props(self.broker_config)
        self.cleaner = LogCleaner(self.cleaner_config, self.log_dirs, self.all_logs, clock=clock)
        # Who hears about flushes, retention deletions and cleaning (the broker's metrics).
        self.events: LogEvents | None = None
        # Wall time ``startup()`` took to load (and, after a crash, recover) every log.
        self.recovery_seconds = 0.0

    # -------------------------------------------------------------- lifecycle
    def startup(self) -> None:
        """Load every partition of every log dir; raises if a dir belongs to another cluster."""
        started = time.monotonic()
        threads = int(self.broker_config.get("num.recovery.threads.per.data.dir", "2"))
        jobs: list[tuple[Path, Path, bool, dict[TopicPartition, int], dict[TopicPartition, int],
                         dict[TopicPartition, int]]] = []
        for data_dir in self.log_dirs:
            data_dir.mkdir(parents=True, exist_ok=True)
            if self.cluster_id is not None and self.node_id is not None:
                ensure_meta_properties(data_dir, self.cluster_id, self.node_id)
            marker = data_dir / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            self.had_clean_shutdown[data_dir] = clean
            recovery = OffsetCheckpointFile(data_dir / RECOVERY_POINT_CHECKPOINT).read_or_empty()
            starts = OffsetCheckpointFile(data_dir / LOG_START_OFFSET_CHECKPOINT).read_or_empty()
            hws = OffsetCheckpointFile(data_dir / REPLICATION_OFFSET_CHECKPOINT).read_or_empty()
            for child in sorted(data_dir.iterdir()):
                if not child.is_dir():
                    continue
                if child.name.endswith(names.DELETE_DIR_SUFFIX):
                    shutil.rmtree(child, ignore_errors=True)
                    continue
                jobs.append((data_dir, child, clean, recovery, starts, hws))
        with ThreadPoolExecutor(max_workers=max(1, threads * len(self.log_dirs))) as pool:
            loaded = list(pool.map(lambda job: self._load(*job), jobs))
        for tp, log in loaded:
            if isinstance(log, Log):
                self._logs[tp] = log
        for data_dir in self.log_dirs:
            (data_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        self.recovery_seconds = time.monotonic() - started

    def _load(
        self,
        data_dir: Path,
        part_dir: Path,
        clean: bool,
        recovery: Mapping[TopicPartition, int],
        starts: Mapping[TopicPartition, int],
        high_watermarks: Mapping[TopicPartition, int],
    ) -> tuple[TopicPartition, Log | None]:
        topic, partition = names.parse_topic_partition_name(part_dir.name)
        tp = (topic, partition)
        try:
            log = load_log(
                part_dir, self.config_for(topic), self.clock,
                recovery_point=recovery.get(tp, 0),
                log_start_offset=starts.get(tp, 0),
                high_watermark=high_watermarks.get(tp),
                had_clean_shutdown=clean and tp in recovery,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                on_storage_error=self._on_storage_error,
            )
        except (OSError, StorageError, ValueError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            logger.error("partition %s-%d is offline: its log in %s cannot be loaded (%s)",
                         topic, partition, part_dir, reason)
            with self._lock:
                self.offline_partitions[tp] = (part_dir, reason)
            return tp, None
        return tp, log

    def shutdown(self) -> None:
        """Flush, checkpoint, close every log, then mark each online dir cleanly shut down."""
        for log in list(self._logs.values()):
            if not log.offline:
                self._flush(log)
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        for log in list(self._logs.values()):
            log.close()
        for data_dir in self.log_dirs:
            if data_dir not in self.offline_dirs:
                (data_dir / CLEAN_SHUTDOWN_FILE).touch()
        self._logs.clear()

    # ------------------------------------------------------------------ logs
    def config_for(self, topic: str) -> LogConfig:
        return LogConfig.from_props(self._topic_overrides.get(topic, {}), self.broker_config)

    def set_topic_config(self, topic: str, overrides: Mapping[str, str]) -> LogConfig:
        """Validate and apply a topic's overrides to its existing and future logs."""
        config = LogConfig.from_props(overrides, self.broker_config)
        if self._topic_overrides.get(topic) == overrides and \
                self._defaults_applied.get(topic) is self.broker_config:
            return config  # unchanged: every log of the topic has it (no O(partitions) walk)
        self._topic_overrides[topic] = dict(overrides)
        self._defaults_applied[topic] = self.broker_config
        for (t, _), log in list(self._logs.items()):
            if t == topic:
                log.update_config(config)
        return config

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_or_create_log(
        self, topic: str, partition: int, overrides: Mapping[str, str] | None = None
    ) -> Log:
        if overrides is not None:
            self.set_topic_config(topic, overrides)
        with self._lock:
            existing = self._logs.get((topic, partition))
            if existing is not None:
                return existing
            offline = self.offline_partitions.get((topic, partition))
            if offline is not None:
                raise KafkaStorageError(f"partition {topic}-{partition} is offline: its log "
                                        f"in {offline[0]} could not be loaded ({offline[1]})")
            data_dir = self._next_log_dir()
            part_dir = data_dir / names.topic_partition_dir_name(topic, partition)
            try:
                log = load_log(part_dir, self.config_for(topic), self.clock,
                               producer_id_expiration_ms=self.producer_id_expiration_ms,
                               on_storage_error=self._on_storage_error)
            except OSError as exc:  # e.g. EMFILE: this creation fails, the broker serves on
                raise KafkaStorageError(f"cannot create the log of {topic}-{partition} in "
                                        f"{part_dir}: {exc}") from exc
            self._logs[(topic, partition)] = log
            return log

    def _next_log_dir(self) -> Path:
        """Kafka's rule: the online dir holding the fewest partitions."""
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not online:
            raise LogDirOfflineError("every log dir is offline")
        if len(online) == 1:  # no count needed (it cost O(partitions) per creation)
            return online[0]
        counts = {d: 0 for d in online}
        for log in self._logs.values():
            if log.dir.parent in counts:
                counts[log.dir.parent] += 1
        return min(online, key=lambda d: (counts[d], str(d)))

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log, rename its dir to ``*-delete`` and remove it; True if it existed."""
        with self._lock:
            log = self._logs.pop((topic, partition), None)
            offline = self.offline_partitions.pop((topic, partition), None)
        if log is None:
            if offline is not None:
                shutil.rmtree(offline[0], ignore_errors=True)
            return offline is not None
        self.cleaner.abort_cleaning((topic, partition), log.dir.parent)
        log.close()
        doomed = log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}{names.DELETE_DIR_SUFFIX}")
        log.dir.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def _on_storage_error(self, part_dir: Path, exc: BaseException) -> None:
        data_dir = part_dir.parent
        if data_dir in self.offline_dirs:
            return
        logger.error("log dir %s goes offline after a disk error: %s", data_dir, exc)
        self.offline_dirs.add(data_dir)
        for log in list(self._logs.values()):
            if log.dir.parent == data_dir:
                log.offline = True

    # ------------------------------------------------------------ periodic work
    def flush_dirty_logs(self) -> int:
        """fsync logs whose ``flush.messages`` / ``flush.ms`` is due. Blocking (worker thread)."""
        flushed = 0
        for log in list(self._logs.values()):
            if not log.offline and log.needs_flush():
                self._flush(log)
                flushed += 1
        return flushed

    def _flush(self, log: Log) -> None:
        started = time.perf_counter()
        log.flush()
        if self.events is not None:
            self.events.flushed(time.perf_counter() - started)

    def checkpoint_recovery_points(self) -> None:
        self._checkpoint(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        """``replication-offset-checkpoint``: where each log's HW is restored from on restart."""
        self._checkpoint(REPLICATION_OFFSET_CHECKPOINT, lambda log: log.high_watermark)

    def _checkpoint(self, file_name: str, getter: Callable[[Log], int]) -> None:
        for data_dir in self.log_dirs:
            if data_dir in self.offline_dirs:
                continue
            entries = {tp: int(getter(log)) for tp, log in list(self._logs.items())
                       if log.dir.parent == data_dir}
            OffsetCheckpointFile(data_dir / file_name).write(entries)

    def cleanup_logs(self) -> int:
        """Retention for every online log, then delayed unlink of ``.deleted`` segments."""
        deleted = 0
        for (topic, partition), log in list(self._logs.items()):
            if log.offline:
                continue
            size = log.size
            count = log.delete_old_segments()
            if count and self.events is not None:
                self.events.segments_deleted(topic, partition, count, max(size - log.size, 0))
            deleted += count
            log.delete_pending_segments()
        return deleted

    def remove_expired_producers(self) -> int:
        """Forget idempotent producers idle longer than ``producer.id.expiration.ms`` (Kafka's
        default 1 day), in every online log; returns how many were removed."""
        now = self.clock.milliseconds()
        return sum(log.producer_state.remove_expired_producers(now)
                   for log in list(self._logs.values()) if not log.offline)

    def clean_one(self) -> CleanerStats | None:
        """Compact the filthiest compacted log once (``log.cleaner.enable``); None when no log
        qualified (the caller backs off ``log.cleaner.backoff.ms``). Blocking: worker thread."""
        if not self.cleaner_config.enable:
            return None
        stats = self.cleaner.clean_one(self.clock.milliseconds())
        if stats is not None and self.events is not None:
            self.events.cleaned(stats)
        return stats
