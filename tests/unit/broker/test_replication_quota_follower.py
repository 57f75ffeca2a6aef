"""The follower side of replication throttles (KIP-73) against a leader served in process: a
follower over its ``follower.replication.throttled.rate`` leaves a throttled partition it is
behind on out of its fetches, and catches up once the throttle is removed."""

from __future__ import annotations

from pathlib import Path

from strata.broker.replication.replica_manager import ReplicaManager
from strata.broker.server import KafkaServer
from strata.storage.clock import SystemClock

from .helpers import log_manager
from .test_replica_fetcher import append, follow, hosted, lead, leader, log_bytes, until

__all__ = ["leader"]  # the fixture, shared with the fetcher's tests


async def test_an_out_of_sync_follower_over_its_rate_leaves_the_partition_out(
        leader: KafkaServer, tmp_path: Path) -> None:
    leader_rm = lead(leader, 0)
    assert await append(leader_rm, 1, b"a", b"b", b"c") == [0, 0, 0]
    follower = ReplicaManager(log_manager(tmp_path / "f"), SystemClock(), 2)
    quota = follower.replication_quotas.follower
    follower.replication_quotas.configure(
        {"follower.replication.throttled.rate": "100"},
        {"t": {"follower.replication.throttled.replicas": "0:2"}}, 0)
    quota.record(10_000, follower.clock.milliseconds())  # over 100 bytes/s from the start
    fetchers = await follow(follower, leader, 0)
    try:
        await until(lambda: quota.throttled_count >= 2, "the fetcher to hold the partition back")
        assert hosted(follower).log_end_offset == 0  # never fetched
        follower.replication_quotas.configure({}, {"t": {}}, 0)  # the throttle removed
        await until(lambda: hosted(follower).log_end_offset == 3, "the follower to catch up")
        assert log_bytes(hosted(follower)) == log_bytes(hosted(leader_rm))
        assert quota.recorded_bytes == 10_000  # no longer throttled: nothing more recorded
    finally:
        await fetchers.shutdown()
