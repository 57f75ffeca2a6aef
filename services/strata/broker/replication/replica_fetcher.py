"""Replica fetchers: the follower's side of replication, one task per leader broker.

Kafka's ``ReplicaFetcherManager`` / ``ReplicaFetcherThread``. ``ReplicaFetcherManager`` keeps one
``ReplicaFetcher`` per leader broker this broker follows partitions of; the cluster layer calls
``add_partitions`` after ``ReplicaManager.make_follower`` and ``remove_partitions`` when a
partition stops following (became leader, was deleted, or its leader moved).

Each partition goes through two phases with its leader:

1. truncation (KIP-101/279): OffsetForLeaderEpoch for the follower's latest leader epoch, then
   ``follower_truncation.truncation_for`` decides where to cut a tail the leader does not have
   (records the follower got from a previous leader that were never committed); repeated until
   done. An empty log skips this.
2. fetching: Fetch v11 with ``replica_id`` = this broker, from the log end offset, at the
   partition's leader epoch (``current_leader_epoch``: a stale leader or follower is fenced),
   written and read by hand (``strata.client.fetch_codec``: the records stay in the response frame),
   in an incremental fetch session (KIP-227, ``FetchSessionHandler``): each request names only the
   partitions whose position moved (and forgets those no longer fetched), each answer carries only
   the partitions with news, so idle partitions cost neither side an encode, a decode or a call.
   Whole batches are appended as the leader wrote them (``Log.append_as_follower``: offsets and
   epochs kept, CRC checked); the high watermark becomes min(leader's HW, our log end offset).
   The log start offset moves up to the leader's (Kafka's ``maybeIncrementLogStartOffset``,
   reason ``LeaderOffsetIncremented``: records deleted by DeleteRecords or retention there go
   here too), and each request reports ours (``log_start_offset``): the leader answers
   DeleteRecords once every live replica's is past the deleted records.

Steady state: once a round fetched every partition of the fetcher (none paused, truncating or
throttled) in an open session, the following rounds recompute only the positions that may have
moved — the partitions the last answer carried (appends, a log start followed, an out-of-range
reset) — and ask with ``FetchSessionHandler.build_changes``: the same request as recomputing
every position, in time proportional to the partitions with news, not to all the fetcher
follows (~333 a leader at 1,000 partitions). Anything else that may move a position or the set
(partitions added, removed or paused, a truncation, a storage error, a throttle in force) ends
the steady state until a full round finds it again, and a full round runs at least every
``FULL_REBUILD_INTERVAL_S`` (a bound for what no event says here: our own retention moving a
log start offset).

Replication throttles (KIP-73, Kafka's ``shouldFollowerThrottle``): a partition throttled on the
follower side (``follower.replication.throttled.replicas``) is left out of the request while
this replica is not in sync (behind the leader's high watermark at its last fetch) and
``follower.replication.throttled.rate`` is exceeded; when every partition is left out the
fetcher waits ``replica.fetch.backoff.ms``. Bytes fetched for throttled partitions are recorded
against that rate, in sync or not.

Errors per partition: FENCED_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER / UNKNOWN_LEADER_EPOCH /
UNKNOWN_TOPIC_OR_PARTITION pause the partition for ``replica.fetch.backoff.ms`` (the cluster
layer re-adds it with the new leadership); OFFSET_OUT_OF_RANGE restarts it empty at the leader's
log start offset when we are behind it, or truncates to the leader's end when we are ahead; a
storage error takes the partition out of fetching (its log is offline). A connection failure
backs off ``replica.fetch.backoff.ms`` and retries. Nothing here blocks the loop: appends touch
the page cache only, as on the leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from strata.broker.replication.follower_truncation import truncation_for
from strata.broker.replication.partition import Partition
from strata.broker.replication.replica_manager import ReplicaManager
from strata.client.broker_client import BrokerClient, BrokerUnavailableError
from strata.client.fetch_codec import (
    FETCH_VERSION,
    FetchPosition,
    encode_fetch_request,
    read_fetch_response,
)
from strata.client.fetch_session_handler import FetchRequestData, FetchSessionHandler
from strata.client.security import ClientSecurity
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import decode_response_body
from strata.storage import record_batch as rb
from strata.storage.errors import StorageError
from strata.storage.log import Log

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

OFFSET_FOR_LEADER_EPOCH_VERSION: Final = 3
LIST_OFFSETS_VERSION: Final = 5
EARLIEST_TIMESTAMP: Final = -2
LATEST_TIMESTAMP: Final = -1
FULL_REBUILD_INTERVAL_S: Final = 1.0

# Top-level Fetch errors that only say the session is gone or out of step (KIP-227).
_SESSION_ERRORS: Final = frozenset({
    ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch,
    ErrorCode.fetch_session_topic_id_error,
})

_RETRIABLE_LEADERSHIP: Final = frozenset({
    ErrorCode.fenced_leader_epoch, ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_leader_epoch, ErrorCode.unknown_topic_or_partition,
})


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """Kafka's replica.fetch.* settings."""

    wait_max_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 * 1024 * 1024
    partition_max_bytes: int = 1024 * 1024
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30_000


