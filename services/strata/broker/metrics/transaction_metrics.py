"""The transaction coordinator's metrics: its transactions, their outcome and their markers.

Defined once here (one module per layer), named ``strata_transaction_*``. Scrape-time values
(a ``Collector``) read the coordinator's state — the transactional ids of the
``__transaction_state`` partitions this broker leads and the markers not yet acknowledged:

* ``strata_transaction_count{state}``: transactional ids per state (Kafka's state names;
  every state present, zero included): ``Ongoing`` are the open transactions;
* ``strata_transaction_markers_pending_transactions``: transactions whose markers are being
  written (Kafka's ``numTxnsWithPendingMarkers``), and
  ``strata_transaction_markers_pending_partitions``: their partitions not yet acknowledged;
* ``strata_transaction_marker_unknown_destination_queue_size``: of those partitions, the ones
  without a leader now (Kafka's ``TransactionMarkerChannelManager``
  ``UnknownDestinationQueueSize``);
* ``strata_transaction_marker_log_append_retry_queue_size``: completions (CompleteCommit /
  CompleteAbort) whose append to ``__transaction_state`` failed and waits to be retried
  (Kafka's ``LogAppendRetryQueueSize``);
* ``strata_transaction_partition_load_time_max_seconds`` / ``..._avg_seconds``: how long
  loading a ``__transaction_state`` partition took, over every load of this broker (Kafka's
  ``transaction-coordinator-metrics`` ``partition-load-time-max`` / ``-avg``; 0 before any).

Events the runtime reports (``TransactionRuntime.metrics``, three calls, nothing else on the
request path):

* ``written(write, outcome)`` after every ``__transaction_state`` write:
  ``strata_transaction_completed_total{result}`` (commit / abort) counts each
  CompleteCommit / CompleteAbort appended, coordinator-initiated aborts included;
  ``strata_transaction_timed_out_total`` counts the aborts the coordinator started because a
  transaction outlived its ``transaction.timeout.ms``; a prepare that starts markers starts
  the clock of ``strata_transaction_marker_write_latency_seconds{result}``;
* ``markers_completed(pending)``: every marker of the transaction is acknowledged: the
  histogram observes the time since its PrepareCommit / PrepareAbort was written (EndTxn
  accepted). Markers resent after a partition load have no start and are not observed;
* ``partition_loaded(seconds)``.

Time comes from the runtime's clock (``monotonic_ms``). Event-loop only, like the runtime.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata.broker.transaction.transaction_decision import Purpose, WriteOutcome, WriteTxnLog
from strata.broker.transaction.transaction_markers import PendingCompleteTxn
from strata.broker.transaction.transaction_state import TransactionResult, TransactionState
from strata.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from strata.broker.transaction.transaction_runtime import TransactionRuntime

MARKER_LATENCY_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                                 2.5, 5.0, 10.0, 30.0, 60.0)
MarkerKey = tuple[str, int, int]  # transactional id, producer id, producer epoch


def result_label(result: TransactionResult) -> str:
    return "commit" if result is TransactionResult.COMMIT else "abort"


def _key(pending: PendingCompleteTxn) -> MarkerKey:
    return pending.transactional_id, pending.producer_id, pending.producer_epoch


class TransactionMetrics(Collector):
    def __init__(self, registry: CollectorRegistry, runtime: TransactionRuntime) -> None:
        self._runtime = runtime
        self.completed = Counter("strata_transaction_completed",
                                 "Transactions completed (CompleteCommit / CompleteAbort "
                                 "written), by result.", ["result"], registry=registry)
        self.timed_out = Counter("strata_transaction_timed_out",
                                 "Transactions the coordinator aborted because they outlived "
                                 "their transaction.timeout.ms.", registry=registry)
        self.marker_latency = Histogram(
            "strata_transaction_marker_write_latency_seconds",
            "Time from a transaction's PrepareCommit / PrepareAbort to its last marker "
            "acknowledged, by result.", ["result"], buckets=MARKER_LATENCY_BUCKETS,
            registry=registry)
        for result in TransactionResult:
            self.completed.labels(result_label(result))
            self.marker_latency.labels(result_label(result))
        self._started: dict[MarkerKey, float] = {}
        self._retrying: dict[str, int] = {}  # transactional id -> its __transaction_state index
        self._load_count = 0
        self._load_total_s = 0.0
        self._load_max_s = 0.0
        registry.register(self)

    # ------------------------------------------------------------------ events
    def written(self, write: WriteTxnLog, outcome: WriteOutcome) -> None:
        if outcome.markers is not None:
            self._started[_key(outcome.markers)] = self._runtime.clock.monotonic_ms()
            if write.purpose is Purpose.TIMEOUT_ABORT:
                self.timed_out.inc()
        if write.purpose is not Purpose.COMPLETE:
            return
        if outcome.retry:
            self._retrying[write.transactional_id] = write.txn_partition
            return
        self._retrying.pop(write.transactional_id, None)
        if outcome.error == ErrorCode.none and write.result is not None:
            self.completed.labels(result_label(write.result)).inc()

    def markers_completed(self, pending: PendingCompleteTxn) -> None:
        started = self._started.pop(_key(pending), None)
        if started is not None:
            elapsed_ms = max(self._runtime.clock.monotonic_ms() - started, 0)
            self.marker_latency.labels(result_label(pending.result)).observe(elapsed_ms / 1000)

    def partition_loaded(self, seconds: float) -> None:
        self._load_count += 1
        self._load_total_s += seconds
        self._load_max_s = max(self._load_max_s, seconds)

    # ------------------------------------------------------------------ scrape
    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        runtime = self._runtime
        manager = runtime.state_manager
        owned = manager.owned_partitions
        counts = dict.fromkeys(TransactionState, 0)
        waiting: list[tuple[str, int]] = []
        pending = 0
        for index in owned:
            for tid, md in manager.transactions(index).items():
                counts[md.state] += 1
                partitions = runtime.sender.book.waiting_partitions(tid)
                if partitions:
                    pending += 1
                    waiting += partitions
        by_state = GaugeMetricFamily("strata_transaction_count",
                                     "Transactional ids coordinated by this broker, by state.",
                                     labels=["state"])
        for state, count in counts.items():
            by_state.add_metric([state.state_name], count)
        yield by_state
        yield GaugeMetricFamily("strata_transaction_markers_pending_transactions",
                                "Transactions whose markers are being written.", value=pending)
        yield GaugeMetricFamily("strata_transaction_markers_pending_partitions",
                                "Partitions whose transaction marker is not acknowledged yet.",
                                value=len(waiting))
        unknown = sum(1 for tp in waiting if runtime.sender.leader_of(tp) == -1)
        yield GaugeMetricFamily("strata_transaction_marker_unknown_destination_queue_size",
                                "Pending markers whose partition has no leader now (Kafka's "
                                "UnknownDestinationQueueSize).", value=unknown)
        for tid, index in list(self._retrying.items()):
            if index not in owned:
                del self._retrying[tid]
        yield GaugeMetricFamily("strata_transaction_marker_log_append_retry_queue_size",
                                "Transaction completions waiting to be appended again (Kafka's "
                                "LogAppendRetryQueueSize).", value=len(self._retrying))
        for key in [k for k in self._started if runtime.sender.book.pending(k[0]) is None]:
            del self._started[key]  # cancelled (fenced) or unloaded: never completed here
        average = self._load_total_s / self._load_count if self._load_count else 0.0
        yield GaugeMetricFamily("strata_transaction_partition_load_time_max_seconds",
                                "Longest load of a __transaction_state partition "
                                "(partition-load-time-max).", value=self._load_max_s)
        yield GaugeMetricFamily("strata_transaction_partition_load_time_avg_seconds",
                                "Average load of a __transaction_state partition "
                                "(partition-load-time-avg).", value=average)
