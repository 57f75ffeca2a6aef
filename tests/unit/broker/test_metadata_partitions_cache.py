"""Metadata's built partitions are reused while the cluster image holds the same registrations
and live brokers, and rebuilt as soon as either changes (an ISR shrink, a dead broker)."""

from __future__ import annotations

import uuid
from types import MappingProxyType, SimpleNamespace
from typing import Any

from strata.broker.cluster.image import BrokerRegistration, ClusterImage, PartitionRegistration
from strata.broker.handlers.metadata import _built_partitions
from strata.broker.topic_store import TopicRecord
from strata.protocol.error_codes import ErrorCode

TOPIC_ID = uuid.UUID(int=11)
RECORD = TopicRecord("orders", TOPIC_ID, 3, (0, 0))


def state_with(partitions: dict[tuple[str, int], PartitionRegistration],
               brokers: tuple[int, ...] = (0, 1, 2)) -> Any:
    image = ClusterImage(
        1, MappingProxyType({n: BrokerRegistration(n, "h", 9092 + n) for n in brokers}),
        partitions=MappingProxyType(partitions))
    return SimpleNamespace(cluster=SimpleNamespace(image=image))


def test_reused_while_unchanged_rebuilt_on_any_change() -> None:
    whole = PartitionRegistration(TOPIC_ID, (0, 1, 2), (0, 1, 2), 0)
    parts = {("orders", 0): whole, ("orders", 1): PartitionRegistration(TOPIC_ID, (1, 2, 0),
                                                                        (1, 2, 0), 1)}
    first = _built_partitions(state_with(parts), RECORD, 12)
    assert first is not None and [p.leader_id for p in first] == [0, 1]
    again = _built_partitions(state_with(dict(parts)), RECORD, 12)  # a new, equal image
    assert again is first
    shrunk = {**parts, ("orders", 0): PartitionRegistration(TOPIC_ID, (0, 1, 2), (0, 1), 0,
                                                            partition_epoch=1)}
    after_shrink = _built_partitions(state_with(shrunk), RECORD, 12)
    assert after_shrink is not None and after_shrink is not first
    assert list(after_shrink[0].isr_nodes) == [0, 1]
    broker_0_dead = _built_partitions(state_with(shrunk, brokers=(1, 2)), RECORD, 12)
    assert broker_0_dead is not None
    assert broker_0_dead[0].leader_id == -1
    assert broker_0_dead[0].error_code == ErrorCode.leader_not_available
    assert list(broker_0_dead[0].offline_replicas) == [0]
    older = _built_partitions(state_with(shrunk, brokers=(1, 2)), RECORD, 5)  # per version
    assert older is not None and type(older[0]) is not type(broker_0_dead[0])


def test_single_broker_mode_is_not_cached() -> None:
    assert _built_partitions(SimpleNamespace(cluster=None), RECORD, 12) is None
