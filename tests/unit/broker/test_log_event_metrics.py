"""The metrics fed by the log manager's background work and computed from broker state at scrape
time: flush latency, retention deletions, cleaner rounds, recovery time, purgatory sizes and
follower lag in time — with a real LogManager, ReplicaManager and registry."""

from __future__ import annotations

from pathlib import Path

from strata.broker.metrics.broker_metrics import BrokerMetrics
from strata.protocol import ApiKey
from strata.storage.cleaner import CleanerStats
from strata.storage.clock import ManualClock

from .helpers import batch, now_ms, replica_manager
from .test_metrics import scrape, tp_labels


async def test_log_manager_events_reach_the_registry(tmp_path: Path) -> None:
    clock = ManualClock(now_ms())
    rm = replica_manager(tmp_path, ("t", 2), clock=clock, log_flush_interval_messages="1",
                         log_segment_bytes="1024", log_retention_bytes="1500")
    metrics = BrokerMetrics([ApiKey.PRODUCE], rm.partitions, rm.get_partition, list)
    rm.log_metrics, rm.replication_metrics = metrics.log, metrics.replication
    assert rm.log_manager.events is metrics.log
    fresh = scrape(metrics)
    assert fresh[("strata_log_flush_latency_seconds_count", ())] == 0
    assert fresh[("strata_log_retention_deleted_segments_total", tp_labels("t", 0))] == 0
    assert fresh[("strata_log_retention_deleted_bytes_total", tp_labels("t", 1))] == 0
    assert fresh[("strata_log_cleaner_runs_total", ())] == 0
    assert fresh[("strata_log_recovery_seconds", ())] >= 0
    assert fresh[("strata_request_purgatory_size", (("purgatory", "Produce"),))] == 0
    assert fresh[("strata_request_purgatory_size", (("purgatory", "Fetch"),))] == 0

    for _ in range(4):  # ~600-byte batches into 1 KiB segments: a segment each
        (result,) = await rm.append_records([(("t", 0), batch(b"x" * 500))], 1, 1000)
        assert result.error_code == 0
    assert rm.log_manager.flush_dirty_logs() == 1
    assert rm.log_manager.cleanup_logs() >= 1
    rm.log_manager.clean_one()  # cleaner disabled or nothing to compact: no round counted
    metrics.log.cleaned(CleanerStats(bytes_read=4096, messages_read=10, messages_written=4))

    after = scrape(metrics)
    assert after[("strata_log_flush_latency_seconds_count", ())] == 1
    assert after[("strata_log_flush_latency_seconds_sum", ())] > 0
    deleted = after[("strata_log_retention_deleted_segments_total", tp_labels("t", 0))]
    assert deleted >= 1
    assert after[("strata_log_retention_deleted_bytes_total", tp_labels("t", 0))] >= 500 * deleted
    assert after[("strata_log_retention_deleted_segments_total", tp_labels("t", 1))] == 0
    assert after[("strata_log_cleaner_runs_total", ())] == 1
    assert after[("strata_log_cleaner_cleaned_bytes_total", ())] == 4096
    assert after[("strata_log_cleaner_removed_records_total", ())] == 6


def test_follower_lag_in_time(tmp_path: Path) -> None:
    clock = ManualClock(now_ms())
    rm = replica_manager(tmp_path, ("t", 1), clock=clock)
    metrics = BrokerMetrics([], rm.partitions, rm.get_partition, list)
    part = rm.get_partition("t", 0)
    assert part is not None
    part.make_leader(1, replicas=(1, 2), isr=frozenset((1, 2)), now_ms=clock.milliseconds())
    labels = tp_labels("t", 0, replica="2")
    assert scrape(metrics)[("strata_replication_follower_lag_seconds", labels)] == 0
    part.log.append_as_leader(batch(b"x"), leader_epoch=1)
    clock.advance(5_000)
    assert scrape(metrics)[("strata_replication_follower_lag_seconds", labels)] == 5.0
    rm.update_follower_fetch_state(part, 2, part.log_end_offset)  # caught up again
    assert scrape(metrics)[("strata_replication_follower_lag_seconds", labels)] == 0


def test_series_left_out_without_a_replica_manager(tmp_path: Path) -> None:
    rm = replica_manager(tmp_path, ("t", 1))
    metrics = BrokerMetrics([], lambda: rm.partitions(), rm.get_partition, list)
    names = {name for name, _ in scrape(metrics)}
    assert "strata_log_recovery_seconds" not in names
    assert "strata_request_purgatory_size" not in names
    assert "strata_log_flush_latency_seconds_count" in names  # defined; fed by no manager