@dataclass(slots=True)
class _FetchState:
    leader_epoch: int
    truncating: bool = True
    paused_until: float = 0.0
    lag: int | None = None  # leader's HW - our LEO after the last fetch with records

    @property
    def in_sync(self) -> bool:  # Kafka's PartitionFetchState.isReplicaInSync
        return self.lag is not None and self.lag <= 0


@dataclass(frozen=True, slots=True)
class LeaderEndpoint:
    node_id: int
    host: str
    port: int


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader."""

    def __init__(self, replica_manager: ReplicaManager, leader: LeaderEndpoint,
                 config: FetcherConfig, security: ClientSecurity | None = None) -> None:
        self.replica_manager = replica_manager
        self.leader = leader
        self.config = config
        self.node_id = replica_manager.node_id
        self.client = BrokerClient(leader.host, leader.port,
                                   client_id=f"strata-replica-fetcher-{self.node_id}",
                                   request_timeout_s=config.socket_timeout_ms / 1000,
                                   security=security)
        self.partitions: dict[TopicPartition, _FetchState] = {}
        self.session = FetchSessionHandler()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Steady state (module docstring): every partition's position as last asked, the
        # partitions whose position may have moved since, when a full round is due.
        self._positions: dict[TopicPartition, FetchPosition] | None = None
        self._moved: set[TopicPartition] = set()
        self._full_due = 0.0

    def add_partitions(self, epochs: Mapping[TopicPartition, int]) -> None:
        for tp, epoch in epochs.items():
            self.partitions[tp] = _FetchState(epoch)
        self._positions = None
        self._changed.set()

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)
        self._positions = None
        self._changed.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"strata-replica-fetcher-{self.leader.node_id}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.client.close()

    # ---------------------------------------------------------------------- loop
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        quota = self.replica_manager.replication_quotas.follower
        while True:
            now = loop.time()
            positions = self._positions
            steady = (positions is not None and now < self._full_due
                      and self.session.incremental and not quota.throttled_topics())
            ready: dict[TopicPartition, _FetchState] = {}
            if not steady:
                ready = {tp: s for tp, s in self.partitions.items() if s.paused_until <= now}
                if not ready:
                    self._changed.clear()
                    wake = min((s.paused_until for s in self.partitions.values()), default=None)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(),
                                               None if wake is None else max(wake - now, 0.001))
                    continue
            try:
                if steady and positions is not None:
                    await self._fetch_moved(positions)
                    continue
                truncating = {tp: s for tp, s in ready.items() if s.truncating}
                if truncating:
                    self._positions = None
                    await self._truncate(truncating)
                fetching = {tp: s for tp, s in ready.items()
                            if not s.truncating and tp in self.partitions}
                if fetching:
                    await self._fetch(fetching)
            except BrokerUnavailableError as exc:
                logger.warning("replica fetcher of broker %d: leader %d unreachable (%s); "
                               "retrying in %d ms", self.node_id, self.leader.node_id, exc,
                               self.config.backoff_ms)
                await asyncio.sleep(self.config.backoff_ms / 1000)
            except Exception:  # a bug must not end replication for good: log, back off, retry
                logger.exception("replica fetcher of broker %d (leader %d) failed; retrying in "
                                 "%d ms", self.node_id, self.leader.node_id,
                                 self.config.backoff_ms)
                self.session.handle_error()
                await self.client.close()
                await asyncio.sleep(self.config.backoff_ms / 1000)

    def _pause(self, tp: TopicPartition, why: str) -> None:
        state = self.partitions.get(tp)
        self._positions = None
        if state is not None:
            loop = asyncio.get_running_loop()
            state.paused_until = loop.time() + self.config.backoff_ms / 1000
            logger.info("replica fetcher of broker %d: %s-%d paused: %s", self.node_id, tp[0],
                        tp[1], why)

    def _hosted(self, tp: TopicPartition) -> Partition | None:
        partition = self.replica_manager.get_partition(*tp)
        if partition is None:
            self.partitions.pop(tp, None)
            self._positions = None
        return partition

    # ---------------------------------------------------------------- truncation
    async def _truncate(self, states: Mapping[TopicPartition, _FetchState]) -> None:
        asks: dict[TopicPartition, int] = {}
        for tp, state in states.items():
            partition = self._hosted(tp)
            if partition is None:
                continue
            latest = partition.log.latest_epoch
            if latest is None or partition.log_end_offset == 0:
                state.truncating = False  # nothing that could diverge
            else:
                asks[tp] = latest
        if not asks:
            return
        response = await self.client.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, {
                "replica_id": self.node_id,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": p, "current_leader_epoch": states[(topic, p)].leader_epoch,
                     "leader_epoch": epoch}
                    for (t, p), epoch in asks.items() if t == topic]}
                    for topic in dict.fromkeys(t for t, _ in asks)],
            })
        for topic in response.topics:
            for answer in topic.partitions:
                tp = (topic.topic, answer.partition)
                partition, pending = self._hosted(tp), self.partitions.get(tp)
                if partition is None or pending is None:
                    continue
                if answer.error_code != ErrorCode.none:
                    self._pause(tp, f"OffsetForLeaderEpoch answered {answer.error_code.name}")
                    continue
                log = partition.log
                cut = truncation_for(
                    answer.leader_epoch, answer.end_offset,
                    follower_end_offset_for=log.end_offset_for_epoch,
                    follower_log_end_offset=log.log_end_offset,
                    follower_high_watermark=log.high_watermark)
                if cut.offset < log.log_end_offset:
                    logger.info("broker %d truncates %s-%d from %d to %d (leader %d answered "
                                "epoch %d ends at %d)", self.node_id, tp[0], tp[1],
                                log.log_end_offset, cut.offset, self.leader.node_id,
                                answer.leader_epoch, answer.end_offset)
                    log.truncate_to(cut.offset)
                pending.truncating = not cut.done

    # ------------------------------------------------------------------- fetching
    async def _fetch(self, states: Mapping[TopicPartition, _FetchState]) -> None:
        offsets: dict[TopicPartition, int] = {}
        starts: dict[TopicPartition, int] = {}
        quota = self.replica_manager.replication_quotas.follower
        now_ms = self.replica_manager.clock.milliseconds()
        for tp, state in states.items():
            partition = self._hosted(tp)
            if partition is not None and not quota.should_throttle(tp[0], tp[1], state.in_sync,
                                                                   now_ms):
                offsets[tp] = partition.log_end_offset
                starts[tp] = partition.log_start_offset
        if not offsets:
            if any(tp in self.partitions for tp in states):  # all throttled: back off
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), self.config.backoff_ms / 1000)
            return
        config = self.config
        wanted = {(t, p): FetchPosition(t, p, states[(t, p)].leader_epoch, offset,
                                        config.partition_max_bytes, starts[(t, p)])
                  for (t, p), offset in offsets.items()}
        # Every partition fetched: the next rounds may recompute only what moves.
        self._positions = dict(wanted) if len(wanted) == len(self.partitions) else None
        self._moved.clear()
        self._full_due = asyncio.get_running_loop().time() + FULL_REBUILD_INTERVAL_S
        await self._send(self.session.build(wanted), wanted)

    async def _fetch_moved(self, positions: dict[TopicPartition, FetchPosition]) -> None:
        """A steady round: recompute the positions of the partitions that may have moved,
        ask for the changes (module docstring)."""
        changed: dict[TopicPartition, FetchPosition] = {}
        for tp in self._moved:
            partition = self._hosted(tp)
            position = positions.get(tp)
            if partition is None or position is None:
                self._positions = None  # gone meanwhile: a full round sorts it out
                return
            now_at = position._replace(fetch_offset=partition.log_end_offset,
                                       log_start_offset=partition.log_start_offset)
            if now_at != position:
                changed[tp] = positions[tp] = now_at
        self._moved.clear()
        await self._send(self.session.build_changes(changed), positions)

    async def _send(self, request: FetchRequestData,
                    wanted: Mapping[TopicPartition, FetchPosition]) -> None:
        """Send ``request`` (asking for ``wanted``) and apply its answer."""
        config = self.config
        session = self.session
        body = encode_fetch_request(
            self.node_id, config.wait_max_ms, config.min_bytes, config.max_bytes,
            request.to_send, session_id=request.session_id, session_epoch=request.epoch,
            forgotten=request.forgotten)
        try:
            frame, start = await self.client.request_encoded(ApiKey.FETCH, FETCH_VERSION, body)
        except BaseException:
            session.handle_error()
            raise
        response: Any = read_fetch_response(frame, start)
        if response is None:  # not what the hand reader expects: the codec says what is wrong
            response = decode_response_body(ApiKey.FETCH, FETCH_VERSION, frame, start)
        if not session.handle_response(response.error_code, response.session_id):
            if response.error_code in _SESSION_ERRORS:  # the next fetch is a full one
                logger.info("replica fetcher of broker %d: leader %d answered %s; opening a "
                            "new fetch session", self.node_id, self.leader.node_id,
                            response.error_code.name)
                return
            for tp in list(wanted):
                self._pause(tp, f"Fetch answered {response.error_code.name}")
            return
        moved = self._moved
        for topic in response.responses:
            for answer in topic.partitions:
                tp = (topic.topic, answer.partition_index)
                position = wanted.get(tp)
                if position is not None:
                    moved.add(tp)
                    await self._apply(tp, position.fetch_offset, answer)

    async def _apply(self, tp: TopicPartition, fetch_offset: int, answer: Any) -> None:
        partition = self._hosted(tp)
        if partition is None or tp not in self.partitions:
            return
        error = answer.error_code
        if error in _RETRIABLE_LEADERSHIP:
            self._pause(tp, f"Fetch answered {error.name}")
            return
        if error == ErrorCode.offset_out_of_range:
            await self._reset_out_of_range(tp, partition, fetch_offset)
            return
        if error != ErrorCode.none:
            self._pause(tp, f"Fetch answered {error.name}")
            return
        log = partition.log
        try:
            records = rb.whole_batches(answer.records or b"")
            if records and partition.log_end_offset == fetch_offset:
                log.append_as_follower(records)
                quota = self.replica_manager.replication_quotas.follower
                if quota.is_throttled(*tp):
                    quota.record(len(records), self.replica_manager.clock.milliseconds())
            state = self.partitions[tp]
            if records or state.lag is None:
                state.lag = max(0, answer.high_watermark - log.log_end_offset)
            log.update_high_watermark(min(answer.high_watermark, log.log_end_offset))
            self._follow_log_start_offset(tp, log, answer.log_start_offset)
        except StorageError as exc:
            logger.error("broker %d stops fetching %s-%d: %s", self.node_id, tp[0], tp[1], exc)
            self.partitions.pop(tp, None)
            self._positions = None

    def _follow_log_start_offset(self, tp: TopicPartition, log: Log,
                                 leader_log_start_offset: int) -> None:
        """Move our log start offset up to the leader's (``LeaderOffsetIncremented``). Never
        past our high watermark (Kafka refuses that too; the offset we fetched from was at or
        past the leader's log start, so only a log cut meanwhile gets here)."""
        if log.log_start_offset < leader_log_start_offset <= log.high_watermark:
            log.delete_records_before(leader_log_start_offset)
            logger.info("broker %d: %s-%d log start offset moved to %d "
                        "(LeaderOffsetIncremented)", self.node_id, tp[0], tp[1],
                        leader_log_start_offset)

    async def _reset_out_of_range(self, tp: TopicPartition, partition: Partition,
                                  fetch_offset: int) -> None:
        """Kafka's ``handleOutOfRangeError``: behind the leader's log start → restart empty
        there; ahead of its end (an unclean election) → truncate to its end."""
        state = self.partitions[tp]
        ends = {}
        for timestamp in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
            response = await self.client.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, {
                "replica_id": self.node_id, "isolation_level": 0,
                "topics": [{"name": tp[0], "partitions": [{
                    "partition_index": tp[1], "current_leader_epoch": state.leader_epoch,
                    "timestamp": timestamp}]}],
            })
            (answer,) = response.topics[0].partitions
            if answer.error_code != ErrorCode.none:
                self._pause(tp, f"ListOffsets answered {answer.error_code.name}")
                return
            ends[timestamp] = answer.offset
        start, end = ends[EARLIEST_TIMESTAMP], ends[LATEST_TIMESTAMP]
        log = partition.log
        if fetch_offset > end:
            logger.warning("broker %d truncates %s-%d to the leader's end %d (was at %d)",
                           self.node_id, tp[0], tp[1], end, fetch_offset)
            log.truncate_to(end)
        elif fetch_offset < start:
            logger.info("broker %d restarts %s-%d at the leader's log start %d", self.node_id,
                        tp[0], tp[1], start)
            log.truncate_fully_and_start_at(start)


