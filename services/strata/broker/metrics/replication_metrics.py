"""The replication layer's metrics: partition health as Kafka's operators know it.

Defined once here (one module per layer), named ``strata_replication_*``. Scrape-time gauges over
the hosted partitions (a ``Collector``), with Kafka's definitions (``ReplicaManager`` metrics):

* ``strata_replication_partitions``: hosted partitions; ``strata_replication_leaders``: those
  this broker leads;
* ``strata_replication_under_replicated_partitions``: led partitions whose ISR is smaller than
  their replica set; ``strata_replication_under_min_isr_partitions``: led partitions whose ISR
  is below ``min.insync.replicas``; ``strata_replication_offline_partitions``: hosted
  partitions with no leader;
* ``strata_replication_high_watermark{topic, partition}`` of led partitions;
* ``strata_replication_follower_lag_records{topic, partition, replica}``: on the leader, how far
  each follower's log end offset is behind the leader's (-1 until its first fetch is counted
  as the whole log);
* ``strata_replication_follower_lag_seconds{topic, partition, replica}``: on the leader, how long
  since each follower was last caught up (0 while it is at the leader's log end offset) —
  what ``replica.lag.time.max.ms`` is compared with. Needs the broker's clock; without one
  (bare unit tests) the series is not exported.

Counters bumped by the replica manager: ``strata_replication_isr_shrinks_total`` and
``strata_replication_isr_expands_total`` (proposed ISR changes, per topic and partition).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata.broker.replication.partition import Partition

LABELS = ["topic", "partition"]


class ReplicationMetrics:
    def __init__(self, registry: CollectorRegistry,
                 partitions: Callable[[], Sequence[Partition]],
                 now_ms: Callable[[], int] | None = None) -> None:
        self.isr_shrinks = Counter("strata_replication_isr_shrinks",
                                   "ISR shrinks proposed by this broker as leader.", LABELS,
                                   registry=registry)
        self.isr_expands = Counter("strata_replication_isr_expands",
                                   "ISR expansions proposed by this broker as leader.", LABELS,
                                   registry=registry)
        registry.register(_PartitionHealth(partitions, now_ms))

    def track_controller(self, registry: CollectorRegistry,
                         controller: Callable[[], tuple[bool, int]]) -> None:
        """Scrape-time ``strata_replication_controller_active`` (1 on the active controller)
        and ``strata_replication_leader_elections_total`` (leader changes it wrote)."""
        registry.register(_ControllerState(controller))

    def isr_change(self, partition: Partition, new_isr: frozenset[int]) -> None:
        counter = self.isr_expands if len(new_isr) > len(partition.isr) else self.isr_shrinks
        counter.labels(partition.topic, str(partition.partition)).inc()


class _PartitionHealth(Collector):
    def __init__(self, partitions: Callable[[], Sequence[Partition]],
                 now_ms: Callable[[], int] | None) -> None:
        self._partitions = partitions
        self._now_ms = now_ms

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        hosted = list(self._partitions())
        led = [p for p in hosted if p.is_leader]
        counts = {
            "strata_replication_partitions": ("Partitions hosted by this broker.", len(hosted)),
            "strata_replication_leaders": ("Partitions this broker leads.", len(led)),
            "strata_replication_under_replicated_partitions": (
                "Led partitions whose ISR is smaller than their replicas.",
                sum(1 for p in led if len(p.isr) < len(p.replicas))),
            "strata_replication_under_min_isr_partitions": (
                "Led partitions whose ISR is below min.insync.replicas.",
                sum(1 for p in led if len(p.isr) < p.min_insync_replicas)),
            "strata_replication_offline_partitions": (
                "Hosted partitions without a leader.",
                sum(1 for p in hosted if p.leader_id is None or p.leader_id < 0)),
        }
        for name, (documentation, value) in counts.items():
            yield GaugeMetricFamily(name, documentation, value=value)
        high_watermark = GaugeMetricFamily("strata_replication_high_watermark",
                                           "High watermark of a led partition.", labels=LABELS)
        lag = GaugeMetricFamily("strata_replication_follower_lag_records",
                                "Records a follower is behind the leader's log end offset.",
                                labels=[*LABELS, "replica"])
        lag_time = GaugeMetricFamily("strata_replication_follower_lag_seconds",
                                     "Time since a follower was last caught up with the "
                                     "leader's log end offset.", labels=[*LABELS, "replica"])
        now_ms = self._now_ms() if self._now_ms is not None else None
        for p in led:
            labels = [p.topic, str(p.partition)]
            high_watermark.add_metric(labels, p.high_watermark)
            end = p.log_end_offset
            for replica, state in list(p.followers.items()):
                behind = end - max(state.log_end_offset, 0)
                lag.add_metric([*labels, str(replica)], max(behind, 0))
                if now_ms is not None:
                    seconds = (0.0 if state.log_end_offset >= end
                               else max(now_ms - state.caught_up_ms, 0) / 1000.0)
                    lag_time.add_metric([*labels, str(replica)], seconds)
        yield high_watermark
        yield lag
        if now_ms is not None:
            yield lag_time


class _ControllerState(Collector):
    def __init__(self, controller: Callable[[], tuple[bool, int]]) -> None:
        self._controller = controller

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        active, elections = self._controller()
        yield GaugeMetricFamily("strata_replication_controller_active",
                                "1 on the broker that is the active controller, else 0.",
                                value=1 if active else 0)
        yield CounterMetricFamily("strata_replication_leader_elections",
                                  "Partition leader changes written by this broker as "
                                  "controller.", value=elections)
