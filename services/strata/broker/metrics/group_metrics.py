"""The group layer's metrics: consumer groups coordinated by this broker, their members and lag,
their rebalances and how long KIP-848 members take to reconcile.

Defined once here (one module per layer), named ``strata_group_*``. Computed at scrape time (a
``Collector``) from the coordinator's groups — nothing on the request path:

* ``strata_group_count{state}``: groups per state (Kafka's names; every state present, zero
  included): classic groups (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead) and
  KIP-848 consumer groups (Empty, Assigning, Reconciling, Stable, Dead) together;
* ``strata_group_members{group, type}``: members of each group; ``type`` is Kafka's
  ``GroupType`` as ListGroups v5 reports it: ``classic`` (offsets-only groups included) or
  ``consumer`` (KIP-848). Groups by type: ``count by (type) (strata_group_members)``;
* ``strata_group_epoch{group}``: the group epoch of each KIP-848 consumer group — it goes up
  by one per rebalance (a member joins, leaves, changes its subscription; a topic changes);
* ``strata_group_committed_offset{group, topic, partition}`` and
  ``strata_group_lag_records{group, topic, partition}``: each committed offset and how far it
  is behind the partition's high watermark, for partitions this broker hosts: as leader, or as
  a follower, whose high watermark trails the leader's by at most one fetch (in a cluster the
  coordinator reports the lag of its groups on every partition it has a replica of).

Events the coordinators report (``GroupCoordinator.metrics``; two calls, nothing else):

* ``classic_rebalance_completed()``: a classic group's new generation reached Stable (the
  leader's assignment stored) — ``strata_group_rebalances_total{type="classic"}``, Kafka's
  ``group-coordinator-metrics`` ``classic-group-completed-rebalance-count`` / ``-rate``;
* ``consumer_group_changed(group, epoch_before, member_id, now_ms)`` after every heartbeat,
  classic-member request or expiry of a consumer group: each group epoch bump counts in
  ``strata_group_rebalances_total{type="consumer"}`` (Kafka's ``consumer-group-rebalance-count``
  / ``-rate``), and ``strata_group_reconciliation_seconds`` (a histogram) observes, for a
  member of a consumer group, the time from the group epoch bump that gave it a new target
  assignment to the request at which its member epoch reaches that epoch. A member that joins,
  or reaches the new epoch in the very request that bumped it, is not observed (nothing to
  reconcile); nor is an epoch bumped before this coordinator loaded the group. Both series
  exist from the start (zero). Time is the coordinator's injected monotonic clock; on the
  request path this costs two dict lookups, and an ``observe()`` when a member reaches the
  epoch (the bookkeeping is rebuilt only when the group epoch moves).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata.broker.group.classic_group import ClassicGroup
from strata.broker.group.consumer_group import ConsumerGroup, ConsumerGroupState
from strata.broker.group.state import GroupState
from strata.broker.replication.partition import Partition

OFFSET_LABELS = ["group", "topic", "partition"]
CLASSIC: Final = "classic"
CONSUMER: Final = "consumer"
RECONCILIATION_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                                 60.0, 120.0, 300.0)
KEPT_BUMPS: Final = 8
"""Group epochs whose start time a group keeps: a member further behind is not observed."""


class _Epochs:
    """What one consumer group's reconciliation clock needs: when recent group epochs were
    reached (epoch -> monotonic ms) and the member epoch each member was last seen at."""

    __slots__ = ("bumps", "members")

    def __init__(self) -> None:
        self.bumps: dict[int, float] = {}
        self.members: dict[str, int] = {}


class GroupMetrics(Collector):
    def __init__(self, registry: CollectorRegistry,
                 groups: Callable[[], list[ClassicGroup]],
                 partition: Callable[[str, int], Partition | None],
                 consumer_groups: Callable[[], list[ConsumerGroup]] = list) -> None:
        self._groups = groups
        self._consumer_groups = consumer_groups
        self._partition = partition
        self.rebalances = Counter("strata_group_rebalances",
                                  "Rebalances: a classic group's generation completed (Stable), "
                                  "a consumer group's epoch bumped.", ["type"],
                                  registry=registry)
        for kind in (CLASSIC, CONSUMER):
            self.rebalances.labels(kind)
        self._classic_rebalances = self.rebalances.labels(CLASSIC)
        self._consumer_rebalances = self.rebalances.labels(CONSUMER)
        self.reconciliation = Histogram(
            "strata_group_reconciliation_seconds",
            "Time from a consumer group's epoch bump to a member's epoch reaching it.",
            buckets=RECONCILIATION_BUCKETS, registry=registry)
        self._epochs: dict[str, _Epochs] = {}
        registry.register(self)

    # ------------------------------------------------------------------ events
    def classic_rebalance_completed(self) -> None:
        self._classic_rebalances.inc()

    def consumer_group_changed(self, group: ConsumerGroup, epoch_before: int,
                               member_id: str | None, now_ms: float) -> None:
        """After a request (``member_id``) or an expiry (None) on ``group``."""
        epoch = group.group_epoch
        tracked = self._epochs.get(group.group_id)
        if epoch > epoch_before:
            self._consumer_rebalances.inc(epoch - epoch_before)
            if tracked is None:
                tracked = self._epochs[group.group_id] = _Epochs()
            tracked.bumps[epoch] = now_ms
            if len(tracked.bumps) > KEPT_BUMPS:
                del tracked.bumps[min(tracked.bumps)]
            tracked.members = {m: v.member_epoch for m, v in group.members.items()}
            return
        if tracked is None or member_id is None:
            return
        member = group.members.get(member_id)
        if member is None:
            return
        reached = member.member_epoch
        seen = tracked.members.get(member_id)
        if seen == reached:
            return
        tracked.members[member_id] = reached
        if seen is not None and 0 < seen < reached:
            started = tracked.bumps.get(reached)
            if started is not None:
                self.reconciliation.observe(max(now_ms - started, 0.0) / 1000)

    # ------------------------------------------------------------------ scrape

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        groups = self._groups()
        consumer = {g.group_id: g for g in self._consumer_groups()}
        for gone in [g for g in self._epochs if g not in consumer]:
            del self._epochs[gone]
        by_state = GaugeMetricFamily("strata_group_count", "Consumer groups by state.",
                                     labels=["state"])
        counts = dict.fromkeys([s.value for s in GroupState]
                               + [str(s) for s in ConsumerGroupState], 0)
        for group in groups:
            if group.group_id not in consumer:  # else it only holds that group's offsets
                counts[group.state.value] += 1
        for kip848 in consumer.values():
            counts[str(kip848.state)] += 1
        for name, count in counts.items():
            by_state.add_metric([name], count)
        epochs = GaugeMetricFamily("strata_group_epoch",
                                   "The group epoch of a KIP-848 consumer group.",
                                   labels=["group"])
        members = GaugeMetricFamily("strata_group_members", "Members of a consumer group, "
                                    "by its type (classic, consumer).", labels=["group", "type"])
        for kip848 in consumer.values():
            members.add_metric([kip848.group_id, CONSUMER], len(kip848.members))
            epochs.add_metric([kip848.group_id], kip848.group_epoch)
        committed = GaugeMetricFamily("strata_group_committed_offset",
                                      "A group's committed offset.", labels=OFFSET_LABELS)
        lag = GaugeMetricFamily("strata_group_lag_records",
                                "Records between a group's committed offset and the high "
                                "watermark.", labels=OFFSET_LABELS)
        for group in groups:
            if group.group_id not in consumer:
                members.add_metric([group.group_id, CLASSIC], len(group.members))
            for (topic, index), offset in list(group.offsets.items()):
                labels = [group.group_id, topic, str(index)]
                committed.add_metric(labels, offset.offset)
                hosted = self._partition(topic, index)
                if hosted is not None:
                    lag.add_metric(labels, max(hosted.high_watermark - offset.offset, 0))
        yield from (by_state, members, epochs, committed, lag)