class ReplicaFetcherManager:
    """One ``ReplicaFetcher`` per leader broker; partitions move between them as leaders do."""

    def __init__(self, replica_manager: ReplicaManager, config: FetcherConfig,
                 security: ClientSecurity | None = None) -> None:
        self.replica_manager = replica_manager
        self.config = config
        self.security = security  # TLS / SASL towards the leaders' inter-broker listener
        self.fetchers: dict[LeaderEndpoint, ReplicaFetcher] = {}
        self._leader_of: dict[TopicPartition, LeaderEndpoint] = {}

    def add_partitions(self, partitions: Mapping[TopicPartition, tuple[LeaderEndpoint, int]]
                       ) -> None:
        """Follow each partition's leader from its leader epoch (truncating first)."""
        self.remove_partitions(list(partitions))
        by_leader: dict[LeaderEndpoint, dict[TopicPartition, int]] = {}
        for tp, (leader, epoch) in partitions.items():
            by_leader.setdefault(leader, {})[tp] = epoch
            self._leader_of[tp] = leader
        for leader, epochs in by_leader.items():
            fetcher = self.fetchers.get(leader)
            if fetcher is None:
                fetcher = self.fetchers[leader] = ReplicaFetcher(self.replica_manager, leader,
                                                                 self.config, self.security)
                fetcher.start()
            fetcher.add_partitions(epochs)

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            leader = self._leader_of.pop(tp, None)
            if leader is not None and leader in self.fetchers:
                self.fetchers[leader].remove_partitions([tp])

    async def shutdown(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        self._leader_of.clear()
        for fetcher in fetchers:
            await fetcher.stop()
