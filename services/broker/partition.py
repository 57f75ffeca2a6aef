"""``Partition``: one partition this broker hosts — its log, leadership, ISR and high watermark.

Kafka's ``cluster.Partition``, single node first. A partition is created by the
``ReplicaManager`` when this broker becomes its leader (``make_leader``); for now every hosted
partition is a leader and its ISR is ``{node_id}``. Replication (issue 5) adds followers'
fetch state and ISR changes here, behind the same methods.

Offsets (GLOSSARY.md):

* log end offset (LEO): ``log.log_end_offset``, moved by appends;
* high watermark (HW): ``log.high_watermark``, moved only by ``maybe_increment_high_watermark``
  (see its docstring for the rule); consumers read below it;
* last stable offset (LSO): equal to the HW while no transaction can be open (Strata serves no
  transactions yet, so always); read_committed consumers read below it;
* log start offset: ``log.log_start_offset``, moved by retention and DeleteRecords.

Who reads what (``FetchIsolation``): followers read up to the LEO, read_uncommitted consumers up
to the HW, read_committed consumers up to the LSO.

Errors are raised as ``PartitionError`` subclasses carrying a Kafka error code (like
``strata.storage.errors.StorageError``); ``error_code_of`` maps either to the code a response
carries.

Threads: every method runs on the broker's event loop (the log's owner thread). The state is
plain attributes replaced on change; nothing here blocks.
"""

from __future__ import annotations

import uuid
from enum import IntEnum
from typing import NamedTuple

from strata.protocol.error_codes import ErrorCode
from strata.storage.errors import OffsetOutOfRangeError, StorageError
from strata.storage.file_records import FileSlice
from strata.storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    Log,
    LogAppendInfo,
    TimestampAndOffset,
)

UNKNOWN_SERVER_ERROR = -1
NONE = 0
NO_LEADER_EPOCH = -1


# ---------------------------------------------------------------------------------- errors
class PartitionError(Exception):
    """A partition-level refusal; ``error_code`` is Kafka's numeric code."""

    error_code: int = UNKNOWN_SERVER_ERROR
    error_name: str = "UNKNOWN_SERVER_ERROR"


class UnknownTopicOrPartitionError(PartitionError):
    error_code = int(ErrorCode.unknown_topic_or_partition)
    error_name = "UNKNOWN_TOPIC_OR_PARTITION"


class NotLeaderOrFollowerError(PartitionError):
    error_code = int(ErrorCode.not_leader_or_follower)
    error_name = "NOT_LEADER_OR_FOLLOWER"


class NotEnoughReplicasError(PartitionError):
    error_code = int(ErrorCode.not_enough_replicas)
    error_name = "NOT_ENOUGH_REPLICAS"


class PolicyViolationError(PartitionError):
    error_code = int(ErrorCode.policy_violation)
    error_name = "POLICY_VIOLATION"


class FencedLeaderEpochError(PartitionError):
    error_code = int(ErrorCode.fenced_leader_epoch)
    error_name = "FENCED_LEADER_EPOCH"


class UnknownLeaderEpochError(PartitionError):
    error_code = int(ErrorCode.unknown_leader_epoch)
    error_name = "UNKNOWN_LEADER_EPOCH"


def error_code_of(exc: BaseException) -> int:
    """The Kafka error code answering ``exc``: its own for storage and partition errors."""
    if isinstance(exc, StorageError | PartitionError):
        return exc.error_code
    return UNKNOWN_SERVER_ERROR


class FetchIsolation(IntEnum):
    """How far a fetch may read: Kafka's ``FetchIsolation``."""

    LOG_END = 0  # followers (replica_id >= 0)
    HIGH_WATERMARK = 1  # consumers, isolation_level read_uncommitted
    TXN_COMMITTED = 2  # consumers, isolation_level read_committed: up to the LSO


class LogReadResult(NamedTuple):
    """A read of one partition: the slices plus the offsets the Fetch response reports,
    taken at the time of the read. (A NamedTuple: one is built per partition per fetch.)"""

    slices: tuple[FileSlice, ...]
    size: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int


