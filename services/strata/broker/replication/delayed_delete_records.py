"""DeleteRecords waiting for the low watermark: Kafka's ``DelayedDeleteRecords`` and
``Partition.lowWatermarkIfLeader``.

DeleteRecords moves the leader's log start offset at once (``Partition.delete_records_on_leader``)
but a partition is answered only when its *low watermark* reached the offset asked for (-1
resolved to the HW), or when the request's ``timeout_ms`` passed:

* the low watermark (``low_watermark_if_leader``) is the smallest log start offset among the
  leader's own and its followers' — each follower's as its last fetch reported it
  (``FollowerState.log_start_offset``, -1 until it fetched in this leadership) — counting only
  followers whose broker is alive. Followers move their log start up to the leader's from each
  Fetch response (``replica_fetcher``, Kafka's ``LeaderOffsetIncremented``) and report it in
  their next fetch, so a deletion is answered once every live replica has dropped the records;
* *alive* is Kafka's ``metadataCache.hasAliveBroker`` (``isBrokerAlive`` in older releases,
  the same rule): ``ReplicaManager.broker_alive``, which a cluster broker answers from its
  metadata image (the broker is registered, i.e. holds its lease), not from the ISR — so an
  alive follower out of the ISR holds the answer back, and a dead one does not. Without a
  cluster every replica counts (a single broker has no followers: answered at once);
* waiting partitions are re-checked, without polling, when the ``delete_records_purgatory``
  is notified: a follower's fetch that moved its recorded log start offset, a leadership or
  replica-set change (``make_leader`` / ``make_follower`` / ``remove_partition``) and an ISR
  change (``apply_isr_change``, which is how a dead broker leaves a partition). A broker that
  dies while already out of the ISR changes no partition: a request waiting only on it is
  re-checked at the next of these or times out, as in Kafka, whose purgatory is not told of
  broker deaths either;
* each re-check answers what Kafka's ``tryComplete`` answers: the low watermark once it is at
  least the offset; NOT_LEADER_OR_FOLLOWER when this broker no longer leads,
  KAFKA_STORAGE_ERROR when the log went offline, UNKNOWN_TOPIC_OR_PARTITION when the partition
  is gone (offsets -1). At the deadline the partitions still short are REQUEST_TIMED_OUT with
  the low watermark the request found (Kafka keeps it in the timed-out answer); the records
  stay deleted on the leader.

Kafka also counts the partition's future log (a replica moving between log dirs) in the low
watermark; Strata's future log is given the current log's start offset when it is swapped in
(``LogManager.replace_current_with_future_log``), so it never holds deleted records back.

Event-loop only; ``DelayedDeleteRecords`` owns the results of the partitions it waits for until
``run`` returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from strata.broker.replication.delayed_operation import Purgatory
from strata.broker.replication.partition import (
    NONE,
    NotLeaderOrFollowerError,
    Partition,
    UnknownTopicOrPartitionError,
)
from strata.broker.replication.partition_results import DeleteRecordsResult
from strata.protocol.error_codes import ErrorCode

TopicPartition = tuple[str, int]

REQUEST_TIMED_OUT = int(ErrorCode.request_timed_out)
KAFKA_STORAGE_ERROR = int(ErrorCode.kafka_storage_error)
_NOT_LEADER = DeleteRecordsResult(NotLeaderOrFollowerError.error_code)
_OFFLINE = DeleteRecordsResult(KAFKA_STORAGE_ERROR)
_GONE = DeleteRecordsResult(UnknownTopicOrPartitionError.error_code)


def low_watermark_if_leader(partition: Partition, broker_alive: Callable[[int], bool]) -> int:
    """The smallest log start offset of the leader (this broker) and its followers on live
    brokers (module docstring); raises NOT_LEADER_OR_FOLLOWER unless this broker leads."""
    if not partition.is_leader:
        raise NotLeaderOrFollowerError(
            f"broker {partition.node_id} is not the leader of {partition.topic}-"
            f"{partition.partition}")
    low = partition.log.log_start_offset
    for state in partition.followers.values():
        if state.log_start_offset < low and broker_alive(state.replica_id):
            low = state.log_start_offset
    return low


class DelayedDeleteRecords:
    """The partitions of one DeleteRecords request whose low watermark is still short of the
    offset asked for: ``waiting`` maps an index into ``results`` to (partition, offset);
    ``results`` holds each one's answer so far (NONE and the low watermark found)."""

    __slots__ = ("_broker_alive", "_hosted", "_results", "_waiting")

    def __init__(self, results: list[DeleteRecordsResult],
                 waiting: dict[int, tuple[TopicPartition, int]],
                 hosted: Callable[[TopicPartition], Partition | None],
                 broker_alive: Callable[[int], bool]) -> None:
        self._results = results
        self._waiting = waiting
        self._hosted = hosted
        self._broker_alive = broker_alive

    def try_complete(self) -> bool:
        """Answer every waiting partition that is done (reached, or failed); True when none is
        left waiting."""
        results = self._results
        for index, (tp, required) in list(self._waiting.items()):
            partition = self._hosted(tp)
            if partition is None:
                results[index] = _GONE
            elif not partition.is_leader:
                results[index] = _NOT_LEADER
            elif partition.log.offline:
                results[index] = _OFFLINE
            else:
                low = low_watermark_if_leader(partition, self._broker_alive)
                if low < required:
                    continue
                results[index] = DeleteRecordsResult(NONE, low)
            del self._waiting[index]
        return not self._waiting

    async def run(self, purgatory: Purgatory[TopicPartition], timeout_ms: int) -> None:
        """Until every partition is answered or ``timeout_ms`` passed (then REQUEST_TIMED_OUT
        for those still waiting); woken by ``purgatory.notify`` of their partitions."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        while not self.try_complete():
            keys = [tp for tp, _ in self._waiting.values()]
            if not await purgatory.wait(keys, deadline - loop.time()):
                break
        for index in self._waiting:
            self._results[index] = DeleteRecordsResult(REQUEST_TIMED_OUT,
                                                       self._results[index].low_watermark)
        self._waiting.clear()
