"""``ReplicaManager``: the partitions this broker hosts, and the produce and fetch data paths.

Kafka's ``ReplicaManager``. Owns:

* the map ``(topic, partition) -> Partition``: ``make_leader`` / ``make_follower`` create a
  partition (and its log, through ``LogManager.get_or_create_log``) or change its role,
  ``remove_partition`` drops it;
* ``append_records``: one produce request's record sets, each appended through its
  ``Partition`` (leader check, ``min.insync.replicas``, offsets assigned by the log), answered
  per partition with Kafka error codes; duplicates of an idempotent producer's recent batches
  come back with the original offsets; acks=-1 waits in the produce purgatory until the high
  watermark passed the records (REQUEST_TIMED_OUT after the request's timeout);
* the leader's side of replication: a follower's Fetch (``replica_id`` >= 0) records its fetch
  state, which may propose an ISR expansion and move the HW; ``maybe_shrink_isr`` (every
  ``replica.lag.time.max.ms`` / 2) proposes shrinks. Proposals go to the ``isr_change_handler``
  (the cluster's store, by compare-and-set; without one they are adopted at once), whose answer
  comes back through ``apply_isr_change``. Every HW move wakes the produces and consumers'
  long polls waiting on that partition;
* ``fetch_messages``: reads bounded by each partition's max bytes and the request's total
  ``max_bytes`` (at least one batch, KIP-74), and the long poll: with fewer than ``min_bytes``
  readable, the fetch waits up to ``max_wait_ms`` in the fetch purgatory and is woken by the
  next append to one of its partitions (``delayed_operation``);
* ``delete_records``: DeleteRecords on the leader, answered once each partition's low watermark
  (the smallest log start offset of the leader and its live followers, as their fetches report
  it) reached the offset, or REQUEST_TIMED_OUT after the request's timeout
  (``delayed_delete_records``); a follower's fetch that moves its log start offset, and any
  leadership, replica or ISR change, wakes those waiting on the partition;
* the leader side of replication throttles (KIP-73, ``replication_quota``): a follower's read of
  a throttled partition while the follower is out of the ISR and ``leader.replication.
  throttled.rate`` is exceeded is answered with no records (its fetch state still recorded, as
  Kafka's ``readFromLocalLog`` does); the bytes of throttled partitions sent to followers are
  recorded against that rate. In-sync followers are never held back.

Results are per partition, in request order; errors never raise out of these methods except
programming errors. Event-loop only: appends and reads touch only the page cache (``os.write``,
``os.pread`` in the storage layer); fsync runs elsewhere (``LogManager.flush_dirty_logs``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence

from strata.broker.metrics.log_metrics import LogMetrics
from strata.broker.metrics.replication_metrics import ReplicationMetrics
from strata.broker.replication.delayed_delete_records import (
    DelayedDeleteRecords,
    low_watermark_if_leader,
)
from strata.broker.replication.delayed_operation import DelayedFetch, Purgatory
from strata.broker.replication.partition import (
    NO_LEADER_EPOCH,
    NONE,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    UNKNOWN_SERVER_ERROR,
    FetchIsolation,
    NotLeaderOrFollowerError,
    Partition,
    PartitionError,
    UnknownTopicOrPartitionError,
)
from strata.broker.replication.partition_results import (
    DeleteRecordsResult,
    FetchPartitionResult,
    PartitionAppendResult,
    PartitionFetchInfo,
)
from strata.broker.replication.replication_quota import ReplicationQuotas
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import Clock
from strata.storage.errors import InvalidRecordError, StorageError
from strata.storage.log_manager import LogManager
from strata.storage.log_transactions import AppendOrigin
from strata.storage.verification_state import SENTINEL_GUARD

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartitionError.error_code


_UNKNOWN_APPEND = PartitionAppendResult(UNKNOWN_TOPIC_OR_PARTITION,
                                        error_message="This server does not host this "
                                                      "topic-partition.")
_UNKNOWN_FETCH = FetchPartitionResult(UNKNOWN_TOPIC_OR_PARTITION)
_NOT_HERE_APPEND = PartitionAppendResult(NotLeaderOrFollowerError.error_code,
                                         error_message="This server is not the leader for that "
                                                       "topic-partition.")
_NOT_HERE_FETCH = FetchPartitionResult(NotLeaderOrFollowerError.error_code)


IsrChangeHandler = Callable[[Partition, frozenset[int]], None]
"""Takes a partition's proposed ISR to the controller's store; calls back
``Partition.apply_isr_change`` or ``abort_isr_change`` (maybe later, on the loop)."""


class ReplicaManager:
    def __init__(self, log_manager: LogManager, clock: Clock, node_id: int,
                 *, isr_change_handler: IsrChangeHandler | None = None) -> None:
        self.log_manager = log_manager
        self.clock = clock
        self.node_id = node_id
        self._partitions: dict[TopicPartition, Partition] = {}
        self.fetch_purgatory: Purgatory[TopicPartition] = Purgatory("Fetch", journal=True)
        # acks=-1 produces waiting for the HW, woken when a partition's HW moves.
        self.produce_purgatory: Purgatory[TopicPartition] = Purgatory("Produce")
        # DeleteRecords waiting for the low watermark, woken when a follower reports a new log
        # start offset or the partition's leadership, replicas or ISR change.
        self.delete_records_purgatory: Purgatory[TopicPartition] = Purgatory("DeleteRecords")
        # Without a cluster store (one broker), an ISR change is adopted at once.
        self.isr_change_handler: IsrChangeHandler = isr_change_handler or self._apply_locally
        # Set by the server once its metrics registry exists (None in bare unit tests).
        self.log_metrics: LogMetrics | None = None
        self.replication_metrics: ReplicationMetrics | None = None
        # Whether the cluster has a partition this broker does not host (then a request for it
        # is NOT_LEADER_OR_FOLLOWER, as Kafka answers, not UNKNOWN_TOPIC_OR_PARTITION).
        self.partition_exists: Callable[[TopicPartition], bool] = lambda tp: False
        # Whether a broker is alive (a cluster: registered in the metadata image); only live
        # followers count for DeleteRecords' low watermark. Alone, every replica does.
        self.broker_alive: Callable[[int], bool] = lambda broker_id: True
        # Replication throttles (both sides; the fetchers read the follower side from here).
        self.replication_quotas = ReplicationQuotas(node_id)

    # ------------------------------------------------------------- partitions
    def make_leader(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID,
        leader_epoch: int,
        *,
        configs: Mapping[str, str] | None = None,
        replicas: tuple[int, ...] | None = None,
        isr: frozenset[int] | None = None,
        partition_epoch: int = 0,
    ) -> Partition:
        """Host ``topic-partition`` as its leader at ``leader_epoch``, creating (or loading) the
        log; ``configs`` are the topic's overrides, applied to the log if given; ``replicas``
        and ``isr`` from its registration (default: this broker alone)."""
        hosted = self._host(topic, partition, topic_id, leader_epoch, configs)
        hosted.make_leader(leader_epoch, replicas=replicas, isr=isr,
                           partition_epoch=partition_epoch, now_ms=self.clock.milliseconds())
        self._high_watermark_moved((topic, partition))  # waiters re-check: leadership changed
        self.delete_records_purgatory.notify((topic, partition))
        return hosted

    def make_follower(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID,
        leader_id: int | None,
        leader_epoch: int,
        *,
        replicas: tuple[int, ...],
        isr: frozenset[int],
        partition_epoch: int,
        configs: Mapping[str, str] | None = None,
    ) -> Partition:
        """Host ``topic-partition`` as a follower of ``leader_id`` (None: leaderless) at
        ``leader_epoch``. Produces waiting on it as leader are answered NOT_LEADER_OR_FOLLOWER
        and consumers' long polls wake up to be told the same."""
        hosted = self._host(topic, partition, topic_id, leader_epoch, configs)
        hosted.make_follower(leader_id, leader_epoch, replicas=replicas, isr=isr,
                             partition_epoch=partition_epoch)
        self._high_watermark_moved((topic, partition))
        self.delete_records_purgatory.notify((topic, partition))
        return hosted

    def _host(self, topic: str, partition: int, topic_id: uuid.UUID, leader_epoch: int,
              configs: Mapping[str, str] | None) -> Partition:
        tp = (topic, partition)
        existing = self._partitions.get(tp)
        if existing is not None:
            if configs is not None:
                self.log_manager.set_topic_config(topic, configs)
            existing.topic_id = topic_id
            return existing
        log = self.log_manager.get_or_create_log(topic, partition, configs)
        hosted = Partition(topic, partition, topic_id, log, leader_epoch, self.node_id)
        self._partitions[tp] = hosted
        return hosted

    def remove_partition(
        self, topic: str, partition: int, *, delete_log: bool = False
    ) -> Partition | None:
        """Stop hosting ``topic-partition`` (waiting fetches wake up and see it gone); with
        ``delete_log`` its log directory is deleted too (DeleteTopics)."""
        tp = (topic, partition)
        removed = self._partitions.pop(tp, None)
        if removed is not None:  # produces waiting on it as leader answer NOT_LEADER_OR_FOLLOWER
            removed.leader_id = None
        self._high_watermark_moved(tp)
        self.delete_records_purgatory.notify(tp)
        if delete_log:
            self.log_manager.delete_log(topic, partition)
        return removed

    @property
    def hosted(self) -> Callable[[TopicPartition], Partition | None]:
        """The hosted partition of a ``(topic, partition)``, or None."""
        return self._partitions.get

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def get_partition_or_error(self, topic: str, partition: int) -> Partition:
        """The hosted partition; NOT_LEADER_OR_FOLLOWER when the cluster has it but this broker
        does not host it (yet, or any more), UNKNOWN_TOPIC_OR_PARTITION when the cluster does
        not have it (Kafka's ``getPartitionOrError``)."""
        hosted = self._partitions.get((topic, partition))
        if hosted is None:
            if self.partition_exists((topic, partition)):
                raise NotLeaderOrFollowerError(
                    f"this server does not host {topic}-{partition}")
            raise UnknownTopicOrPartitionError(
                f"this server does not host {topic}-{partition}"
            )
        return hosted

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    # ---------------------------------------------------------------- produce
    async def append_records(
        self,
        entries: Sequence[tuple[TopicPartition, bytes]],
        required_acks: int,
        timeout_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guards: Mapping[TopicPartition, int] | None = None,
    ) -> list[PartitionAppendResult]:
        """Append each ``(topic-partition, record set)``; one result per entry, in order.
        ``origin`` COORDINATOR: transaction markers (WriteTxnMarkers), appended like a produce.

        acks=-1 is answered once the HW passed each partition's appended records (with
        ISR = {leader} at once): the produce waits in the produce purgatory, woken when a
        follower's fetch moves the HW, for at most ``timeout_ms``; a partition still short
        then is REQUEST_TIMED_OUT (its records stay in the log: the client retries, and an
        idempotent producer's retry is answered as a duplicate).
        ``verification_guards`` (transaction verification in use, KIP-890): each partition's
        guard (``SENTINEL_GUARD`` if none), checked by the log's producer state.
        """
        if required_acks not in (-1, 0, 1):
            bad = PartitionAppendResult(ErrorCode.invalid_required_acks,
                                        error_message=f"invalid acks {required_acks}")
            return [bad] * len(entries)
        results: list[PartitionAppendResult] = []
        waiting: dict[int, tuple[Partition, int]] = {}  # result index -> (partition, offset)
        get = self._partitions.get
        notify = self.fetch_purgatory.notify
        for tp, records in entries:
            partition = get(tp)
            if partition is None:
                results.append(_NOT_HERE_APPEND if self.partition_exists(tp)
                               else _UNKNOWN_APPEND)
                continue
            try:
                info = partition.append_records_to_leader(
                    records, required_acks, origin,
                    None if verification_guards is None
                    else verification_guards.get(tp, SENTINEL_GUARD))
            except InvalidRecordError as exc:
                results.append(PartitionAppendResult(
                    exc.error_code, log_start_offset=partition.log.log_start_offset,
                    error_message=str(exc), record_errors=exc.record_errors))
                continue
            except (StorageError, PartitionError) as exc:
                results.append(PartitionAppendResult(exc.error_code, error_message=str(exc)))
                continue
            except Exception as exc:  # one partition's bug must not fail the rest
                logger.exception("append to %s-%d failed", tp[0], tp[1])
                results.append(PartitionAppendResult(UNKNOWN_SERVER_ERROR,
                                                     error_message=f"{type(exc).__name__}"))
                continue
            results.append(PartitionAppendResult(NONE, info.first_offset, info.log_append_time,
                                                 info.log_start_offset))
            if not info.duplicate:
                notify(tp)
                if self.log_metrics is not None:
                    self.log_metrics.appended(tp[0], tp[1], info.valid_bytes, info.record_count)
            if required_acks == -1:
                waiting[len(results) - 1] = (partition, info.last_offset + 1)
        if waiting:
            await self._wait_for_replication(results, waiting, timeout_ms)
        return results

    async def wait_for_replication(self, tp: TopicPartition, required_offset: int,
                                   timeout_ms: int) -> int:
        """Until the HW of ``tp``, led here, reached ``required_offset``: the wait of an acks=-1
        append, for a writer that appended by itself and holds its answer back until then
        (the group coordinator). The error code: NONE; REQUEST_TIMED_OUT;
        NOT_LEADER_OR_FOLLOWER (not led here, or the leadership moved meanwhile);
        NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank below ``min.insync.replicas``)."""
        partition = self._partitions.get(tp)
        if partition is None:
            return _NOT_HERE_APPEND.error_code
        results = [PartitionAppendResult(NONE)]
        await self._wait_for_replication(results, {0: (partition, required_offset)}, timeout_ms)
        return results[0].error_code

    async def _wait_for_replication(self, results: list[PartitionAppendResult],
                                    waiting: dict[int, tuple[Partition, int]],
                                    timeout_ms: int) -> None:
        """Kafka's ``DelayedProduce``: until every waiting partition's HW reached its required
        offset (or it failed), or ``timeout_ms``; results updated in place."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        while True:
            for index, (partition, required) in list(waiting.items()):
                done, error = partition.required_offset_reached(required)
                if done:
                    del waiting[index]
                    if error != NONE:
                        results[index] = PartitionAppendResult(error, error_message=(
                            "the ISR shrank below min.insync.replicas after the append"
                            if error == NOT_ENOUGH_REPLICAS_AFTER_APPEND
                            else "leadership moved before the records were replicated"))
            if not waiting:
                return
            keys = [(p.topic, p.partition) for p, _ in waiting.values()]
            if not await self.produce_purgatory.wait(keys, deadline - loop.time()):
                break
        for index in waiting:
            results[index] = PartitionAppendResult(
                ErrorCode.request_timed_out, error_message=f"not replicated to the ISR within "
                                                 f"{timeout_ms} ms")

    def _high_watermark_moved(self, tp: TopicPartition) -> None:
        """Wake what waits on ``tp``'s HW: acks=-1 produces and consumers' long polls."""
        self.produce_purgatory.notify(tp)
        self.fetch_purgatory.notify(tp)

    # ---------------------------------------------------------------- replication
    def update_follower_fetch_state(self, partition: Partition, replica_id: int,
                                    fetch_offset: int, log_start_offset: int | None = None
                                    ) -> None:
        """A follower fetched ``partition`` from ``fetch_offset`` (reporting its
        ``log_start_offset``): record it, propose it for the ISR if it just caught up, move
        the HW if it can, and wake DeleteRecords waiting on a log start offset it moved."""
        before = partition.followers.get(replica_id)
        proposed = partition.update_follower_fetch_state(replica_id, fetch_offset,
                                                         self.clock.milliseconds(),
                                                         log_start_offset)
        if (log_start_offset is not None and before is not None
                and before.log_start_offset != log_start_offset):
            self.delete_records_purgatory.notify((partition.topic, partition.partition))
        if proposed is not None:
            self._propose_isr(partition, proposed)
        # The HW is min(LEO) over the maximal ISR, recomputed whenever the leader's LEO or the
        # ISR changes; a fetch from where the follower already was changes none of its inputs.
        if (before is None or before.log_end_offset != fetch_offset) and (
                partition.maybe_increment_high_watermark()):
            self._high_watermark_moved((partition.topic, partition.partition))

    def apply_isr_change(self, partition: Partition, isr: frozenset[int],
                         partition_epoch: int) -> None:
        """The store accepted ``isr`` for ``partition``: adopt it and wake HW waiters; the
        fetch purgatory hears of every ISR change (a follower's quiet partition may be quiet
        no more, ``quiet_partitions``), and so do DeleteRecords' waiters (a broker that died
        leaves the ISR this way)."""
        tp = (partition.topic, partition.partition)
        if partition.apply_isr_change(isr, partition_epoch):
            self._high_watermark_moved(tp)
        else:
            self.fetch_purgatory.notify(tp)
        self.delete_records_purgatory.notify(tp)

    def _propose_isr(self, partition: Partition, isr: frozenset[int]) -> None:
        if self.replication_metrics is not None:
            self.replication_metrics.isr_change(partition, isr)
        self.isr_change_handler(partition, isr)

    def _apply_locally(self, partition: Partition, isr: frozenset[int]) -> None:
        self.apply_isr_change(partition, isr, partition.partition_epoch + 1)

    def maybe_shrink_isr(self, max_lag_ms: int) -> int:
        """Propose ISR shrinks for every led partition with lagging followers (Kafka's
        ``maybeShrinkIsr``, run every ``replica.lag.time.max.ms`` / 2); returns how many."""
        now = self.clock.milliseconds()
        proposals = 0
        for partition in list(self._partitions.values()):
            proposed = partition.maybe_shrink_isr(now, max_lag_ms)
            if proposed is not None:
                proposals += 1
                self._propose_isr(partition, proposed)
                if partition.maybe_increment_high_watermark():
                    self._high_watermark_moved((partition.topic, partition.partition))
        return proposals

    # ------------------------------------------------------------------ fetch
    async def fetch_messages(
        self,
        fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        isolation: FetchIsolation,
        replica_id: int = -1,
    ) -> list[FetchPartitionResult]:
        """Read each partition; one result per entry, in order. A follower's fetch
        (``replica_id`` >= 0) also records its fetch state on each partition it reads.

        Answers at once when ``min_bytes`` are readable, a partition has an error, or
        ``max_wait_ms`` <= 0; otherwise waits for appends to the fetched partitions until
        enough bytes arrived or ``max_wait_ms`` passed, then answers with what is there.
        """
        results, total, failed = self._read_from_local_logs(fetch_infos, max_bytes, isolation,
                                                            replica_id)
        if max_wait_ms <= 0 or not fetch_infos or total >= min_bytes or failed:
            return self._record_replication(fetch_infos, results, replica_id)

        def try_complete() -> list[FetchPartitionResult] | None:
            if not self._fetch_has_news(fetch_infos, isolation):
                return None
            again, size, error = self._read_from_local_logs(fetch_infos, max_bytes, isolation,
                                                            replica_id)
            return again if size >= min_bytes or error else None

        def on_expiration() -> list[FetchPartitionResult]:
            return self._read_from_local_logs(fetch_infos, max_bytes, isolation, replica_id)[0]

        keys = [tp for tp, _ in fetch_infos]
        delayed = DelayedFetch(keys, max_wait_ms, try_complete, on_expiration)
        return self._record_replication(fetch_infos, await delayed.run(self.fetch_purgatory),
                                        replica_id)

    def _record_replication(
        self, fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]],
        results: list[FetchPartitionResult], replica_id: int,
    ) -> list[FetchPartitionResult]:
        """A follower's answer: record the bytes of its throttled partitions (in sync or not)
        against ``leader.replication.throttled.rate`` (Kafka's ``sizeOfThrottledPartitions``)."""
        quota = self.replication_quotas.leader
        if replica_id >= 0 and quota.throttled_topics():
            size = sum(result.size for (tp, _), result in zip(fetch_infos, results, strict=True)
                       if result.size and quota.is_throttled(*tp))
            quota.record(size, self.clock.milliseconds())
        return results

    def _fetch_has_news(self, fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]],
                        isolation: FetchIsolation) -> bool:
        """Whether a waiting fetch might answer now (Kafka's ``DelayedFetch.tryComplete`` checks
        offsets before reading): a partition gone, moved, offline or fenced (the read then says
        which error), or one whose fetchable end (the LEO for a follower, else the HW, or the
        LSO under read_committed) is anywhere but the fetch offset. False spares re-reading
        every partition on each wake-up: a follower's waiting fetch is woken by every HW move
        the other followers' fetches cause, with nothing new for it."""
        get = self._partitions.get
        for tp, info in fetch_infos:
            partition = get(tp)
            if partition is None or not partition.is_leader or partition.log.offline:
                return True
            epoch = info.current_leader_epoch
            if epoch != NO_LEADER_EPOCH and epoch != partition.leader_epoch:
                return True
            log = partition.log
            if isolation is FetchIsolation.LOG_END:
                end = log.log_end_offset
            elif isolation is FetchIsolation.HIGH_WATERMARK:
                end = log.high_watermark
            else:
                end = log.last_stable_offset()
            if end != info.fetch_offset:
                return True
        return False

    def _read_from_local_logs(
        self,
        fetch_infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]],
        max_bytes: int,
        isolation: FetchIsolation,
        replica_id: int = -1,
    ) -> tuple[list[FetchPartitionResult], int, bool]:
        """(results, bytes read, any error). Kafka's ``readFromLog``: each partition gets
        min(its max bytes, what the request's ``max_bytes`` has left); the first partition with
        data may exceed that by one batch (KIP-74), later ones may not."""
        limit = max_bytes
        min_one_message = True
        total = 0
        failed = False
        results: list[FetchPartitionResult] = []
        get = self._partitions.get
        for tp, info in fetch_infos:
            partition = get(tp)
            if partition is None:
                results.append(_NOT_HERE_FETCH if self.partition_exists(tp)
                               else _UNKNOWN_FETCH)
                failed = True
                continue
            try:
                if replica_id >= 0 and isolation is FetchIsolation.LOG_END:
                    log = partition.log
                    epoch = info.current_leader_epoch
                    if (info.fetch_offset == log.log_end_offset and not log.offline
                            and log.log_start_offset <= info.fetch_offset
                            and partition.leader_id == partition.node_id
                            and (epoch == NO_LEADER_EPOCH or epoch == partition.leader_epoch)):
                        # A follower at the leader's end: nothing to read. What a read would
                        # answer, without its call chain (most partitions of a session are
                        # here on most fetches); the fetch state is recorded all the same.
                        self.update_follower_fetch_state(partition, replica_id,
                                                         info.fetch_offset,
                                                         info.log_start_offset)
                        high_watermark = log.high_watermark
                        results.append(FetchPartitionResult(
                            NONE, high_watermark, log.last_stable_offset(high_watermark),
                            log.log_start_offset))
                        continue
                read = partition.read_records(info.fetch_offset, min(info.max_bytes, limit),
                                              isolation, min_one_message,
                                              info.current_leader_epoch)
                if replica_id >= 0:
                    self.update_follower_fetch_state(partition, replica_id, info.fetch_offset,
                                                     info.log_start_offset)
                    if read.high_watermark != partition.high_watermark:  # the fetch moved it
                        read = read._replace(high_watermark=partition.high_watermark,
                                             last_stable_offset=partition.last_stable_offset)
                    if (read.size and replica_id not in partition.isr
                            and self.replication_quotas.leader.should_throttle(
                                tp[0], tp[1], False, self.clock.milliseconds())):
                        read = read._replace(slices=(), size=0)  # Kafka: "simply return empty"
            except (StorageError, PartitionError) as exc:
                results.append(FetchPartitionResult(exc.error_code))
                failed = True
                continue
            except Exception:  # one partition's bug must not fail the rest
                logger.exception("read of %s-%d failed", tp[0], tp[1])
                results.append(FetchPartitionResult(UNKNOWN_SERVER_ERROR))
                failed = True
                continue
            size = read.size
            if size > 0:
                if self.log_metrics is not None:
                    self.log_metrics.read(tp[0], tp[1], size)
                min_one_message = False
                limit = max(0, limit - size)
                total += size
            results.append(FetchPartitionResult(NONE, read.high_watermark,
                                                read.last_stable_offset, read.log_start_offset,
                                                read.slices, size,
                                                read.aborted_transactions))
        return results, total, failed

    # --------------------------------------------------------- delete records
    async def delete_records(
        self, entries: Sequence[tuple[TopicPartition, int]], timeout_ms: int
    ) -> list[DeleteRecordsResult]:
        """DeleteRecords (Kafka's ``deleteRecords``): move each log start offset up to its
        offset (-1 = HW) on the leader, then answer each partition once its low watermark
        reached that offset, within ``timeout_ms`` (``delayed_delete_records``). One result
        per entry, in order."""
        results: list[DeleteRecordsResult] = []
        waiting: dict[int, tuple[TopicPartition, int]] = {}  # result index -> (tp, offset)
        for tp, offset in entries:
            try:
                partition = self.get_partition_or_error(*tp)
                required = partition.delete_records_on_leader(offset)
                low_watermark = low_watermark_if_leader(partition, self.broker_alive)
            except (StorageError, PartitionError) as exc:
                results.append(DeleteRecordsResult(exc.error_code))
                continue
            self.fetch_purgatory.notify(tp)  # followers hear of the new log start
            if low_watermark < required:
                waiting[len(results)] = (tp, required)
            results.append(DeleteRecordsResult(NONE, low_watermark))
        if waiting:
            delayed = DelayedDeleteRecords(results, waiting, self._partitions.get,
                                           lambda broker_id: self.broker_alive(broker_id))
            await delayed.run(self.delete_records_purgatory, timeout_ms)
        return results
