"""The log layer's metrics: what is appended and read, and each partition log's shape.

Defined once here (one module per layer), named ``strata_log_*``, labelled by topic and partition
(what an operator filters by):

* counters, bumped once per appended or read record set (never per record):
  ``strata_log_appended_bytes_total``, ``strata_log_appended_records_total``,
  ``strata_log_read_bytes_total`` (consumers' and followers' fetches);
* gauges computed at scrape time from the hosted partitions (a ``Collector``: nothing on the hot
  path): ``strata_log_size_bytes``, ``strata_log_segments``, ``strata_log_start_offset``,
  ``strata_log_end_offset``;
* the log manager's background work, heard through ``strata.storage.log_events.LogEvents``
  (once per log flush / retention pass / cleaner round): ``strata_log_flush_latency_seconds``
  (histogram of each log's fsync, Kafka's ``LogFlushRateAndTimeMs``),
  ``strata_log_retention_deleted_segments_total`` and ``strata_log_retention_deleted_bytes_total``
  per topic and partition (zero for every hosted partition until retention deletes),
  ``strata_log_cleaner_runs_total``, ``strata_log_cleaner_cleaned_bytes_total`` (bytes the
  cleaner read and rewrote, Kafka's "cleaned"), ``strata_log_cleaner_removed_records_total``;
* ``strata_log_recovery_seconds``: how long loading (and recovering) the logs took at startup.

A partition's series appear when it is hosted and its counters start at zero then. The
collector reads partition state on the scrape thread; every value it reads is a plain int the
event loop replaces atomically, so a scrape sees each value as of some moment (not one
consistent snapshot across partitions, as in Kafka's JMX).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata.broker.replication.partition import Partition
from strata.storage.cleaner import CleanerStats
from strata.storage.log_manager import LogManager

LABELS = ["topic", "partition"]
# fsync: ~1 ms typical, p99 ~10 ms, stalls of hundreds of ms (NOTES.md).
FLUSH_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                        2.5, 5.0, 10.0)


class LogMetrics:
    """The log layer's series; also the ``LogEvents`` listener of the broker's log manager."""

    def __init__(self, registry: CollectorRegistry,
                 partitions: Callable[[], Sequence[Partition]],
                 log_manager: LogManager | None = None) -> None:
        self.appended_bytes = Counter("strata_log_appended_bytes",
                                      "Bytes appended to a partition log.", LABELS,
                                      registry=registry)
        self.appended_records = Counter("strata_log_appended_records",
                                        "Records appended to a partition log.", LABELS,
                                        registry=registry)
        self.read_bytes = Counter("strata_log_read_bytes",
                                  "Bytes read from a partition log by fetches.", LABELS,
                                  registry=registry)
        # Per-partition children of the hot-path counters, looked up once (``labels()`` takes a
        # lock and validates its values: ~10 µs a request otherwise). Series are never removed,
        # so a cached child stays the registered one. Touched only from the event loop.
        self._appended: dict[tuple[str, int], tuple[Any, Any]] = {}
        self._read: dict[tuple[str, int], Any] = {}
        self.flush_latency = Histogram("strata_log_flush_latency_seconds",
                                       "Time of one log's fsync.", buckets=FLUSH_BUCKETS,
                                       registry=registry)
        self.cleaner_runs = Counter("strata_log_cleaner_runs",
                                    "Compaction rounds the log cleaner finished.",
                                    registry=registry)
        self.cleaner_cleaned_bytes = Counter("strata_log_cleaner_cleaned_bytes",
                                             "Bytes of segments the log cleaner compacted.",
                                             registry=registry)
        self.cleaner_removed_records = Counter("strata_log_cleaner_removed_records",
                                               "Records compaction removed (superseded keys, "
                                               "expired tombstones).", registry=registry)
        # (topic, partition) -> [segments, bytes] deleted by retention; retention runs on the
        # event loop, scrapes on the HTTP thread: the lock keeps the pair consistent.
        self._deleted: dict[tuple[str, int], list[int]] = {}
        self._deleted_lock = threading.Lock()
        self._log_manager = log_manager
        if log_manager is not None:
            log_manager.events = self
        registry.register(_LogShape(partitions, self._deleted_snapshot, self._recovery_seconds))

    def appended(self, topic: str, partition: int, size: int, records: int) -> None:
        children = self._appended.get((topic, partition))
        if children is None:
            labels = (topic, str(partition))
            children = self._appended[(topic, partition)] = (
                self.appended_bytes.labels(*labels), self.appended_records.labels(*labels))
        children[0].inc(size)
        children[1].inc(records)

    def read(self, topic: str, partition: int, size: int) -> None:
        child = self._read.get((topic, partition))
        if child is None:
            child = self._read[(topic, partition)] = self.read_bytes.labels(topic, str(partition))
        child.inc(size)

    # ------------------------------------------------------------------ LogEvents
    def flushed(self, seconds: float) -> None:
        self.flush_latency.observe(seconds)

    def segments_deleted(self, topic: str, partition: int, segments: int, size: int) -> None:
        with self._deleted_lock:
            totals = self._deleted.setdefault((topic, partition), [0, 0])
            totals[0] += segments
            totals[1] += size

    def cleaned(self, stats: CleanerStats) -> None:
        self.cleaner_runs.inc()
        self.cleaner_cleaned_bytes.inc(stats.bytes_read)
        self.cleaner_removed_records.inc(max(stats.records_removed, 0))

    def _deleted_snapshot(self) -> dict[tuple[str, int], tuple[int, int]]:
        with self._deleted_lock:
            return {tp: (v[0], v[1]) for tp, v in self._deleted.items()}

    def _recovery_seconds(self) -> float | None:
        return self._log_manager.recovery_seconds if self._log_manager is not None else None


class _LogShape(Collector):
    """Scrape-time gauges of every hosted partition's log."""

    def __init__(self, partitions: Callable[[], Sequence[Partition]],
                 deleted: Callable[[], dict[tuple[str, int], tuple[int, int]]],
                 recovery_seconds: Callable[[], float | None]) -> None:
        self._partitions = partitions
        self._deleted = deleted
        self._recovery_seconds = recovery_seconds

    def describe(self) -> list[Metric]:
        return []  # computed at scrape time only; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        size = GaugeMetricFamily("strata_log_size_bytes", "Bytes on disk of a partition log.",
                                 labels=LABELS)
        segments = GaugeMetricFamily("strata_log_segments", "Segments of a partition log.",
                                     labels=LABELS)
        start = GaugeMetricFamily("strata_log_start_offset", "Log start offset.", labels=LABELS)
        end = GaugeMetricFamily("strata_log_end_offset", "Log end offset.", labels=LABELS)
        deleted_segments = CounterMetricFamily(
            "strata_log_retention_deleted_segments", "Segments deleted by retention.",
            labels=LABELS)
        deleted_bytes = CounterMetricFamily(
            "strata_log_retention_deleted_bytes", "Bytes of segments deleted by retention.",
            labels=LABELS)
        deleted = self._deleted()
        for partition in list(self._partitions()):
            labels = [partition.topic, str(partition.partition)]
            log = partition.log
            size.add_metric(labels, log.size)
            segments.add_metric(labels, len(log.segments))
            start.add_metric(labels, log.log_start_offset)
            end.add_metric(labels, log.log_end_offset)
            gone_segments, gone_bytes = deleted.get((partition.topic, partition.partition), (0, 0))
            deleted_segments.add_metric(labels, gone_segments)
            deleted_bytes.add_metric(labels, gone_bytes)
        yield from (size, segments, start, end, deleted_segments, deleted_bytes)
        recovery = self._recovery_seconds()
        if recovery is not None:
            yield GaugeMetricFamily("strata_log_recovery_seconds",
                                    "Time loading and recovering the logs took at startup.",
                                    value=recovery)
