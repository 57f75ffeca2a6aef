"""The group layer's metrics: consumer groups coordinated by this broker, their members and lag.

Defined once here (one module per layer), named ``strata_group_*``, computed at scrape time (a
``Collector``) from the coordinator's groups — nothing on the request path:

* ``strata_group_count{state}``: groups per state (Kafka's names; every state present, zero
  included);
* ``strata_group_members{group}``: members of each group;
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
from strata.broker.group.state import GroupState
from strata.broker.replication.partition import Partition

OFFSET_LABELS = ["group", "topic", "partition"]


class GroupMetrics(Collector):
    def __init__(self, registry: CollectorRegistry,
                 groups: Callable[[], list[ClassicGroup]],
                 partition: Callable[[str, int], Partition | None]) -> None:
        self._groups = groups
        self._partition = partition
        registry.register(self)

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        groups = self._groups()
        by_state = GaugeMetricFamily("strata_group_count", "Consumer groups by state.",
                                     labels=["state"])
        for state in GroupState:
            by_state.add_metric([state.value], sum(1 for g in groups if g.state is state))
        members = GaugeMetricFamily("strata_group_members", "Members of a consumer group.",
                                    labels=["group"])
        committed = GaugeMetricFamily("strata_group_committed_offset",
                                      "A group's committed offset.", labels=OFFSET_LABELS)
        lag = GaugeMetricFamily("strata_group_lag_records",
                                "Records between a group's committed offset and the high "
                                "watermark.", labels=OFFSET_LABELS)
        for group in groups:
            members.add_metric([group.group_id], len(group.members))
            for (topic, index), offset in list(group.offsets.items()):
                labels = [group.group_id, topic, str(index)]
                committed.add_metric(labels, offset.offset)
                hosted = self._partition(topic, index)
                if hosted is not None:
                    lag.add_metric(labels, max(hosted.high_watermark - offset.offset, 0))
        yield from (by_state, members, committed, lag)
