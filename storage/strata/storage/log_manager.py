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

Moves between log dirs (AlterReplicaLogDirs; the copy and swap are ``future_log``'s):
``create_future_log`` (refused while a dir is offline, as Kafka), ``remove_future_log``,
``replace_current_with_future_log`` (the old log stays open, renamed ``-delete``, for
``file.delete.delay.ms``: ``cleanup_logs`` removes it). An unhosted partition's preferred dir
is where it is created. At startup an unfinished move's copy is discarded and the move is
remembered (``interrupted_moves``: the broker starts it again, from scratch, once the partition
is hosted), and a future log whose current log a crashed swap already renamed becomes the
current log.
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
from strata.storage.future_log import (
    SwappedOutLogs,
    close_abandoned,
    discard,
    promote,
    settle_future_dirs,
)
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
_LoadJob = tuple[Path, Path, bool, dict[TopicPartition, int], dict[TopicPartition, int],
                 dict[TopicPartition, int]]


class LogDirNotFoundError(StorageError):
    """A path that is not one of this broker's ``log.dirs`` (LOG_DIR_NOT_FOUND)."""

    error_code = 57


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
        self._future_logs: dict[TopicPartition, Log] = {}  # replicas moving to another dir
        self._preferred_log_dirs: dict[TopicPartition, Path] = {}
        # Moves a restart cut off: partition -> destination dir (resumed by the broker).
        self.interrupted_moves: dict[TopicPartition, Path] = {}
        self._swapped_out = SwappedOutLogs()  # renamed ``-delete``, removed after a delay
        self._checkpoint_lock = threading.Lock()
        self._swap_lock = threading.Lock()  # a swap and ``shutdown`` exclude each other
        self.shutting_down = False
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
        jobs: list[_LoadJob] = []
        futures: list[Path] = []
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
                if child.name.endswith(names.FUTURE_DIR_SUFFIX):
                    futures.append(child)
                    continue
                jobs.append((data_dir, child, clean, recovery, starts, hws))
        jobs.extend(self._settle_future_dirs(futures, {
            names.parse_topic_partition_name(job[1].name) for job in jobs}))
        with ThreadPoolExecutor(max_workers=max(1, threads * len(self.log_dirs))) as pool:
            loaded = list(pool.map(lambda job: self._load(*job), jobs))
        for tp, log in loaded:
            if isinstance(log, Log):
                self._logs[tp] = log
        for data_dir in self.log_dirs:
            (data_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        self.recovery_seconds = time.monotonic() - started

    def _settle_future_dirs(self, futures: Sequence[Path],
                            current: set[TopicPartition]) -> list[_LoadJob]:
        """Startup (``future_log.settle_future_dirs``): a promoted future log is recovered in
        full; its log start offset and HW come from whichever dir's checkpoint has them."""
        jobs: list[_LoadJob] = []
        for final in settle_future_dirs(futures, current, self.interrupted_moves):
            tp = names.parse_topic_partition_name(final.name)
            found: list[dict[TopicPartition, int]] = [{}, {}]
            for data_dir in self.log_dirs:
                for name, into in zip((LOG_START_OFFSET_CHECKPOINT,
                                       REPLICATION_OFFSET_CHECKPOINT), found, strict=True):
                    offset = OffsetCheckpointFile(data_dir / name).read_or_empty().get(tp)
                    if offset is not None:
                        into[tp] = max(into.get(tp, offset), offset)
            jobs.append((final.parent, final, False, {}, found[0], found[1]))
        return jobs

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
        """Flush, checkpoint, close every log, then mark each online dir cleanly shut down.
        A swap in progress finishes first; none starts after (``replace_current_...``)."""
        with self._swap_lock:
            self.shutting_down = True
        for log in list(self._logs.values()):
            if not log.offline:
                self._flush(log)
        self.checkpoint_all()
        for log in list(self._logs.values()):
            log.close()
        for future in list(self._future_logs.values()):  # left: the next startup discards it
            close_abandoned(future)
        self._future_logs.clear()
        self._swapped_out.delete_due(self.clock.milliseconds(), force=True)
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
            preferred = self._preferred_log_dirs.pop((topic, partition), None)
            data_dir = preferred if preferred is not None and preferred not in \
                self.offline_dirs else self._next_log_dir()
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
        self.remove_future_log(topic, partition)  # first: a future must never outlive it
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

    # ------------------------------------------------------- moves between dirs
    def log_dir_for_path(self, path: str) -> Path:
        """The log dir named by the absolute ``path`` (as DescribeLogDirs reports it).
        ``LogDirNotFoundError`` if it is none of ``log.dirs``, ``LogDirOfflineError`` if it
        went offline (Kafka's ``isLogDirOnline``)."""
        if not path or not Path(path).is_absolute():
            raise LogDirNotFoundError(f"failed to find log dir {path!r}: not an absolute path")
        for data_dir in self.log_dirs:
            if path in (str(data_dir.resolve()), str(data_dir.absolute())):
                if data_dir in self.offline_dirs:
                    raise LogDirOfflineError(f"log dir {path} is offline")
                return data_dir
        raise LogDirNotFoundError(f"failed to find log dir {path}")

    def maybe_update_preferred_log_dir(self, topic: str, partition: int, data_dir: Path) -> None:
        """Where the partition is created if it is not hosted yet (Kafka's rule)."""
        if (topic, partition) not in self._logs:
            self._preferred_log_dirs[(topic, partition)] = data_dir

    def future_log(self, topic: str, partition: int) -> Log | None:
        return self._future_logs.get((topic, partition))

    def future_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._future_logs)

    def create_future_log(self, topic: str, partition: int, data_dir: Path) -> Log | None:
        """Open the partition's future log in ``data_dir``; None when there is nothing to move
        (the log is in ``data_dir``, or already moving there). A future log in another dir is
        abandoned first. KafkaStorageError while a log dir is offline."""
        tp = (topic, partition)
        current = self._logs.get(tp)
        if current is None:
            raise KafkaStorageError(f"{topic}-{partition} has no log on this broker")
        existing = self._future_logs.get(tp)
        if existing is not None and existing.dir.parent == data_dir:
            return None
        self.remove_future_log(topic, partition)
        if current.dir.parent == data_dir:
            return None
        if self.offline_dirs:
            raise KafkaStorageError("no replica moves while a log dir is offline: "
                                    + ", ".join(sorted(map(str, self.offline_dirs))))
        part_dir = data_dir / names.log_future_dir_name(topic, partition, uuid.uuid4().hex)
        try:
            future = load_log(part_dir, self.config_for(topic), self.clock,
                              log_start_offset=current.log_start_offset,
                              producer_id_expiration_ms=self.producer_id_expiration_ms,
                              on_storage_error=self._on_storage_error)
        except OSError as exc:
            raise KafkaStorageError(f"cannot create {part_dir}: {exc}") from exc
        self._future_logs[tp] = future
        return future

    def remove_future_log(self, topic: str, partition: int) -> bool:
        """Abandon a move: close the future log and remove its dir; True if there was one."""
        future = self._future_logs.pop((topic, partition), None)
        if future is None:
            return False
        discard(future)
        return True

    def replace_current_with_future_log(self, topic: str, partition: int) -> Log:
        """Swap the caught-up future log in (``future_log.promote``) and return it, reopened
        under the partition's name with the current log's start offset and high watermark.
        The caller runs this with the partition's appends held off (on the event loop, in
        one step) and hands the returned log to the partition at once."""
        tp = (topic, partition)
        current, future = self._logs[tp], self._future_logs[tp]
        recovery_point = future.recovery_point
        config = self.config_for(topic)
        with self._swap_lock, current.lock:  # ``shutdown`` holds it only to set its flag
            if self.shutting_down:
                raise LogDirOfflineError("the broker is shutting down: no swap")
            current.delete_pending_segments(force=True)  # by path: while it is valid
            new, doomed = promote(current, future, lambda path: load_log(
                path, config, self.clock, recovery_point=current.log_end_offset,
                log_start_offset=current.log_start_offset,
                high_watermark=current.high_watermark, had_clean_shutdown=True,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                on_storage_error=self._on_storage_error))
            current.dir = doomed
        # What the copy never fsynced is fsynced by the next periodic flush.
        new.recovery_point = min(recovery_point, new.recovery_point)
        with self._lock:
            self._logs[tp] = new
            del self._future_logs[tp]
        self._swapped_out.schedule(current, self.clock.milliseconds()
                                   + current.config.file_delete_delay_ms)
        logger.info("%s-%d moved from %s to %s", topic, partition, doomed.parent, new.dir.parent)
        return new

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
        with self._checkpoint_lock:  # periodic tasks and a finished move may write at once
            self._write_checkpoint(file_name, getter)

    def checkpoint_all(self) -> None:
        """Every checkpoint file of every online dir (a move just changed a log's dir)."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()

    def _write_checkpoint(self, file_name: str, getter: Callable[[Log], int]) -> None:
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
        self._swapped_out.delete_due(self.clock.milliseconds())
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
