"""``strata_group_rebalances_total{type}`` and ``strata_group_reconciliation_seconds`` driven
through the coordinator: a classic group's generation reaching Stable and a consumer group's
epoch bumps count; a KIP-848 member's time from the bump to its epoch reaching it is observed
on the coordinator's clock; heartbeats that change nothing move nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from strata.broker.broker_state import BrokerState
from strata.broker.group.consumer_protocol import encode_assignment
from strata.broker.metrics.group_metrics import GroupMetrics
from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock
from tests.unit.broker.group_wire import round_trip
from tests.unit.broker.helpers import add_topics, group_broker_state
from tests.unit.group.test_consumer_group_migration import (
    PARTITIONS,
    TOPIC,
    classic_heartbeat,
    classic_join,
    classic_sync,
    consumer_beat,
    consumer_partitions,
)


@dataclass
class Broker:
    state: BrokerState
    clock: ManualClock
    registry: CollectorRegistry

    def value(self, name: str, **labels: str) -> float:
        found = self.registry.get_sample_value(name, labels)
        assert found is not None, name
        return found

    def rebalances(self, kind: str) -> float:
        return self.value("strata_group_rebalances_total", type=kind)

    def reconciliations(self) -> tuple[float, float]:
        """(count, sum in seconds) of the reconciliation histogram."""
        return (self.value("strata_group_reconciliation_seconds_count"),
                self.value("strata_group_reconciliation_seconds_sum"))


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    clock = ManualClock()
    state = group_broker_state(tmp_path, clock, offsets_topic_num_partitions="5")
    await add_topics(state, (TOPIC, PARTITIONS))
    coordinator = state.group_coordinator
    await coordinator.startup(run_timers=False)
    await coordinator.wait_loaded()
    found = await round_trip(state, ApiKey.FIND_COORDINATOR, 2, {"key": "g", "key_type": 0})
    assert found.error_code == 0
    registry = CollectorRegistry()
    coordinator.metrics = GroupMetrics(registry, coordinator.groups,
                                       lambda topic, index: None,
                                       coordinator.consumer_groups.groups)
    try:
        yield Broker(state, clock, registry)
    finally:
        await coordinator.shutdown()
        state.log_manager.shutdown()


async def test_series_exist_at_zero(broker: Broker) -> None:
    assert broker.rebalances("classic") == 0
    assert broker.rebalances("consumer") == 0
    assert broker.reconciliations() == (0, 0)


async def test_a_classic_generation_counts_once_it_is_stable(broker: Broker) -> None:
    joined = await classic_join(broker.state)
    assert joined.error_code == 0 and joined.generation_id == 1
    a = joined.member_id
    assert broker.rebalances("classic") == 0  # CompletingRebalance: not done yet
    synced = await classic_sync(broker.state, a, 1,
                                {a: encode_assignment({TOPIC: range(PARTITIONS)})})
    assert synced.error_code == 0
    assert broker.rebalances("classic") == 1
    assert await classic_heartbeat(broker.state, a, 1) == ErrorCode.none
    follower_sync = await classic_sync(broker.state, a, 1)  # Stable: returns the assignment
    assert follower_sync.error_code == 0
    assert broker.rebalances("classic") == 1
    left = await round_trip(broker.state, ApiKey.LEAVE_GROUP, 3, {
        "group_id": "g", "members": [{"member_id": a, "group_instance_id": None}]})
    assert left.error_code == 0
    assert broker.state.group_coordinator.group("g") is not None
    assert broker.rebalances("classic") == 1  # a generation that ends Empty is no rebalance
    assert (broker.rebalances("consumer"), broker.reconciliations()) == (0, (0, 0))
    assert broker.value("strata_group_members", group="g", type="classic") == 0


async def test_consumer_group_epochs_and_reconciliation_time(broker: Broker) -> None:
    first = await consumer_beat(broker.state, "m1", 0)
    assert (first.error_code, first.member_epoch) == (0, 1)
    assert broker.rebalances("consumer") == 1
    everything = consumer_partitions(first)
    assert len(everything) == PARTITIONS
    again = await consumer_beat(broker.state, "m1", 1, everything)
    assert (again.error_code, again.member_epoch) == (0, 1)
    assert broker.reconciliations() == (0, 0)  # a join reconciles nothing

    broker.clock.advance(1_500)
    second = await consumer_beat(broker.state, "m2", 0)
    assert (second.error_code, second.member_epoch) == (0, 2)
    assert broker.rebalances("consumer") == 2
    broker.clock.advance(200)
    revoking = await consumer_beat(broker.state, "m1", 1, everything)
    assert revoking.member_epoch == 1  # it must give up partitions first
    kept = consumer_partitions(revoking)
    assert 0 < len(kept) < PARTITIONS
    assert broker.reconciliations() == (0, 0)
    broker.clock.advance(300)
    reached = await consumer_beat(broker.state, "m1", 1, kept)
    assert reached.member_epoch == 2
    assert broker.reconciliations() == (1, pytest.approx(0.5))
    steady = await consumer_beat(broker.state, "m1", 2, kept)
    assert steady.member_epoch == 2
    assert broker.reconciliations() == (1, pytest.approx(0.5))
    assert broker.rebalances("consumer") == 2

    left = await consumer_beat(broker.state, "m2", -1)
    assert left.error_code == 0
    assert broker.rebalances("consumer") == 3
    broker.clock.advance(250)
    alone = await consumer_beat(broker.state, "m1", 2, kept)
    assert alone.member_epoch == 3
    assert broker.reconciliations() == (2, pytest.approx(0.75))
    assert broker.rebalances("classic") == 0
    assert broker.value("strata_group_members", group="g", type="consumer") == 1


async def test_an_expired_member_bumps_the_epoch(broker: Broker) -> None:
    first = await consumer_beat(broker.state, "m1", 0)
    await consumer_beat(broker.state, "m2", 0)
    assert broker.rebalances("consumer") == 2
    config = broker.state.group_coordinator.consumer_groups.membership.config
    broker.clock.advance(config.session_timeout_ms - 1)
    await consumer_beat(broker.state, "m1", 1, consumer_partitions(first))
    broker.clock.advance(1)
    broker.state.group_coordinator.tick()  # m2's session is over
    assert broker.rebalances("consumer") == 3
