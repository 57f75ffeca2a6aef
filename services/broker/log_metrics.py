"""The log layer's metrics: what is appended and read, and each partition log's shape.

Defined once here (ARCHITECTURE.md §8), named ``strata_log_*``, labelled by topic and partition
(what an operator filters by):

* counters, bumped once per appended or read record set (never per record):
  ``strata_log_appended_bytes_total``, ``strata_log_appended_records_total``,
  ``strata_log_read_bytes_total`` (consumers' and followers' fetches);
* gauges computed at scrape time from the hosted partitions (a ``Collector``: nothing on the hot
  path): ``strata_log_size_bytes``, ``strata_log_segments``, ``strata_log_start_offset``,
  ``strata_log_end_offset``.

A partition's series appear when it is hosted and its counters start at zero then. The
collector reads partition state on the scrape thread; every value it reads is a plain int the
event loop replaces atomically, so a scrape sees each value as of some moment (not one
consistent snapshot across partitions, as in Kafka's JMX).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata.broker.partition import Partition

LABELS = ["topic", "partition"]


class LogMetrics:
    def __init__(self, registry: CollectorRegistry,
                 partitions: Callable[[], Sequence[Partition]]) -> None:
        self.appended_bytes = Counter("strata_log_appended_bytes",
                                      "Bytes appended to a partition log.", LABELS,
                                      registry=registry)
        self.appended_records = Counter("strata_log_appended_records",
                                        "Records appended to a partition log.", LABELS,
                                        registry=registry)
        self.read_bytes = Counter("strata_log_read_bytes",
                                  "Bytes read from a partition log by fetches.", LABELS,
                                  registry=registry)
        registry.register(_LogShape(partitions))

    def appended(self, topic: str, partition: int, size: int, records: int) -> None:
        labels = (topic, str(partition))
        self.appended_bytes.labels(*labels).inc(size)
        self.appended_records.labels(*labels).inc(records)

    def read(self, topic: str, partition: int, size: int) -> None:
        self.read_bytes.labels(topic, str(partition)).inc(size)


class _LogShape(Collector):
    """Scrape-time gauges of every hosted partition's log."""

    def __init__(self, partitions: Callable[[], Sequence[Partition]]) -> None:
        self._partitions = partitions

    def describe(self) -> list[Metric]:
        return []  # computed at scrape time only; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        size = GaugeMetricFamily("strata_log_size_bytes", "Bytes on disk of a partition log.",
                                 labels=LABELS)
        segments = GaugeMetricFamily("strata_log_segments", "Segments of a partition log.",
                                     labels=LABELS)
        start = GaugeMetricFamily("strata_log_start_offset", "Log start offset.", labels=LABELS)
        end = GaugeMetricFamily("strata_log_end_offset", "Log end offset.", labels=LABELS)
        for partition in list(self._partitions()):
            labels = [partition.topic, str(partition.partition)]
            log = partition.log
            size.add_metric(labels, log.size)
            segments.add_metric(labels, len(log.segments))
            start.add_metric(labels, log.log_start_offset)
            end.add_metric(labels, log.log_end_offset)
        yield from (size, segments, start, end)
