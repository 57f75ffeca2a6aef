"""The replication throttles' metrics (KIP-73), computed at scrape time from the quotas.

Kafka registers one sensor per side, ``byte-rate`` in the groups ``LeaderReplication`` and
``FollowerReplication``; here they are series of ``strata_replication_throttle_*`` labelled
``replication_type`` with those group names:

* ``strata_replication_throttle_byte_rate``: Kafka's ``byte-rate``, the measured rate of
  throttled partitions' bytes over the quota window (bytes per second);
* ``strata_replication_throttle_bound``: the throttled rate in force (absent when unthrottled);
* ``strata_replication_throttled_topics``: topics with replicas throttled on this broker;
* ``strata_replication_throttle_bytes_total``: the bytes recorded against the rate;
* ``strata_replication_throttled_reads_total``: how often a replica was held back (a
  follower's read answered empty, a partition left out of a fetch) — Strata's counter, which
  Kafka does not keep.

Nothing here runs on the request path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata.broker.replication.replication_quota import LONG_MAX, ReplicationQuotas

LABELS = ["replication_type"]


class ReplicationQuotaMetrics(Collector):
    def __init__(self, registry: CollectorRegistry, quotas: ReplicationQuotas,
                 now_ms: Callable[[], int]) -> None:
        self._quotas = quotas
        self._now_ms = now_ms
        registry.register(self)

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        rate = GaugeMetricFamily("strata_replication_throttle_byte_rate",
                                 "Measured rate of throttled replication (bytes/s).",
                                 labels=LABELS)
        bound = GaugeMetricFamily("strata_replication_throttle_bound",
                                  "The replication throttled rate in force (bytes/s).",
                                  labels=LABELS)
        topics = GaugeMetricFamily("strata_replication_throttled_topics",
                                   "Topics with replicas throttled on this broker.",
                                   labels=LABELS)
        recorded = CounterMetricFamily("strata_replication_throttle_bytes",
                                       "Bytes of throttled partitions replicated.",
                                       labels=LABELS)
        held = CounterMetricFamily("strata_replication_throttled_reads",
                                   "Times a replica was held back by a replication throttle.",
                                   labels=LABELS)
        now = self._now_ms()
        for quota in (self._quotas.leader, self._quotas.follower):
            labels = [quota.replication_type]
            rate.add_metric(labels, quota.measure(now))
            if quota.bound < LONG_MAX:
                bound.add_metric(labels, float(quota.bound))
            topics.add_metric(labels, float(len(quota.throttled_topics())))
            recorded.add_metric(labels, float(quota.recorded_bytes))
            held.add_metric(labels, float(quota.throttled_count))
        yield from (rate, bound, topics, recorded, held)
