"""``TransactionRuntime``: the transaction coordinator's I/O shell: topic, loading, appends, timers.

Kafka's ``TransactionCoordinator`` / ``TransactionStateManager`` I/O around the pure core of this
package (``TransactionCoordinator``, ``TransactionStateManager``, ``TransactionMarkerBook``).
Owns:

* ``__transaction_state``: created on first use (FindCoordinator key type TRANSACTION) with
  ``transaction.state.log.num.partitions`` partitions, ``transaction.state.log.replication.factor``
  and Kafka's enforced topic configs (``transaction_topic_configs``), the replication factor and
  ``min.insync.replicas`` capped at the live brokers by ``create_topic`` (so a one-broker
  cluster can write it);
* ownership: ``reconcile`` compares each partition's local leadership (leader epoch = coordinator
  epoch) with what is loaded, loads a partition newly led here (replay from the log start to the
  log end; transactions found in PrepareCommit / PrepareAbort get their markers sent again) and
  unloads one no longer led (its pending markers dropped). It runs before every request and on
  every timer round, so neither the single-broker start nor the cluster's metadata publisher has
  to call it;
* ``run``: a coordinator decision, the ``__transaction_state`` append it asks for (acks=all
  through ``ReplicaManager.append_records``), ``complete_write`` exactly once, and the
  completion of what follows (markers handed to the ``TransactionMarkerSender``); returns the
  ``Answer`` for the client;
* the producer id reserve, topped up from the broker's ``ProducerIdManager`` before each
  decision that may take an id;
* the timers (``tick``): every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``
  the abort of timed-out transactions, every
  ``transaction.remove.expired.transaction.cleanup.interval.ms`` the expiration of idle
  transactional ids (tombstones). Time comes from the injected clock.

Event-loop only: the pure core is touched only from the loop, between awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Final

from strata.broker.config import BrokerConfig
from strata.broker.producer_id_manager import ProducerIdManager
from strata.broker.replication.replica_manager import ReplicaManager
from strata.broker.topic_store import TopicStore
from strata.broker.transaction.producer_id_reserve import ProducerIdReserve
from strata.broker.transaction.transaction_config import TransactionConfig
from strata.broker.transaction.transaction_coordinator import TransactionCoordinator
from strata.broker.transaction.transaction_decision import Answer, Decision, WriteTxnLog
from strata.broker.transaction.transaction_loader import replay
from strata.broker.transaction.transaction_log import (
    TRANSACTION_STATE_TOPIC,
    TransactionLogError,
    transaction_topic_configs,
)
from strata.broker.transaction.transaction_marker_sender import TransactionMarkerSender
from strata.broker.transaction.transaction_markers import PendingCompleteTxn
from strata.broker.transaction.transaction_state_manager import TransactionStateManager
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.error_codes import ErrorCode
from strata.storage import record_batch as rb
from strata.storage.clock import Clock
from strata.storage.errors import OffsetOutOfRangeError
from strata.storage.records import RecordSpec, build_batch, iter_records

if TYPE_CHECKING:
    from strata.broker.metrics.transaction_metrics import TransactionMetrics

logger = logging.getLogger(__name__)

CreateTopic = Callable[[str, int, int, Mapping[str, str]], Awaitable[None]]
LOAD_BUFFER_BYTES: Final = 5 * 1024 * 1024  # Kafka's transaction.state.log.load.buffer.size
APPEND_TIMEOUT_MS: Final = 5_000  # Kafka's transaction.state.log... request.timeout.ms
COMPLETION_RETRY_MS: Final = 100
CONCURRENT_WAIT_MS: Final = 500
"""How long a request answered CONCURRENT_TRANSACTIONS (the id's previous transaction is
still writing its markers) waits for the id's next state change before it is answered so."""
SERVED_TRANSACTION_VERSION: Final = TransactionVersion.TV_2
"""The highest ``transaction.version`` this broker runs: transactions v2 (KIP-890 part 2), the
partition leaders adding partitions on a transactional produce (``produce_verification``) and
the group coordinator on a TxnOffsetCommit."""


def served_transaction_config(config: BrokerConfig) -> TransactionConfig:
    """``TransactionConfig`` of the broker settings, ``transaction.version`` capped at
    ``SERVED_TRANSACTION_VERSION``."""
    txn = TransactionConfig.from_broker_config(config)
    return dataclasses.replace(
        txn, transaction_version=min(txn.transaction_version, SERVED_TRANSACTION_VERSION))


