"""``GroupCoordinator``: the broker's classic group coordinator — groups, ownership, timers.

Kafka's ``GroupCoordinator`` runtime around the pure parts (``classic_group``, ``state``,
``membership``, ``rebalance``) and the log (``metadata_manager``). Owns:

* the groups this broker coordinates, by id: those of the ``__consumer_offsets`` partitions it
  leads and has loaded (``on_election`` replays a partition; until that is done its groups
  answer COORDINATOR_LOAD_IN_PROGRESS; ``on_resignation`` unloads them, parked requests
  answered NOT_COORDINATOR). Other groups answer NOT_COORDINATOR;
* the checks every group request passes first (Kafka's ``validateGroupStatus``): a valid group
  id (empty only for OffsetCommit, OffsetFetch, DescribeGroups, DeleteGroups), the coordinator
  active, the group's partition loaded and led here;
* the API entry points the handlers call for membership (JoinGroup, SyncGroup, Heartbeat,
  LeaveGroup) and administration (DescribeGroups, ListGroups, DeleteGroups). Parked requests
  (JoinGroup, SyncGroup) are asyncio futures resolved by the membership callbacks. The offset
  APIs (OffsetCommit, TxnOffsetCommit and its markers, OffsetFetch, OffsetDelete, offset
  expiry) are the base class's, ``offset_metadata_manager.OffsetMetadataManager``;
* the timers: after each request the group's due deadlines are expired at once, and one task
  sleeps until the earliest deadline of all groups (woken when a request makes an earlier
  one), then expires what is due. ``tick()`` does the same by hand (tests move a
  ``ManualClock`` and call it);
* ``__consumer_offsets`` itself: created on first use (FindCoordinator), with
  ``offsets.topic.num.partitions`` partitions and ``cleanup.policy=compact``.

The consumer groups of KIP-848 are ``consumer_groups`` (``consumer_group_coordinator``): a
group id is one or the other; their offsets live in an empty classic group of the same id,
which the admin APIs here show as the consumer group it is.

Event-loop only; no locks (Kafka's group locks are the loop's single thread here).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, TypeVar

from strata.broker.config import BrokerConfig
from strata.broker.coordinator_partition import partition_for
from strata.broker.group.classic_group import (
    DEAD_GROUP_SUMMARY,
    ClassicGroup,
    GroupSummary,
    OffsetAndMetadata,
    TopicPartition,
)
from strata.broker.group.consumer_group_coordinator import (
    ConsumerGroupCoordinator,
)
from strata.broker.group.consumer_group_membership import ConsumerGroupConfig
from strata.broker.group.member import UNKNOWN_MEMBER_ID, JoinGroupResult, SyncGroupResult
from strata.broker.group.membership import GroupMembership, JoinRequest
from strata.broker.group.metadata_manager import (
    OFFSETS_TOPIC,
    GroupMetadataManager,
    OffsetsTopicConfig,
)
from strata.broker.group.offset_metadata_manager import OffsetMetadataManager
from strata.broker.group.rebalance import GroupConfig
from strata.broker.group.state import GroupState
from strata.broker.group.transactional_offsets import PendingTransactionalOffsets
from strata.broker.replication.replica_manager import ReplicaManager
from strata.broker.topic_store import TopicStore
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import Clock

if TYPE_CHECKING:
    from strata.broker.metrics.group_metrics import GroupMetrics

logger = logging.getLogger(__name__)

CreateTopic = Callable[[str, int, int, Mapping[str, str]], Awaitable[None]]
"""``create(name, partitions, replication_factor, configs)``: registers and hosts a topic."""

EMPTY_GROUP_SUMMARY: Final = GroupSummary("", "", "", ())
R = TypeVar("R")


def group_config(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
        max_size=config.get_int("group.max.size"),
    )


def offsets_topic_config(config: BrokerConfig) -> OffsetsTopicConfig:
    return OffsetsTopicConfig(
        num_partitions=config.get_int("offsets.topic.num.partitions"),
        replication_factor=config.get_int("offsets.topic.replication.factor"),
        segment_bytes=config.get_int("offsets.topic.segment.bytes"),
        retention_ms=config.get_int("offsets.retention.minutes") * 60 * 1000,
        metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
        commit_timeout_ms=config.get_int("offsets.commit.timeout.ms"),
    )


class GroupCoordinator(OffsetMetadataManager):
    """See the module docstring. ``await startup()`` to serve; ``shutdown()`` to stop."""

    def __init__(self, *, group: GroupConfig, offsets: OffsetsTopicConfig, clock: Clock,
                 replica_manager: ReplicaManager, topic_store: TopicStore,
                 create_topic: CreateTopic,
                 consumer: ConsumerGroupConfig | None = None) -> None:
        self.config = group
        self.offsets_config = offsets
        self.clock = clock
        self.replica_manager = replica_manager
        self.topic_store = topic_store
        self._create_topic = create_topic
        self.manager = GroupMetadataManager(replica_manager, clock)
        self.membership = GroupMembership(group, self)
        self.consumer_groups = ConsumerGroupCoordinator(self, consumer or ConsumerGroupConfig())
        self.metrics: GroupMetrics | None = None  # set by the broker's metrics wiring
        # In a cluster: the leader of a partition as the metadata has it (this broker may not
        # host every __consumer_offsets partition).
        self.leader_lookup: Callable[[str, int], int | None] | None = None
        self._groups: dict[str, ClassicGroup] = {}
        self.pending_txn_offsets = PendingTransactionalOffsets()
        self._owned: set[int] = set()
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._active = False
        self._topic_lock = asyncio.Lock()
        self._timer_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._timer_target: float | None = None

    # ================================================================ lifecycle
    async def startup(self, *, run_timers: bool = True) -> None:
        """Serve: load every ``__consumer_offsets`` partition led here; with ``run_timers``
        a task expires deadlines as they come (else call ``tick()``)."""
        self._active = True
        record = self.topic_store.get(OFFSETS_TOPIC)
        if record is not None:
            for index in range(record.partitions):
                self.on_election(index)
        if run_timers and self._timer_task is None:
            self._timer_task = asyncio.get_running_loop().create_task(
                self._run_timers(), name="strata-group-coordinator-timers")

    async def wait_loaded(self) -> None:
        """Until every partition being loaded is (tests, and the server's readiness)."""
        while self._loading:
            await asyncio.gather(*self._loading.values(), return_exceptions=True)

    async def shutdown(self) -> None:
        """Stop serving: loads stop, every group is unloaded (parked requests answered
        NOT_COORDINATOR), the timer task ends."""
        self._active = False
        for task in self._loading.values():
            task.cancel()
        self._loading.clear()
        for index in sorted(self._owned):
            self.on_resignation(index)
        if self._timer_task is not None:
            self._timer_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer_task
            self._timer_task = None

    @property
    def active(self) -> bool:
        return self._active

    # =================================================== __consumer_offsets topic
    def partition_count(self) -> int:
        record = self.topic_store.get(OFFSETS_TOPIC)
        return record.partitions if record is not None else self.offsets_config.num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count())

    def coordinator_node(self, group_id: str) -> int | None:
        """The leader of the group's ``__consumer_offsets`` partition (None: no leader)."""
        if self.leader_lookup is not None:
            return self.leader_lookup(OFFSETS_TOPIC, self.partition_for(group_id))
        hosted = self.replica_manager.get_partition(OFFSETS_TOPIC, self.partition_for(group_id))
        if hosted is None or hosted.log.offline:
            return None
        return hosted.leader_id

    async def ensure_offsets_topic(self) -> ErrorCode:
        """Create ``__consumer_offsets`` if it does not exist (Kafka does on the first
        FindCoordinator); COORDINATOR_NOT_AVAILABLE if that fails."""
        if self.topic_store.get(OFFSETS_TOPIC) is not None:
            return ErrorCode.none
        async with self._topic_lock:
            if self.topic_store.get(OFFSETS_TOPIC) is None:
                config = self.offsets_config
                try:
                    await self._create_topic(OFFSETS_TOPIC, config.num_partitions,
                                             config.replication_factor, config.topic_configs())
                except Exception:
                    logger.exception("cannot create %s", OFFSETS_TOPIC)
                    if self.topic_store.get(OFFSETS_TOPIC) is None:
                        return ErrorCode.coordinator_not_available
                else:
                    logger.info("created %s with %d partitions", OFFSETS_TOPIC,
                                config.num_partitions)
                for index in range(self.partition_count()):
                    self.on_election(index)
        return ErrorCode.none

    # ================================================================ ownership
    def on_election(self, index: int) -> None:
        """This broker now leads ``__consumer_offsets-index``: load its groups."""
        if not self._active or index in self._owned or index in self._loading:
            return
        hosted = self.replica_manager.get_partition(OFFSETS_TOPIC, index)
        if hosted is None or not hosted.is_leader:
            return
        if hosted.log.log_end_offset <= hosted.log.log_start_offset:
            self._owned.add(index)  # nothing to replay
            return
        self._loading[index] = asyncio.get_running_loop().create_task(
            self._load(index), name=f"strata-load-{OFFSETS_TOPIC}-{index}")

    async def _load(self, index: int) -> None:
        started = self.clock.monotonic_ms()
        try:
            loaded = await self.manager.load_partition(index)
        except Exception:
            logger.exception("loading %s-%d failed", OFFSETS_TOPIC, index)
            self._loading.pop(index, None)
            return
        if self._loading.pop(index, None) is None:
            return  # resigned while loading
        for group_id, group in loaded.groups.items():
            self._groups[group_id] = group
            self.membership.on_group_loaded(group)
        self.consumer_groups.on_loaded(loaded.consumer_records)
        for producer_id, groups in loaded.pending.items():
            for group_id, offsets in groups.items():
                self.pending_txn_offsets.add(producer_id, group_id, offsets)
        self._owned.add(index)
        logger.info("loaded %d groups from %d records of %s-%d in %.0f ms", len(loaded.groups),
                    loaded.records, OFFSETS_TOPIC, index, self.clock.monotonic_ms() - started)
        self._wake.set()

    def on_resignation(self, index: int) -> None:
        """This broker no longer leads ``__consumer_offsets-index``: unload its groups."""
        task = self._loading.pop(index, None)
        if task is not None:
            task.cancel()
        self._owned.discard(index)
        count = self.partition_count()
        self.consumer_groups.on_resignation(index, count)
        unloaded = [g for g in self._groups if partition_for(g, count) == index]
        self.pending_txn_offsets.remove_groups(unloaded)
        for group_id in unloaded:
            group = self._groups.pop(group_id)
            if group.state is not GroupState.DEAD:
                self.membership.on_group_unloaded(group)

    def is_loading(self) -> bool:
        return bool(self._loading)

    # ============================================================== status check
    def _group_status(self, group_id: str | None, *, allow_empty: bool) -> ErrorCode | None:
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.invalid_group_id
        if not self._active:
            return ErrorCode.coordinator_not_available
        index = self.partition_for(group_id)
        if index in self._loading:
            return ErrorCode.coordinator_load_in_progress
        if index not in self._owned:
            return ErrorCode.not_coordinator
        return None

    def _new_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self.clock)
        self._groups[group_id] = group
        return group

    def groups(self) -> list[ClassicGroup]:
        """Every group coordinated here (a snapshot of the map, for metrics)."""
        return list(self._groups.values())

    def group(self, group_id: str) -> ClassicGroup | None:
        return self._groups.get(group_id)

    def put_group(self, group: ClassicGroup) -> None:
        """``group`` replaces the group of its id (online migration's conversions)."""
        self._groups[group.group_id] = group

    # ================================================================= requests
    async def join_group(self, group_id: str, request: JoinRequest) -> JoinGroupResult:
        error = self._group_status(group_id, allow_empty=False)
        if error is not None:
            return JoinGroupResult(error, request.member_id)
        config = self.config
        if not (config.min_session_timeout_ms <= request.session_timeout_ms
                <= config.max_session_timeout_ms):
            return JoinGroupResult(ErrorCode.invalid_session_timeout, request.member_id)
        if self.consumer_groups.is_mixed(group_id):  # classic members of a consumer group
            return self.consumer_groups.classic_join(group_id, request)
        group = self._groups.get(group_id)
        if group is None:
            if request.member_id != UNKNOWN_MEMBER_ID:
                return JoinGroupResult(ErrorCode.unknown_member_id, request.member_id)
            group = self._new_group(group_id)
        inconsistent = self.consumer_groups.on_classic_join(group_id)
        if inconsistent is not None:
            return JoinGroupResult(inconsistent, request.member_id)
        future: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()
        self.membership.join_group(group, request, _resolver(future))
        self._after(group)
        return await future

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None,
                         assignments: Mapping[str, bytes], protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncGroupResult:
        error = self._group_status(group_id, allow_empty=False)
        if error is ErrorCode.coordinator_load_in_progress:
            # The rebalance in flight is lost with the old coordinator: rejoin (Kafka's rule;
            # old clients do not expect COORDINATOR_LOAD_IN_PROGRESS here).
            return SyncGroupResult(ErrorCode.rebalance_in_progress)
        if error is not None:
            return SyncGroupResult(error)
        if self.consumer_groups.is_mixed(group_id):
            return self.consumer_groups.classic_sync(group_id, generation_id, member_id,
                                                     group_instance_id, protocol_type,
                                                     protocol_name)
        group = self._groups.get(group_id)
        if group is None:
            return SyncGroupResult(ErrorCode.unknown_member_id)
        future: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
        self.membership.sync_group(group, generation_id, member_id, group_instance_id,
                                   assignments, _resolver(future), protocol_type, protocol_name)
        self._after(group)
        return await future

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        error = self._group_status(group_id, allow_empty=False)
        if error is ErrorCode.coordinator_load_in_progress:
            return ErrorCode.none  # the group is loading: answer blindly (Kafka's rule)
        if error is not None:
            return error
        if self.consumer_groups.is_mixed(group_id):
            return self.consumer_groups.classic_heartbeat(group_id, member_id,
                                                          group_instance_id, generation_id)
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        result = self.membership.heartbeat(group, member_id, group_instance_id, generation_id)
        self._after(group)
        return result

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        error = self._group_status(group_id, allow_empty=False)
        if error is not None:
            return error, []
        if self.consumer_groups.is_mixed(group_id):
            return self.consumer_groups.classic_leave(group_id, list(members))
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id] * len(members)
        result = self.membership.leave_group(group, members)
        self._after(group)
        return result

    # ------------------------------------------------------------------- admin
    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        error = self._group_status(group_id, allow_empty=True)
        if error is not None:
            return error, EMPTY_GROUP_SUMMARY
        group = self._groups.get(group_id)
        if group is None or group_id in self.consumer_groups:  # not a classic group (Kafka)
            return ErrorCode.none, DEAD_GROUP_SUMMARY
        return ErrorCode.none, group.summary()

    def list_groups(self) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        """(error, [(group id, protocol type, state)]) of every group coordinated here."""
        if not self._active:
            return ErrorCode.coordinator_not_available, []
        error = ErrorCode.coordinator_load_in_progress if self._loading else ErrorCode.none
        return error, [(g.group_id, g.protocol_type or "", str(g.state))
                       for g in self._groups.values() if g.group_id not in self.consumer_groups]

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            if group_id in results:
                continue
            error = self._group_status(group_id, allow_empty=True)
            if error is not None:
                results[group_id] = error
                continue
            consumer = self.consumer_groups.delete(group_id)
            if consumer is not None and consumer != ErrorCode.none:  # NON_EMPTY_GROUP, ...
                results[group_id] = consumer
                continue
            group = self._groups.get(group_id)
            if group is None or group.state is GroupState.DEAD:
                results[group_id] = consumer or ErrorCode.group_id_not_found
            elif group.state is GroupState.EMPTY:
                removed = self._cleanup(group, group.remove_all_offsets())
                logger.info("deleted group %s and its %d offsets", group_id, removed)
                results[group_id] = ErrorCode.none
            else:
                results[group_id] = ErrorCode.non_empty_group
        return results

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                       *, unknown_group: ErrorCode = ErrorCode.illegal_generation
                       ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit (the base class's); to a consumer group the committer is first checked
        against its member epochs, then the offsets go to the group's offsets holder."""
        if self._group_status(group_id, allow_empty=True) is None:
            error = self.consumer_groups.offset_commit_error(group_id, member_id, generation_id)
            if error is not None and error != ErrorCode.none:
                return dict.fromkeys(offsets, error)
            if error is not None:  # a consumer group's commit: the holder takes it as-is
                member_id, group_instance_id, generation_id = "", None, -1
        return super().commit_offsets(group_id, member_id, group_instance_id, generation_id,
                                      offsets, unknown_group=unknown_group)

    def commit_transactional_offsets(
            self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
            group_instance_id: str | None, generation_id: int,
            offsets: Mapping[TopicPartition, OffsetAndMetadata],
            verification_guard: int | None = None) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit (the base class's), checked against a consumer group's epochs."""
        if self._group_status(group_id, allow_empty=False) is None:
            error = self.consumer_groups.offset_commit_error(group_id, member_id, generation_id)
            if error is not None and error != ErrorCode.none:
                return dict.fromkeys(offsets, error)
            if error is not None:
                member_id, group_instance_id, generation_id = "", None, -1
        return super().commit_transactional_offsets(
            group_id, producer_id, producer_epoch, member_id, group_instance_id,
            generation_id, offsets, verification_guard)

    def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                       ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete (the base class's); a consumer group keeps the offsets of the topics
        its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC)."""
        subscribed = self.consumer_groups.subscribed_topics(group_id)
        if not subscribed or self._group_status(group_id, allow_empty=False) is not None:
            return super().delete_offsets(group_id, partitions)
        kept = {tp: ErrorCode.group_subscribed_to_topic for tp in partitions
                if tp[0] in subscribed}
        error, errors = super().delete_offsets(
            group_id, [tp for tp in partitions if tp not in kept])
        return error, {**errors, **kept} if error == ErrorCode.none else errors

    def _expired_offsets(self, group: ClassicGroup, now_ms: int,
                         retention_ms: int) -> list[TopicPartition]:
        if group.group_id in self.consumer_groups:
            return self.consumer_groups.expired_offsets(group, now_ms, retention_ms)
        return group.expired_offsets(now_ms, retention_ms)

    # ============================================================ GroupStore
    def store_group(self, group: ClassicGroup, assignment: Mapping[str, bytes],
                    on_done: Callable[[ErrorCode], None]) -> None:
        """``GroupStore`` for the membership protocol: one broker, so done when appended. A
        generation that reaches Stable here is a completed rebalance (``metrics``)."""
        completing = group.state is GroupState.COMPLETING_REBALANCE
        on_done(self.manager.store_group(self.partition_for(group.group_id), group, assignment))
        if completing and group.state is GroupState.STABLE and self.metrics is not None:
            self.metrics.classic_rebalance_completed()

    # ================================================================== timers
    def tick(self) -> None:
        """Expire every deadline due now, in every group."""
        now = self.clock.monotonic_ms()
        for group in list(self._groups.values()):
            self.membership.expire_due(group, now)
        self.consumer_groups.tick(now)

    def next_deadline(self) -> float | None:
        deadlines = [self.membership.next_deadline(g) for g in self._groups.values()]
        deadlines.append(self.consumer_groups.next_deadline())
        return min((d for d in deadlines if d is not None), default=None)

    def _after(self, group: ClassicGroup) -> None:
        """After a request changed ``group``: expire what is due now, and make sure the timer
        task wakes for the group's next deadline."""
        self.membership.expire_due(group, self.clock.monotonic_ms())
        self._wake_timers(self.membership.next_deadline(group))

    def _wake_timers(self, deadline: float | None) -> None:
        target = self._timer_target
        if deadline is not None and (target is None or deadline < target):
            self._wake.set()

    async def _run_timers(self) -> None:
        while True:
            self._wake.clear()
            try:
                self.tick()
            except Exception:
                logger.exception("group coordinator timers failed")
            deadline = self.next_deadline()
            self._timer_target = deadline
            timeout = (None if deadline is None
                       else max(0.0, (deadline - self.clock.monotonic_ms()) / 1000.0))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)


def _resolver(future: asyncio.Future[R]) -> Callable[[R], None]:
    def resolve(result: R) -> None:
        if not future.done():  # the request may have been cancelled (connection closed)
            future.set_result(result)
    return resolve
