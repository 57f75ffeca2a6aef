"""The group layer's metrics: consumer groups coordinated by this broker, their members and lag.

Defined once here (one module per layer), named ``strata_group_*``, computed at scrape time (a
``Collector``) from the coordinator's groups — nothing on the request path:

* ``strata_group_count{state}``: groups per state (Kafka's names; every state present, zero
  included): classic groups (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead) and
  KIP-848 consumer groups (Empty, Assigning, Reconciling, Stable, Dead) together;
* ``strata_group_members{group}``: members of each group;
* ``strata_group_epoch{group}``: the group epoch of each KIP-848 consumer group — it goes up
  by one per rebalance (a member joins, leaves, changes its subscription; a topic changes);
* ``strata_group_committed_offset{group, topic, partition}`` and
  ``strata_group_lag_records{group, topic, partition}``: each committed offset and how far it
  is behind the partition's high watermark, for partitions this broker hosts: as leader, or as
  a follower, whose high watermark trails the leader's by at most one fetch (in a cluster the
  coordinator reports the lag of its groups on every partition it has a replica of).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata.broker.group.classic_group import ClassicGroup
from strata.broker.group.consumer_group import ConsumerGroup, ConsumerGroupState
from strata.broker.group.state import GroupState
from strata.broker.replication.partition import Partition

OFFSET_LABELS = ["group", "topic", "partition"]


class GroupMetrics(Collector):
    def __init__(self, registry: CollectorRegistry,
                 groups: Callable[[], list[ClassicGroup]],
                 partition: Callable[[str, int], Partition | None],
                 consumer_groups: Callable[[], list[ConsumerGroup]] = list) -> None:
        self._groups = groups
        self._consumer_groups = consumer_groups
        self._partition = partition
        registry.register(self)

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        groups = self._groups()
        consumer = {g.group_id: g for g in self._consumer_groups()}
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
        members = GaugeMetricFamily("strata_group_members", "Members of a consumer group.",
                                    labels=["group"])
        for kip848 in consumer.values():
            members.add_metric([kip848.group_id], len(kip848.members))
            epochs.add_metric([kip848.group_id], kip848.group_epoch)
        committed = GaugeMetricFamily("strata_group_committed_offset",
                                      "A group's committed offset.", labels=OFFSET_LABELS)
        lag = GaugeMetricFamily("strata_group_lag_records",
                                "Records between a group's committed offset and the high "
                                "watermark.", labels=OFFSET_LABELS)
        for group in groups:
            if group.group_id not in consumer:
                members.add_metric([group.group_id], len(group.members))
            for (topic, index), offset in list(group.offsets.items()):
                labels = [group.group_id, topic, str(index)]
                committed.add_metric(labels, offset.offset)
                hosted = self._partition(topic, index)
                if hosted is not None:
                    lag.add_metric(labels, max(hosted.high_watermark - offset.offset, 0))
        yield from (by_state, members, epochs, committed, lag)
