"""The broker's metrics as Prometheus scrapes them: request, log, replication and group series,
their names and labels, values after real appends, fetches and ISR changes."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from strata.broker.handlers import fetch, produce
from strata.broker.metrics.broker_metrics import BrokerMetrics
from strata.broker.network.request_context import Response
from strata.broker.replication.partition import FetchIsolation
from strata.broker.replication.partition_results import PartitionFetchInfo
from strata.protocol import ApiKey, build_response
from strata.storage.clock import ManualClock

from .helpers import batch, broker_state, context, now_ms, replica_manager, request

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(metrics: BrokerMetrics) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def tp_labels(topic: str, partition: int, **extra: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"topic": topic, "partition": str(partition), **extra}.items()))


async def test_log_replication_and_request_series(tmp_path: Path) -> None:
    clock = ManualClock(now_ms())
    rm = replica_manager(tmp_path, ("t", 2), clock=clock)
    metrics = BrokerMetrics([ApiKey.PRODUCE, ApiKey.FETCH], rm.partitions, rm.get_partition,
                            list)
    rm.log_metrics, rm.replication_metrics = metrics.log, metrics.replication
    fresh = scrape(metrics)
    assert fresh[("strata_request_total", (("api", "Produce"),))] == 0  # initialised at zero
    assert fresh[("strata_replication_partitions", ())] == 2

    one = batch(b"x" * 100)
    for _ in range(3):
        (result,) = await rm.append_records([(("t", 0), one)], 1, 1000)
        assert result.error_code == 0
    await rm.fetch_messages([(("t", 0), PartitionFetchInfo(0, 1 << 20))], max_wait_ms=0,
                            min_bytes=1, max_bytes=1 << 20,
                            isolation=FetchIsolation.HIGH_WATERMARK)
    part = rm.get_partition("t", 1)
    assert part is not None
    part.make_leader(1, replicas=(1, 2), isr=frozenset((1, 2)))
    clock.advance(60_000)
    assert rm.maybe_shrink_isr(30_000) == 1  # follower 2 never fetched: shrunk out
    response = build_response(ApiKey.PRODUCE, 8, {"throttle_time_ms": 0, "responses": [
        {"name": "t", "partition_responses": [{"index": 0, "error_code": 6, "base_offset": -1,
                                                "log_append_time_ms": -1,
                                                "log_start_offset": -1, "record_errors": [],
                                                "error_message": None}]}]})
    metrics.requests.observe(ApiKey.PRODUCE, 0.002, response)

    got = scrape(metrics)
    assert got[("strata_log_appended_records_total", tp_labels("t", 0))] == 3
    assert got[("strata_log_appended_bytes_total", tp_labels("t", 0))] == 3 * len(one)
    assert got[("strata_log_read_bytes_total", tp_labels("t", 0))] == 3 * len(one)
    assert got[("strata_log_end_offset", tp_labels("t", 0))] == 3
    assert got[("strata_log_segments", tp_labels("t", 0))] == 1
    assert got[("strata_log_size_bytes", tp_labels("t", 0))] == 3 * len(one)
    assert got[("strata_replication_high_watermark", tp_labels("t", 0))] == 3
    assert got[("strata_replication_isr_shrinks_total", tp_labels("t", 1))] == 1
    assert got[("strata_replication_under_replicated_partitions", ())] == 1  # t-1: ISR {1}
    assert got[("strata_replication_leaders", ())] == 2
    assert got[("strata_replication_follower_lag_records", tp_labels("t", 1, replica="2"))] == 0
    assert got[("strata_request_total", (("api", "Produce"),))] == 1
    assert got[("strata_request_errors_total",
                (("api", "Produce"), ("error", "NOT_LEADER_OR_FOLLOWER")))] == 1
    assert got[("strata_request_latency_seconds_count", (("api", "Produce"),))] == 1


async def test_errors_of_pre_encoded_produce_and_fetch_responses_are_counted(
        tmp_path: Path) -> None:
    """Produce and Fetch answer with hand-encoded bytes: their handlers list the partition error
    codes beside them, and the request metrics count those (Kafka's ErrorsPerSec)."""
    state = broker_state(tmp_path, ("t", 1))
    rm = state.replica_manager
    metrics = BrokerMetrics([ApiKey.PRODUCE, ApiKey.FETCH], rm.partitions, rm.get_partition,
                            list)
    produce_request = request(ApiKey.PRODUCE, 8, transactional_id=None, acks=1, timeout_ms=1000,
                              topic_data=[{"name": "t", "partition_data": [
                                  {"index": 0, "records": batch(b"a")},
                                  {"index": 7, "records": batch(b"b")}]}])
    produced = await produce.handle(context(state, ApiKey.PRODUCE, 8), produce_request)
    assert isinstance(produced, Response)
    metrics.requests.observe(ApiKey.PRODUCE, 0.001, produced)
    fetch_request = request(ApiKey.FETCH, 11, replica_id=-1, max_wait_ms=0, min_bytes=1,
                            max_bytes=1 << 20, isolation_level=0, session_id=0,
                            session_epoch=-1, rack_id="", forgotten_topics_data=[],
                            topics=[{"topic": "t", "partitions": [
                                {"partition": 0, "current_leader_epoch": -1,
                                 "fetch_offset": 5, "log_start_offset": -1,
                                 "partition_max_bytes": 1 << 20}]}])
    fetched = await fetch.handle(context(state, ApiKey.FETCH, 11), fetch_request)
    metrics.requests.observe(ApiKey.FETCH, 0.001, fetched)

    got = scrape(metrics)
    assert got[("strata_request_errors_total",
                (("api", "Produce"), ("error", "UNKNOWN_TOPIC_OR_PARTITION")))] == 1
    assert got[("strata_request_errors_total",
                (("api", "Fetch"), ("error", "OFFSET_OUT_OF_RANGE")))] == 1
