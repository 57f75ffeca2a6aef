"""The transaction coordinator's metrics (``strata.broker.metrics.transaction_metrics``) on the
runtime of a real broker state and a ``ManualClock``: states, completions by result, the
coordinator's timeout aborts, marker latency, pending markers and the partition load time."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from strata.broker.broker_state import BrokerState
from strata.broker.metrics.transaction_metrics import TransactionMetrics
from strata.storage.clock import ManualClock

from ..helpers import add_topics, group_broker_state
from .test_transaction_runtime import SETTINGS, add, coordinator, end, init, runtime


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    assert found is not None, f"{name}{labels} is not exported"
    return found


async def measured_state(tmp_path: Path) -> tuple[BrokerState, CollectorRegistry]:
    state = group_broker_state(tmp_path, ManualClock(), **SETTINGS)
    await add_topics(state, ("t", 2))
    registry = CollectorRegistry(auto_describe=False)
    state.transaction_coordinator.metrics = TransactionMetrics(registry,
                                                               state.transaction_coordinator)
    return state, registry


async def test_every_series_is_exported_before_any_transaction(tmp_path: Path) -> None:
    state, registry = await measured_state(tmp_path)
    async with coordinator(tmp_path, state):
        for name in ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                     "CompleteAbort", "Dead", "PrepareEpochFence"):
            assert value(registry, "strata_transaction_count", state=name) == 0
        for result in ("commit", "abort"):
            assert value(registry, "strata_transaction_completed_total", result=result) == 0
            assert value(registry, "strata_transaction_marker_write_latency_seconds_count",
                         result=result) == 0
        assert value(registry, "strata_transaction_timed_out_total") == 0
        for name in ("strata_transaction_markers_pending_transactions",
                     "strata_transaction_markers_pending_partitions",
                     "strata_transaction_marker_unknown_destination_queue_size",
                     "strata_transaction_marker_log_append_retry_queue_size"):
            assert value(registry, name) == 0
        # The three __transaction_state partitions were loaded once the coordinator started.
        assert value(registry, "strata_transaction_partition_load_time_max_seconds") >= 0
        assert value(registry, "strata_transaction_partition_load_time_avg_seconds") >= 0


async def test_a_commit_counts_its_states_markers_and_latency(tmp_path: Path) -> None:
    state, registry = await measured_state(tmp_path)
    async with coordinator(tmp_path, state):
        clock = state.clock
        assert isinstance(clock, ManualClock)
        answer = await init(state)
        pid, epoch = answer.producer_id, answer.producer_epoch
        assert value(registry, "strata_transaction_count", state="Empty") == 1
        await add(state, pid, epoch, 0, 1)
        assert value(registry, "strata_transaction_count", state="Ongoing") == 1
        await end(state, pid, epoch, commit=True)
        assert value(registry, "strata_transaction_count", state="PrepareCommit") == 1
        assert value(registry, "strata_transaction_markers_pending_transactions") == 1
        assert value(registry, "strata_transaction_markers_pending_partitions") == 2
        clock.advance(250)
        await runtime(state).sender.pump()
        await runtime(state).settle()
        assert value(registry, "strata_transaction_count", state="CompleteCommit") == 1
        assert value(registry, "strata_transaction_count", state="Ongoing") == 0
        assert value(registry, "strata_transaction_markers_pending_partitions") == 0
        assert value(registry, "strata_transaction_completed_total", result="commit") == 1
        assert value(registry, "strata_transaction_completed_total", result="abort") == 0
        assert value(registry, "strata_transaction_marker_write_latency_seconds_count",
                     result="commit") == 1
        assert value(registry, "strata_transaction_marker_write_latency_seconds_sum",
                     result="commit") == 0.25
        assert value(registry, "strata_transaction_timed_out_total") == 0


async def test_a_timed_out_transaction_counts_as_a_coordinator_abort(tmp_path: Path) -> None:
    state, registry = await measured_state(tmp_path)
    async with coordinator(tmp_path, state):
        clock = state.clock
        assert isinstance(clock, ManualClock)
        answer = await init(state, timeout_ms=5_000)
        await add(state, answer.producer_id, answer.producer_epoch, 0)
        clock.advance(6_000)
        await runtime(state).tick()
        assert value(registry, "strata_transaction_timed_out_total") == 1
        assert value(registry, "strata_transaction_count", state="PrepareAbort") == 1
        await runtime(state).sender.pump()
        await runtime(state).settle()
        assert value(registry, "strata_transaction_completed_total", result="abort") == 1
        assert value(registry, "strata_transaction_marker_write_latency_seconds_count",
                     result="abort") == 1
        assert value(registry, "strata_transaction_count", state="CompleteAbort") == 1