class TransactionRuntime:
    """See the module docstring. ``await startup()`` to serve; ``await shutdown()`` to stop."""

    def __init__(self, *, config: TransactionConfig, clock: Clock,
                 replica_manager: ReplicaManager, topic_store: TopicStore,
                 create_topic: CreateTopic, producer_id_manager: ProducerIdManager,
                 sender: TransactionMarkerSender) -> None:
        self.config = config
        self.clock = clock
        self.replica_manager = replica_manager
        self.topic_store = topic_store
        self._create_topic = create_topic
        self._producer_ids = producer_id_manager
        self.reserve = ProducerIdReserve()
        self.state_manager = TransactionStateManager(config)
        self.coordinator = TransactionCoordinator(self.state_manager, self.reserve)
        self.sender = sender
        sender.on_completed = self._on_markers_completed
        # In a cluster: the leader of a partition as the metadata has it.
        self.leader_lookup: Callable[[str, int], int | None] | None = None
        self.metrics: TransactionMetrics | None = None  # set by the broker's metrics wiring
        self._owned: dict[int, int] = {}  # partition -> coordinator epoch (loaded or loading)
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._topic_lock = asyncio.Lock()
        self._active = False
        self._timer_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._changed: dict[str, asyncio.Event] = {}  # id -> set at its next log write
        now = clock.monotonic_ms()
        self._next_abort_ms = now + config.abort_timed_out_transactions_interval_ms
        self._next_expire_ms = now + config.remove_expired_transactional_ids_interval_ms

    # ================================================================ lifecycle
    async def startup(self, *, run_timers: bool = True) -> None:
        """Serve. With ``run_timers`` a task runs ``tick`` and the marker sender runs its
        send loop; without (tests), call ``tick()`` and ``sender.pump()`` by hand."""
        self._active = True
        self.reconcile()
        if run_timers:
            self.sender.start()
        if run_timers and self._timer_task is None:
            self._timer_task = asyncio.get_running_loop().create_task(
                self._run_timers(), name="strata-transaction-coordinator-timers")

    async def shutdown(self) -> None:
        self._active = False
        tasks = [*self._loading.values(), *self._background]
        if self._timer_task is not None:
            tasks.append(self._timer_task)
            self._timer_task = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for index in sorted(self._owned):
            self._resign(index)
        await self.sender.close()

    async def wait_loaded(self) -> None:
        while self._loading:
            await asyncio.gather(*self._loading.values(), return_exceptions=True)

    # =================================================== __transaction_state topic
    def partition_count(self) -> int:
        record = self.topic_store.get(TRANSACTION_STATE_TOPIC)
        return record.partitions if record is not None else self.config.num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return self.state_manager.partition_for(transactional_id)

    def coordinator_node(self, transactional_id: str) -> int | None:
        """The leader of the id's ``__transaction_state`` partition (None: no leader)."""
        index = self.partition_for(transactional_id)
        if self.leader_lookup is not None:
            return self.leader_lookup(TRANSACTION_STATE_TOPIC, index)
        hosted = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, index)
        if hosted is None or hosted.log.offline:
            return None
        return hosted.leader_id

    async def ensure_topic(self) -> ErrorCode:
        """Create ``__transaction_state`` if it does not exist (COORDINATOR_NOT_AVAILABLE if
        that fails)."""
        if self.topic_store.get(TRANSACTION_STATE_TOPIC) is None:
            async with self._topic_lock:
                if self.topic_store.get(TRANSACTION_STATE_TOPIC) is None:
                    error = await self._create()
                    if error != ErrorCode.none:
                        return error
        self.reconcile()
        return ErrorCode.none

    async def _create(self) -> ErrorCode:
        config = self.config
        configs = transaction_topic_configs(config.min_insync_replicas, config.segment_bytes)
        try:
            await self._create_topic(TRANSACTION_STATE_TOPIC, config.num_partitions,
                                     config.replication_factor, configs)
        except Exception:
            logger.exception("cannot create %s", TRANSACTION_STATE_TOPIC)
            if self.topic_store.get(TRANSACTION_STATE_TOPIC) is None:
                return ErrorCode.coordinator_not_available
        else:
            logger.info("created %s with %d partitions", TRANSACTION_STATE_TOPIC,
                        config.num_partitions)
        return ErrorCode.none

    # ================================================================ ownership
    def reconcile(self) -> None:
        """Load the partitions led here and not loaded at their leader epoch; unload the
        others (see the module docstring)."""
        if not self._active:
            return
        record = self.topic_store.get(TRANSACTION_STATE_TOPIC)
        count = record.partitions if record is not None else 0
        for index in range(count):
            hosted = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, index)
            leading = hosted is not None and hosted.is_leader and not hosted.log.offline
            epoch = hosted.leader_epoch if hosted is not None and leading else None
            owned = self._owned.get(index)
            if owned is not None and owned != epoch:
                self._resign(index)
            if epoch is not None and index not in self._owned:
                self._elect(index, epoch)
        for index in [i for i in self._owned if i >= count]:
            self._resign(index)

    def _elect(self, index: int, epoch: int) -> None:
        self._owned[index] = epoch
        self.state_manager.begin_loading(index, epoch)
        self._loading[index] = asyncio.get_running_loop().create_task(
            self._load(index, epoch), name=f"strata-load-{TRANSACTION_STATE_TOPIC}-{index}")

    async def _load(self, index: int, epoch: int) -> None:
        started_ms = self.clock.monotonic_ms()
        try:
            records = [record async for record in self._read(index)]
            loaded = replay(records)
        except Exception:  # TransactionLogError, a storage error: the partition stays unloaded
            logger.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, index)
            self._loading.pop(index, None)
            self._owned.pop(index, None)
            self.state_manager.unload(index)
            return
        if self._loading.get(index) is not asyncio.current_task():
            return
        del self._loading[index]
        pending = self.state_manager.complete_loading(index, epoch, loaded,
                                                      self.clock.milliseconds())
        if pending is None:
            return
        if self.metrics is not None:
            self.metrics.partition_loaded((self.clock.monotonic_ms() - started_ms) / 1000)
        logger.log(logging.INFO if loaded else logging.DEBUG,
                   "loaded %d transactional ids of %s-%d at coordinator epoch %d (%d to complete)",
                   len(loaded), TRANSACTION_STATE_TOPIC, index, epoch, len(pending))
        for txn in pending:
            self._add_markers(txn)

    def _resign(self, index: int) -> None:
        task = self._loading.pop(index, None)
        if task is not None:
            task.cancel()
        epoch = self._owned.pop(index, None)
        self.state_manager.unload(index, epoch)
        self.sender.book.remove_for_txn_partition(index)
        logger.info("unloaded %s-%d", TRANSACTION_STATE_TOPIC, index)

    async def _read(self, index: int) -> AsyncIterator[tuple[bytes, bytes | None]]:
        """Every data record of the partition, log start to log end (a new leader's log is the
        partition's truth)."""
        hosted = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, index)
        if hosted is None:
            return
        log = hosted.log
        offset = log.log_start_offset
        while True:
            end = log.log_end_offset
            if offset >= end:
                return
            try:
                data = log.read(offset, LOAD_BUFFER_BYTES, end, True).read_bytes()
            except OffsetOutOfRangeError:
                offset = log.log_start_offset
                continue
            pos = 0
            while len(data) - pos >= rb.HEADER_SIZE:
                header = rb.parse_header(data, pos)
                if len(data) - pos < header.size:
                    break
                if not header.is_control:
                    for record in iter_records(data, pos, verify_crc=False):
                        if record.key is not None:
                            yield record.key, record.value
                offset = header.next_offset
                pos += header.size
            if pos == 0:
                raise TransactionLogError(
                    f"cannot read {TRANSACTION_STATE_TOPIC}-{index} at offset {offset}")
            await asyncio.sleep(0)

    # ================================================================ requests
    async def run(self, decide: Callable[[], Decision],
                  transactional_id: str | None = None) -> Answer:
        """Take the coordinator's decision, write what it asks for, answer.

        With ``transactional_id``: a CONCURRENT_TRANSACTIONS answer (the id's last transaction
        is still completing: markers, then CompleteCommit/CompleteAbort) is decided again at
        each of the id's log writes, for up to ``CONCURRENT_WAIT_MS``, instead of sending the
        client into its retry backoff (librdkafka and the Java client wait 20 ms or more
        before retrying, which would cap a transactional producer's rate). The client sees
        the same answers, only later."""
        loop = asyncio.get_running_loop()  # bounds a real wait: asyncio's own clock
        deadline = loop.time() + CONCURRENT_WAIT_MS / 1000
        while True:
            self.reconcile()
            await self.top_up_producer_ids()
            decision = decide()
            if not isinstance(decision, Answer):
                break
            remaining_s = deadline - loop.time()
            if (transactional_id is None or remaining_s <= 0
                    or decision.error != ErrorCode.concurrent_transactions):
                return decision
            changed = self._changed.setdefault(transactional_id, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining_s)
        outcome = await self.write(decision)
        return outcome if outcome is not None else Answer(ErrorCode.none)

    async def top_up_producer_ids(self) -> None:
        missing = self.reserve.missing
        if missing:
            try:
                ids = [await self._producer_ids.generate_producer_id() for _ in range(missing)]
            except Exception:
                logger.exception("cannot allocate producer ids")
                return
            self.reserve.refill(ids)

    async def write(self, write: WriteTxnLog) -> Answer | None:
        """Append ``write``, ``complete_write`` it, and start what follows."""
        error = self.state_manager.check_append(write.transactional_id, write.coordinator_epoch)
        if error == ErrorCode.none:
            try:
                error = ErrorCode(await self._append(write.txn_partition, write.key,
                                                     write.value))
            except Exception:  # complete_write runs exactly once, whatever happened
                logger.exception("appending to %s-%d failed", TRANSACTION_STATE_TOPIC,
                                 write.txn_partition)
                error = ErrorCode.unknown_server_error
        outcome = self.coordinator.complete_write(write, error, self.clock.milliseconds())
        changed = self._changed.pop(write.transactional_id, None)
        if changed is not None:
            changed.set()
        if self.metrics is not None:
            self.metrics.written(write, outcome)
        if outcome.markers is not None:
            self._add_markers(outcome.markers)
        if outcome.retry:
            self._spawn(self._retry_completion(write))
        elif outcome.answer is None and outcome.error != ErrorCode.none:
            logger.warning("write of %s for %r failed: %s", write.purpose.name,
                           write.transactional_id, outcome.error.name)
        return outcome.answer

    async def _append(self, index: int, key: bytes, value: bytes | None) -> int:
        batch = build_batch([RecordSpec(key=key, value=value,
                                        timestamp=self.clock.milliseconds())])
        [result] = await self.replica_manager.append_records(
            [((TRANSACTION_STATE_TOPIC, index), batch)], -1, APPEND_TIMEOUT_MS)
        return result.error_code

    # ================================================================ markers
    def _add_markers(self, pending: PendingCompleteTxn) -> None:
        for completed in self.sender.add(pending):
            self._on_markers_completed(completed)

    def _on_markers_completed(self, pending: PendingCompleteTxn) -> None:
        if self.metrics is not None:
            self.metrics.markers_completed(pending)
        write = self.coordinator.write_txn_completion(pending)
        if write is not None:
            self._spawn(self._complete(write))

    async def _complete(self, write: WriteTxnLog) -> None:
        await self.write(write)

    async def _retry_completion(self, write: WriteTxnLog) -> None:
        await asyncio.sleep(COMPLETION_RETRY_MS / 1000)
        if self._active:
            await self.write(write)

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await coroutine
            except Exception:
                logger.exception("transaction coordinator task failed")

        task = asyncio.get_running_loop().create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def settle(self) -> None:
        """Until no completion write is in flight (tests)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    # ================================================================ timers
    async def tick(self) -> None:
        """Run the periodic work that is due by the clock (tests call it by hand)."""
        self.reconcile()
        now = self.clock.monotonic_ms()
        if now >= self._next_abort_ms:
            self._next_abort_ms = now + self.config.abort_timed_out_transactions_interval_ms
            await self.top_up_producer_ids()
            for write in self.coordinator.abort_timed_out_transactions(
                    self.clock.milliseconds()):
                logger.info("aborting the timed-out transaction of %r", write.transactional_id)
                await self.write(write)
        if now >= self._next_expire_ms:
            self._next_expire_ms = now + self.config.remove_expired_transactional_ids_interval_ms
            for expired in self.state_manager.expire_transactional_ids(
                    self.clock.milliseconds()):
                error = await self._append(expired.txn_partition, expired.key, None)
                if self.state_manager.complete_expiration(expired, error):
                    logger.info("expired transactional id %r", expired.transactional_id)

    def next_deadline(self) -> float:
        return min(self._next_abort_ms, self._next_expire_ms)

    async def _run_timers(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:
                logger.exception("transaction coordinator timers failed")
            delay = max(0.0, (self.next_deadline() - self.clock.monotonic_ms()) / 1000)
            await asyncio.sleep(min(delay, 1.0))  # at least every second: reconcile
