"""``Partition``: one partition this broker hosts — its log, leadership, ISR and high watermark.

Kafka's ``cluster.Partition``. A partition is created by the ``ReplicaManager`` when this
broker becomes its leader (``make_leader``, with the replicas and ISR of the partition's
registration; a single broker's partitions have replicas = ISR = ``{node_id}``) or a follower
(``make_follower``). As leader it tracks each follower's fetch state (``FollowerState``),
proposes ISR changes and moves the high watermark:

* a follower's fetch (``update_follower_fetch_state``) records its log end offset (and the log
  start offset it reported: DeleteRecords' low watermark, ``delayed_delete_records``); a follower
  outside the ISR whose log end offset reached the HW and the current leader epoch's start
  offset is proposed for the ISR (expansion, Kafka's ``maybeExpandIsr``);
* ``maybe_shrink_isr`` proposes removing followers not caught up for ``replica.lag.time.max.ms``;
* a proposal is *pending* until the controller's store accepted it (``apply_isr_change``) or
  refused it (``abort_isr_change``): at most one is in flight. While an expansion is pending
  the added replica already counts for the HW (the *maximal ISR*, KIP-497), so the HW never
  runs ahead of a replica the ISR is about to include; a shrink only counts once applied.

Offsets (GLOSSARY.md):

* log end offset (LEO): ``log.log_end_offset``, moved by appends;
* high watermark (HW): ``log.high_watermark``, moved only by ``maybe_increment_high_watermark``
  (see its docstring for the rule); consumers read below it;
* last stable offset (LSO): ``log.last_stable_offset()``, the HW or, below it, the first offset
  of the oldest transaction still open (or decided with its marker not yet below the HW);
  read_committed consumers read below it;
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

from strata.broker.replication.follower_state import FollowerState
from strata.protocol.error_codes import ErrorCode
from strata.storage.errors import OffsetOutOfRangeError, StorageError
from strata.storage.file_records import FileSlice
from strata.storage.log import Log
from strata.storage.log_results import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    LogAppendInfo,
    TimestampAndOffset,
)
from strata.storage.log_transactions import AppendOrigin
from strata.storage.log_transactions import FetchIsolation as LogIsolation

UNKNOWN_SERVER_ERROR = -1
NONE = 0
NO_LEADER_EPOCH = -1
NOT_ENOUGH_REPLICAS_AFTER_APPEND = int(ErrorCode.not_enough_replicas_after_append)


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
    aborted_transactions: tuple[tuple[int, int], ...] | None = None  # read_committed only


# ------------------------------------------------------------------------------- partition
class Partition:
    """One hosted partition. Built by ``ReplicaManager.make_leader`` / ``make_follower``, which
    give it its role at once; until then it is neither leader nor follower."""

    __slots__ = (
        "followers",
        "isr",
        "leader_epoch",
        "leader_id",
        "log",
        "node_id",
        "partition",
        "partition_epoch",
        "pending_isr",
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
        # No role until make_leader / make_follower: a new Partition leads nothing and leaves
        # the log's (checkpointed) high watermark alone.
        self.leader_id: int | None = None
        self.replicas: tuple[int, ...] = (node_id,)
        self.isr: frozenset[int] = frozenset((node_id,))
        self.partition_epoch = 0
        self.pending_isr: frozenset[int] | None = None
        self.followers: dict[int, FollowerState] = {}

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
        """The LSO: min(the first offset of the oldest transaction not yet both decided and
        replicated, the HW) (``Log.last_stable_offset``)."""
        return self.log.last_stable_offset()

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR plus a pending expansion's replica: whom the HW waits for (KIP-497)."""
        pending = self.pending_isr
        return self.isr if pending is None else self.isr | pending

    def make_leader(self, leader_epoch: int, *, replicas: tuple[int, ...] | None = None,
                    isr: frozenset[int] | None = None, partition_epoch: int = 0,
                    now_ms: int = 0) -> None:
        """Become (again) the leader at ``leader_epoch`` (never lower than the current one),
        with the registration's replicas and ISR (default: this broker alone). Every
        follower's fetch state starts afresh, caught up as of ``now_ms``."""
        if leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.topic}-{self.partition}: leader epoch {leader_epoch} is older than the "
                f"current {self.leader_epoch}"
            )
        self.leader_epoch = leader_epoch
        self.leader_id = self.node_id
        self.replicas = replicas if replicas is not None else (self.node_id,)
        self.isr = isr if isr is not None else frozenset((self.node_id,))
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        self.followers = {r: FollowerState.reset(r, now_ms)
                          for r in self.replicas if r != self.node_id}
        self.maybe_increment_high_watermark()

    def make_follower(self, leader_id: int | None, leader_epoch: int, *,
                      replicas: tuple[int, ...], isr: frozenset[int],
                      partition_epoch: int) -> None:
        """Follow ``leader_id`` (None: no leader now) at ``leader_epoch``: stop leading, forget
        followers' state. The log is truncated by the fetcher (KIP-101), not here."""
        if leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.topic}-{self.partition}: leader epoch {leader_epoch} is older than the "
                f"current {self.leader_epoch}"
            )
        self.leader_epoch = leader_epoch
        self.leader_id = leader_id
        self.replicas = replicas
        self.isr = isr
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        self.followers = {}

    # ------------------------------------------------------------- followers
    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int,
                                    now_ms: int, log_start_offset: int | None = None
                                    ) -> frozenset[int] | None:
        """Record a fetch of follower ``replica_id`` from ``fetch_offset`` (reporting its
        ``log_start_offset``; None: unchanged); returns the ISR to propose when the follower
        has just caught up into it (else None). The caller re-checks the HW
        (``maybe_increment_high_watermark``) afterwards."""
        self._check_leader()
        state = self.followers.get(replica_id)
        if state is None:
            raise NotLeaderOrFollowerError(
                f"broker {replica_id} is not a replica of {self.topic}-{self.partition} "
                f"(replicas {list(self.replicas)})"
            )
        state = state.on_fetch(fetch_offset, self.log.log_end_offset, now_ms, log_start_offset)
        self.followers[replica_id] = state
        return self._maybe_expand_isr(state)

    def _maybe_expand_isr(self, state: FollowerState) -> frozenset[int] | None:
        """Kafka's ``isFollowerInSync``: at or past the HW and within the current epoch."""
        if self.pending_isr is not None or state.replica_id in self.isr:
            return None
        epoch_start = self.log.leader_epoch_cache.epoch_entry(self.leader_epoch)
        if state.log_end_offset < self.log.high_watermark or (
                epoch_start is not None and state.log_end_offset < epoch_start.start_offset):
            return None
        self.pending_isr = self.isr | {state.replica_id}
        return self.pending_isr

    def maybe_shrink_isr(self, now_ms: int, max_lag_ms: int) -> frozenset[int] | None:
        """The ISR without the followers that have not caught up for ``max_lag_ms`` (Kafka's
        ``getOutOfSyncReplicas``), proposed (pending) — or None when all are in sync, a change
        is already pending, or this broker does not lead."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        leader_end = self.log.log_end_offset
        lagging = {r for r in self.isr if r != self.node_id and r in self.followers
                   and not self.followers[r].is_caught_up(leader_end, now_ms, max_lag_ms)}
        if not lagging:
            return None
        self.pending_isr = self.isr - lagging
        return self.pending_isr

    def apply_isr_change(self, isr: frozenset[int], partition_epoch: int) -> bool:
        """The store accepted an ISR (ours or the controller's): adopt it, end any pending
        change; returns True when the HW moved."""
        self.isr = isr
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        return self.maybe_increment_high_watermark()

    def abort_isr_change(self) -> None:
        """The store refused the pending ISR change (a newer partition epoch won)."""
        self.pending_isr = None

    def required_offset_reached(self, required_offset: int) -> tuple[bool, int]:
        """For an acks=-1 produce waiting for ``required_offset`` (one past its last record):
        (done, error code). Kafka's ``checkEnoughReplicasReachOffset``: done once the HW passed
        it — with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
        ``min.insync.replicas`` meanwhile — or at once with NOT_LEADER_OR_FOLLOWER when this
        broker lost the leadership."""
        if not self.is_leader:
            return True, NotLeaderOrFollowerError.error_code
        if self.log.high_watermark < required_offset:
            return False, NONE
        if len(self.isr) < self.min_insync_replicas:
            return True, NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, NONE

    def maybe_increment_high_watermark(self) -> bool:
        """Advance the HW to the smallest log end offset among the in-sync replicas.

        Kafka's rule (``Partition.maybeIncrementLeaderHW``): the high watermark is the minimum
        LEO of the (maximal) ISR — every record below it is on every in-sync replica, so it
        survives the loss of any of them, and it never moves backwards on the leader. With
        ISR = {leader} (one broker, or followers all shrunk out) that is the leader's own LEO,
        so the HW follows every append at once. Kafka also skips ISR members that are already
        lagging past ``replica.lag.time.max.ms``; Strata waits for them until the shrink is
        applied, so an acknowledged acks=all record is on every replica of the ISR it was
        acknowledged under.
        Returns True when the HW moved (delayed fetches and produces may then complete).
        """
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        followers = self.followers
        for replica in self.maximal_isr:
            if replica != self.node_id:
                state = followers.get(replica)
                end = state.log_end_offset if state is not None else -1
                if end < new_hw:
                    new_hw = end
        if new_hw < 0:
            return False
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
    def append_records_to_leader(self, records: bytes, required_acks: int,
                                 origin: AppendOrigin = AppendOrigin.CLIENT,
                                 verification_guard: int | None = None) -> LogAppendInfo:
        """Append a record set as the leader; raises Kafka errors. ``origin`` COORDINATOR is a
        transaction coordinator's markers (WriteTxnMarkers), else a client's produce.

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
        info = self.log.append_as_leader(records, self.leader_epoch, origin, verification_guard)
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
        last_stable_offset = log.last_stable_offset(high_watermark)
        # Followers read to the LEO, read_uncommitted consumers to the HW, read_committed ones
        # to the LSO (``Log.read`` then also lists the aborted transactions the data overlaps).
        if isolation is FetchIsolation.TXN_COMMITTED:
            info = log.read(fetch_offset, max_bytes, last_stable_offset, min_one_message,
                            LogIsolation.TXN_COMMITTED)
        else:
            bound = log_end_offset if isolation is FetchIsolation.LOG_END else high_watermark
            info = log.read(fetch_offset, max_bytes, bound, min_one_message)
        slices = info.slices
        size = slices[0].length if len(slices) == 1 else sum(s.length for s in slices)
        return LogReadResult(slices, size, high_watermark, last_stable_offset,
                             log.log_start_offset, log_end_offset, info.aborted_transactions)

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
        elif isolation is FetchIsolation.TXN_COMMITTED:
            last_fetchable = log.last_stable_offset()
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
        """DeleteRecords: move the log start offset up to ``offset`` (-1 = the HW); returns the
        offset asked for (-1 resolved), which the low watermark must reach before the request
        is answered (Kafka's ``requestedOffset``, ``delayed_delete_records``). Compacted-only
        topics refuse (POLICY_VIOLATION), like Kafka; offsets past the HW are
        OFFSET_OUT_OF_RANGE (from the log)."""
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
        log.delete_records_before(offset)
        return offset