# ------------------------------------------------------------------------------- partition
class Partition:
    """One hosted partition. Built by ``ReplicaManager.make_leader``."""

    __slots__ = (
        "isr",
        "leader_epoch",
        "leader_id",
        "log",
        "node_id",
        "partition",
        "replicas",
        "topic",
        "topic_id",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID,
        log: Log,
        leader_epoch: int,
        node_id: int,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self.leader_epoch = leader_epoch
        self.leader_id: int | None = node_id
        self.replicas: tuple[int, ...] = (node_id,)
        self.isr: frozenset[int] = frozenset((node_id,))
        self.maybe_increment_high_watermark()

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader_epoch={self.leader_epoch}, "
                f"hw={self.high_watermark}, leo={self.log_end_offset})")

    # ------------------------------------------------------------------- state
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The LSO: the HW, as no transaction can be open (transactions are not served)."""
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    def make_leader(self, leader_epoch: int) -> None:
        """Become (again) the leader at ``leader_epoch`` (never lower than the current one)."""
        if leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.topic}-{self.partition}: leader epoch {leader_epoch} is older than the "
                f"current {self.leader_epoch}"
            )
        self.leader_epoch = leader_epoch
        self.leader_id = self.node_id
        self.isr = frozenset((self.node_id,))
        self.maybe_increment_high_watermark()

    def maybe_increment_high_watermark(self) -> bool:
        """Advance the HW to the smallest log end offset among the in-sync replicas.

        Kafka's rule (``Partition.maybeIncrementLeaderHW``): the high watermark is the minimum
        LEO of the ISR — every record below it is on every in-sync replica, so it survives the
        loss of any of them, and it never moves backwards on the leader. With ISR = {leader}
        (one broker, or followers all out of sync) that is the leader's own LEO, so the HW
        follows every append at once. Followers' LEOs join the minimum when replication lands.
        Returns True when the HW moved (delayed fetches and produces may then complete).
        """
        if not self.is_leader:
            return False
        # Only the leader's replica is in the ISR for now; followers' LEOs add to this min().
        new_hw = self.log.log_end_offset
        return self.log.maybe_increment_high_watermark(new_hw)

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a request naming a leader epoch must name ours (-1 skips the check)."""
        if current_leader_epoch == NO_LEADER_EPOCH or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.topic}-{self.partition}: the request's leader epoch "
                f"{current_leader_epoch} is older than the current {self.leader_epoch}"
            )
        raise UnknownLeaderEpochError(
            f"{self.topic}-{self.partition}: the request's leader epoch {current_leader_epoch} "
            f"is newer than the current {self.leader_epoch}"
        )

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int,
                                     *, fetch_only_from_leader: bool) -> tuple[int, int]:
        """OffsetForLeaderEpoch (KIP-101, KIP-279): ``(largest epoch <= leader_epoch, the
        offset where it ended)`` in this replica's log, ``(-1, -1)`` when unknown.

        Kafka's ``Partition.lastOffsetForLeaderEpoch``: the request's ``current_leader_epoch``
        is checked first (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), and only the leader
        answers unless the request comes from a debugging tool (``fetch_only_from_leader``
        False): a follower's log may still diverge from the leader's.
        """
        self.check_leader_epoch(current_leader_epoch)
        if fetch_only_from_leader:
            self._check_leader()
        return self.log.end_offset_for_epoch(leader_epoch)

    def _check_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.node_id} is not the leader of {self.topic}-{self.partition}"
            )

    # ------------------------------------------------------------------ append
    def append_records_to_leader(self, records: bytes, required_acks: int) -> LogAppendInfo:
        """Append a client's record set as the leader; raises Kafka errors.

        acks=-1 needs at least ``min.insync.replicas`` replicas in the ISR at the time of the
        append (NOT_ENOUGH_REPLICAS otherwise, nothing written); acks=0/1 do not check. The HW
        moves right after the append (see ``maybe_increment_high_watermark``).
        """
        self._check_leader()
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"the size of the current ISR {sorted(self.isr)} of {self.topic}-"
                f"{self.partition} is below min.insync.replicas {self.min_insync_replicas}"
            )
        info = self.log.append_as_leader(records, self.leader_epoch)
        self.maybe_increment_high_watermark()
        return info

    # -------------------------------------------------------------------- read
    def read_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation,
        min_one_message: bool,
        current_leader_epoch: int = NO_LEADER_EPOCH,
    ) -> LogReadResult:
        """Read from ``fetch_offset`` as the leader, bounded by the isolation's offset.

        The offsets are sampled before the read, so the slices never reach past the HW that is
        reported with them. Raises OFFSET_OUT_OF_RANGE outside [log start offset, LEO].
        """
        self.check_leader_epoch(current_leader_epoch)
        self._check_leader()
        log = self.log
        high_watermark = log.high_watermark
        log_end_offset = log.log_end_offset
        # Consumers stop at the HW (the LSO equals it: no open transactions); followers at LEO.
        bound = log_end_offset if isolation is FetchIsolation.LOG_END else high_watermark
        info = log.read(fetch_offset, max_bytes, bound, min_one_message)
        slices = info.slices
        size = slices[0].length if len(slices) == 1 else sum(s.length for s in slices)
        return LogReadResult(slices, size, high_watermark, high_watermark, log.log_start_offset,
                             log_end_offset)

    # ---------------------------------------------------------------- offsets
    def fetch_offset_for_timestamp(
        self,
        timestamp: int,
        isolation: FetchIsolation,
        current_leader_epoch: int = NO_LEADER_EPOCH,
    ) -> TimestampAndOffset | None:
        """ListOffsets on the leader (Kafka's ``Partition.fetchOffsetForTimestamp``).

        -1 latest: the last fetchable offset for ``isolation`` (HW, LSO or LEO) with the
        current leader epoch; -2 earliest: the log start offset; -3: the record with the largest
        timestamp; else the first offset whose timestamp is >= ``timestamp``. Results at or past
        the last fetchable offset are not visible yet: None (the response says -1).
        """
        self.check_leader_epoch(current_leader_epoch)
        self._check_leader()
        log = self.log
        if isolation is FetchIsolation.LOG_END:
            last_fetchable = log.log_end_offset
        else:
            last_fetchable = log.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, last_fetchable, self.leader_epoch)
        found = log.fetch_offset_by_timestamp(timestamp)
        if found is None:
            return None
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return found
        return found if found.offset < last_fetchable else None

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to ``offset`` (-1 = the HW); returns the new
        log start offset (the low watermark). Compacted-only topics refuse (POLICY_VIOLATION),
        like Kafka; offsets past the HW are OFFSET_OUT_OF_RANGE (from the log)."""
        self._check_leader()
        log = self.log
        if not log.config.delete:
            raise PolicyViolationError(
                f"records of {self.topic}-{self.partition} cannot be deleted: its "
                f"cleanup.policy is {','.join(sorted(log.config.cleanup_policy))}"
            )
        if offset == -1:
            offset = log.high_watermark
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot delete records before negative offset {offset}")
        return log.delete_records_before(offset)
