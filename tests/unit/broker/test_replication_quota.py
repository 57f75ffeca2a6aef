"""Replication throttles (KIP-73): the rate math, the throttled-replicas lists and their
validation, the configs that set both sides, and the leader holding back an out-of-sync
follower of a throttled partition while in-sync followers, the HW and acks=all are unchanged."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from strata.broker.dynamic_broker_config import InvalidDynamicConfig, check_dynamic_broker_configs
from strata.broker.replication.partition import FetchIsolation
from strata.broker.replication.partition_results import PartitionFetchInfo
from strata.broker.replication.replica_manager import ReplicaManager
from strata.broker.replication.replication_quota import (
    ALL_REPLICAS,
    LONG_MAX,
    InvalidThrottledReplicas,
    ReplicationQuota,
    ReplicationQuotas,
    SimpleRate,
    check_throttled_replicas,
    throttled_partitions,
)
from strata.storage.clock import ManualClock
from strata.storage.errors import InvalidConfigError
from strata.storage.log_config import LogConfig

from .helpers import batch, log_manager, now_ms

TP = ("t", 0)


# ------------------------------------------------------------------------ rate
def test_simple_rate_is_measured_over_at_least_one_window() -> None:
    rate = SimpleRate(samples=11, window_ms=1_000, now_ms=0)
    rate.record(1_000, now_ms=10)
    assert rate.measure(now_ms=100) == 1_000.0  # a young measurement counts one full window
    rate.record(1_000, now_ms=2_500)
    assert rate.measure(now_ms=4_000) == 500.0  # 2,000 bytes since the oldest sample began
    # Samples older than samples * window no longer count.
    assert rate.measure(now_ms=20_000) == 0.0


def test_the_rate_starts_at_its_first_use_not_with_the_broker() -> None:
    quota = ReplicationQuota("LeaderReplication")
    quota.update_quota(1_000)
    assert not quota.is_quota_exceeded(now_ms=5_000)  # first use: the measurement starts
    quota.record(1_500, now_ms=5_000)
    assert quota.is_quota_exceeded(now_ms=5_100)  # 1,500 bytes over 1 s, not over 5 s


def test_quota_is_exceeded_only_above_the_bound() -> None:
    quota = ReplicationQuota("LeaderReplication")
    quota.record(5_000_000, now_ms=0)
    assert not quota.is_quota_exceeded(now_ms=10)  # unbounded (Long.MAX_VALUE)
    quota.update_quota(5_000_000)
    assert not quota.is_quota_exceeded(now_ms=10)  # at the bound: not over it
    quota.record(1, now_ms=20)
    assert quota.is_quota_exceeded(now_ms=30)
    assert not quota.is_quota_exceeded(now_ms=5_001)  # 5,000,001 bytes over > 1 s


def test_only_out_of_sync_replicas_of_throttled_partitions_are_held_over_the_bound() -> None:
    quota = ReplicationQuota("FollowerReplication")
    quota.update_quota(100)
    quota.mark_throttled("t", frozenset({0}))
    quota.record(1_000, now_ms=0)
    assert quota.should_throttle("t", 0, in_sync=False, now_ms=1)
    assert not quota.should_throttle("t", 0, in_sync=True, now_ms=1)
    assert not quota.should_throttle("t", 1, in_sync=False, now_ms=1)
    assert not quota.should_throttle("u", 0, in_sync=False, now_ms=1)
    assert quota.throttled_count == 1
    quota.mark_throttled("u", ALL_REPLICAS)
    assert quota.is_throttled("u", 7)
    quota.remove_throttle("u")
    assert not quota.is_throttled("u", 7)


# --------------------------------------------------------------- replica lists
@pytest.mark.parametrize("value", ["", "*", " * ", "0:1", "0:1,1:2 , 2:3", "0:1,"])
def test_valid_throttled_replicas(value: str) -> None:
    assert check_throttled_replicas("leader.replication.throttled.replicas", value) == value


@pytest.mark.parametrize("value", ["0", "a:1", "0:1,*", "0:-1", "0:1:2", "**"])
def test_invalid_throttled_replicas_get_kafkas_message(value: str) -> None:
    with pytest.raises(InvalidThrottledReplicas) as caught:
        check_throttled_replicas("follower.replication.throttled.replicas", value)
    assert str(caught.value) == (
        f"Invalid value {value} for configuration follower.replication.throttled.replicas: "
        "follower.replication.throttled.replicas must be the literal '*' or a list of "
        "replicas in the following format: [partitionId]:[brokerId],[partitionId]:"
        "[brokerId],...")


def test_only_the_entries_naming_this_broker_count() -> None:
    assert throttled_partitions("0:1,1:2,2:1", broker_id=1) == {0, 2}
    assert throttled_partitions("0:1,1:2", broker_id=3) == frozenset()
    assert throttled_partitions("*", broker_id=3) is ALL_REPLICAS


def test_topic_configs_are_validated_as_kafka_does() -> None:
    assert LogConfig.from_props({"leader.replication.throttled.replicas": "0:1,1:2"})
    with pytest.raises(InvalidConfigError, match="must be the literal"):
        LogConfig.from_props({"follower.replication.throttled.replicas": "0-1"})
    # Reported with Kafka's default "".
    assert LogConfig().to_props()["leader.replication.throttled.replicas"] == ""


def test_rates_are_dynamic_broker_configs_at_least_zero() -> None:
    check_dynamic_broker_configs({"leader.replication.throttled.rate": "1048576",
                                  "follower.replication.throttled.rate": "0"}, per_broker=True)
    check_dynamic_broker_configs({"leader.replication.throttled.rate": "1"}, per_broker=False)
    with pytest.raises(InvalidDynamicConfig, match="Value must be at least 0"):
        check_dynamic_broker_configs({"leader.replication.throttled.rate": "-1"},
                                     per_broker=True)
    with pytest.raises(InvalidDynamicConfig, match="Not a valid long"):
        check_dynamic_broker_configs({"follower.replication.throttled.rate": "fast"},
                                     per_broker=True)


def test_configure_sets_both_sides_and_forgets_removed_throttles() -> None:
    quotas = ReplicationQuotas(broker_id=2)
    quotas.configure({"leader.replication.throttled.rate": "1000",
                      "replication.quota.window.num": "3",
                      "replication.quota.window.size.seconds": "2"},
                     {"t": {"leader.replication.throttled.replicas": "0:2,1:3",
                            "follower.replication.throttled.replicas": "*"},
                      "u": {"retention.ms": "1"}}, now_ms=0)
    assert quotas.leader.bound == 1000 and quotas.follower.bound == LONG_MAX
    assert (quotas.leader.samples, quotas.leader.window_ms) == (3, 2_000)
    assert quotas.leader.is_throttled("t", 0) and not quotas.leader.is_throttled("t", 1)
    assert quotas.follower.is_throttled("t", 5) and not quotas.follower.is_throttled("u", 0)
    quotas.configure({}, {"t": {}}, now_ms=10)
    assert quotas.leader.bound == LONG_MAX
    assert not quotas.leader.throttled_topics() and not quotas.follower.throttled_topics()


# ------------------------------------------------------------- leader side
@pytest.fixture
def rm(tmp_path: Path) -> ReplicaManager:
    """Broker 1 leads t-0 with replicas 1, 2, 3; 2 is in the ISR, 3 (a new replica) is not;
    t-0 is throttled on the leader side at 100 bytes/s."""
    clock = ManualClock(now_ms())
    manager = ReplicaManager(log_manager(tmp_path, clock), clock, 1)
    manager.make_leader("t", 0, uuid.UUID(int=7), 0, replicas=(1, 2, 3),
                        isr=frozenset((1, 2)))
    manager.replication_quotas.configure(
        {"leader.replication.throttled.rate": "100"},
        {"t": {"leader.replication.throttled.replicas": "0:1"}}, clock.milliseconds())
    return manager


async def follower_fetch(rm: ReplicaManager, replica: int, offset: int) -> tuple[int, int]:
    (result,) = await rm.fetch_messages([(TP, PartitionFetchInfo(offset, 1 << 20))],
                                        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                        isolation=FetchIsolation.LOG_END, replica_id=replica)
    assert result.error_code == 0, result
    return result.size, result.high_watermark


async def test_the_leader_holds_back_only_an_out_of_sync_follower_over_the_rate(
        rm: ReplicaManager) -> None:
    for _ in range(3):
        (appended,) = await rm.append_records([(TP, batch(b"v" * 200))], 1, 1_000)
        assert appended.error_code == 0
    quota = rm.replication_quotas.leader
    isr_size, _ = await follower_fetch(rm, 2, 0)  # in the ISR: served
    _, hw = await follower_fetch(rm, 2, 3)  # the HW moves with the ISR as before
    assert hw == 3 and quota.recorded_bytes == isr_size  # in-sync bytes count too
    quota.set_window(11, 2_000)  # start measuring afresh
    new_size, _ = await follower_fetch(rm, 3, 0)  # nothing recorded yet: served
    partition = rm.get_partition(*TP)
    assert partition is not None and 3 not in partition.isr
    assert new_size == isr_size
    held, _ = await follower_fetch(rm, 3, 0)  # now over 100 bytes/s: held back
    assert held == 0 and quota.throttled_count == 1
    again, _ = await follower_fetch(rm, 2, 0)  # in the ISR: never held back, even over it
    assert again == isr_size
    # A consumer is not a follower: never throttled by replication quotas.
    (consumed,) = await rm.fetch_messages([(TP, PartitionFetchInfo(0, 1 << 20))],
                                          max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                          isolation=FetchIsolation.HIGH_WATERMARK)
    assert consumed.size == new_size
    rm.replication_quotas.configure({}, {"t": {}}, 0)  # throttle removed: served again
    size, _ = await follower_fetch(rm, 3, 0)
    assert size == new_size
