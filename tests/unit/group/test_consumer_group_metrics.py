"""``strata_group_*`` with KIP-848 groups: counted by their own state, members and epoch; the
classic group holding a consumer group's offsets is not counted as a group of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from strata.broker.group.classic_group import ClassicGroup, OffsetAndMetadata
from strata.broker.group.consumer_group import ConsumerGroup
from strata.broker.group.consumer_group_membership import (
    ConsumerGroupConfig,
    ConsumerGroupMembership,
)
from strata.broker.metrics.group_metrics import GroupMetrics
from strata.storage.clock import ManualClock
from tests.unit.group.consumer_group_sim import Client


def test_consumer_groups_in_the_group_metrics() -> None:
    membership = ConsumerGroupMembership(ConsumerGroupConfig())
    group = ConsumerGroup("kip848")
    Client("m1").heartbeat(membership, group, 0)
    Client("m2").heartbeat(membership, group, 1)  # m2 waits for m1: Reconciling
    holder = ClassicGroup("kip848", ManualClock())
    holder.offsets[("t", 0)] = OffsetAndMetadata(5)
    classic = ClassicGroup("old", ManualClock())
    registry = CollectorRegistry()
    GroupMetrics(registry, lambda: [holder, classic], lambda topic, index: None,
                 lambda: [group])

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("strata_group_count", state="Empty") == 1  # "old"; not the holder
    assert value("strata_group_count", state="Reconciling") == 1
    assert value("strata_group_count", state="Assigning") == 0
    assert value("strata_group_members", group="kip848", type="consumer") == 2
    assert value("strata_group_members", group="old", type="classic") == 0
    assert value("strata_group_members", group="kip848", type="classic") is None
    assert value("strata_group_epoch", group="kip848") == 2
    assert value("strata_group_epoch", group="old") is None
    assert value("strata_group_committed_offset", group="kip848", topic="t",
                 partition="0") == 5
