"""Fetch v4-v18: read partitions (long poll) and answer with zero-copy record slices.

Consumers (``replica_id`` -1) read below the high watermark (read_uncommitted) or the last
stable offset (read_committed, equal to the HW while no transaction can be open); a request
with ``replica_id`` >= 0 (a follower; from v15 in ``replica_state``, KIP-903) reads up to the
log end offset. ``min_bytes`` / ``max_wait_ms`` make it a long poll woken by appends, bounded by
each partition's max bytes and the request's ``max_bytes`` (at least one batch, KIP-74) — see
``ReplicaManager.fetch_messages``. The response is encoded by ``fetch_response`` with the
records as ``FileSlice``s.

Fetch sessions (KIP-227, v7+) are honoured: ``strata.broker.fetch_session`` decides from
``session_id`` / ``session_epoch`` which partitions this request reads (the request's, or its
session's after adding, updating and forgetting) and, afterwards, which of them the response
carries. A refused session (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
FETCH_SESSION_TOPIC_ID_ERROR) is a top-level error with no partitions. A follower's incremental
fetch neither reads nor answers the session's quiet partitions (``strata.broker.replication.
quiet_partitions``: nothing to send or tell, nothing to change; the fetch still recorded): it
reads the rest at once and, with fewer than ``min_bytes``, parks on every partition of the
session (one registration for them all, ``Purgatory.wait_any``) until an append or a high
watermark move, re-checks only the partitions notified, then skips and reads again
(``_read_follower_session``) — the same answers as reading every partition, without the cost of
reading hundreds of unchanged ones.

Topic ids (KIP-516): from v13 topics (and forgotten topics) are named by ``topic_id``; an id
this broker does not know answers UNKNOWN_TOPIC_ID, and an id other than the one the hosted
log was created with (the topic was deleted and re-created under the same name meanwhile)
INCONSISTENT_TOPIC_ID. ``rack_id``, ``cluster_id``, ``replica_epoch``,
``replica_directory_id`` and the follower's ``high_watermark`` tag are ignored (no
rack-aware fetching, no KRaft quorum here).

v12+ (Kafka's ``Partition.fetchRecords``): a partition with ``last_fetched_epoch`` >= 0 is
checked against the leader-epoch cache first: when the log's end offset for that epoch is
below ``fetch_offset``, or the largest epoch known is older, the answer is ``diverging_epoch``
(that epoch and end offset) with no records, so the fetcher truncates; an epoch the cache does
not know, or an offset below the log start, is OFFSET_OUT_OF_RANGE. v16+ (KIP-951): a
partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries ``current_leader``
(the leader and its epoch as the metadata knows them, -1 if none) and the response's
``node_endpoints`` lists those leaders.

Client quotas (consumers only; a follower's Fetch is exempt from both): one fetch reads at
most what the client's ``consumer_byte_rate`` allows in a quota window (Kafka caps
``max_bytes`` so); then, as Kafka's ``handleFetchRequest``, the records' bytes are charged to
``consumer_byte_rate`` and the request's thread time so far to ``request_percentage``. If
either throttles, the response is the fetch context's *throttled response*: the larger
throttle time and no partitions at all — the bytes charged are taken back ("unrecorded"),
the client retries after the throttle, and a fetch session is left as the request left it
(an incremental session keeps its epoch and cached partitions, so what was not sent is sent
next time; a full fetch creates no session). The connection then mutes the client for the
throttle time (``strata.broker.quotas.request_quotas``).

Authorization (with ``authorizer.class.name``): a follower needs ClusterAction on the Cluster,
a consumer Read on each topic; a partition refused is TOPIC_AUTHORIZATION_FAILED (Kafka
answers a follower without ClusterAction so, too).

Bad values: a negative ``partition_max_bytes`` (or a negative request ``max_bytes``, which
would leave every partition a negative budget) answers that partition INVALID_REQUEST and is
never read. Kafka passes the size down until ``LogSegment.read`` throws "Invalid max size" and
answers UNKNOWN_SERVER_ERROR with a stack trace in its log; no client sends one, so Strata names
the cause instead and logs nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Final

from strata.broker.broker_state import BrokerState
from strata.broker.fetch_session import (
    FetchContext,
    FetchPartition,
    FetchSession,
    PartitionAnswer,
    PartitionKey,
)
from strata.broker.network.fetch_response import (
    FIRST_TOPIC_ID_VERSION,
    NodeEndpoint,
    PartitionTags,
    TopicResults,
    encode_fetch_response,
)
from strata.broker.network.request_context import RequestContext, Response
from strata.broker.quotas.request_quotas import charge_fetch, quota_user
from strata.broker.replication.partition import FetchIsolation, PartitionError, error_code_of
from strata.broker.replication.partition_results import FetchPartitionResult, PartitionFetchInfo
from strata.broker.replication.quiet_partitions import (
    SessionWatch,
    has_records_or_error,
    is_quiet,
)
from strata.protocol.error_codes import ErrorCode
from strata.security.acl import AclOperation, ResourceType
from strata.storage.errors import StorageError

READ_COMMITTED: Final = 1
ZERO_UUID: Final = uuid.UUID(int=0)
_REFUSED = FetchPartitionResult(ErrorCode.topic_authorization_failed)
_INVALID = FetchPartitionResult(ErrorCode.invalid_request)
_UNKNOWN_TOPIC_ID = FetchPartitionResult(ErrorCode.unknown_topic_id)
_INCONSISTENT_TOPIC_ID = FetchPartitionResult(ErrorCode.inconsistent_topic_id)
_LEADER_ERRORS: Final = frozenset({ErrorCode.not_leader_or_follower,
                                   ErrorCode.fenced_leader_epoch})


async def handle(ctx: RequestContext, request: Any) -> Response:
    state = ctx.state
    version = ctx.header.api_version
    read_committed = request.isolation_level == READ_COMMITTED
    by_id = version >= FIRST_TOPIC_ID_VERSION
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    context = _fetch_context(state, request, version, replica_id)
    if context.error_code:
        return encode_fetch_response(version, (), read_committed=read_committed,
                                     error_code=context.error_code)
    if replica_id >= 0:
        isolation = FetchIsolation.LOG_END
    elif read_committed:
        isolation = FetchIsolation.TXN_COMMITTED
    else:
        isolation = FetchIsolation.HIGH_WATERMARK
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    max_bytes = request.max_bytes
    quota = state.quotas.fetch if state.quotas is not None and replica_id < 0 else None
    if quota is not None and quota.enabled:
        window = quota.max_value_in_window(quota_user(ctx.principal), ctx.header.client_id or "")
        if window is not None:  # one fetch may not take more than a quota window allows
            max_bytes = max(0, min(max_bytes, int(window)))
    read = _Read(ctx, request, version, replica_id, isolation, max_bytes)
    if replica_id >= 0 and context.session is not None:
        answered, tags, results = await _read_follower_session(read, context, context.session,
                                                               max_wait_ms)
    else:
        answered, tags, results = await read.partitions(context.partitions, max_wait_ms)
    endpoints: dict[int, NodeEndpoint] = {}
    if version >= 16:
        for i, (p, result) in enumerate(zip(context.partitions, answered, strict=True)):
            if result.error_code in _LEADER_ERRORS and p.topic is not None:
                leader = _current_leader(state, ctx.listener, p.topic, p.partition, endpoints)
                tags[i] = tags.get(i, PartitionTags())._replace(current_leader=leader)
    throttle_ms = _charge_quotas(ctx, replica_id, sum(r.size for r in results))
    if throttle_ms > 0:
        ctx.throttle_time_ms = max(ctx.throttle_time_ms, throttle_ms)
        error_code, session_id = context.throttled_response()
        return encode_fetch_response(version, (), read_committed=read_committed,
                                     error_code=error_code, session_id=session_id,
                                     node_endpoints=list(endpoints.values()),
                                     throttle_time_ms=ctx.throttle_time_ms)
    kept: Sequence[int]
    if context.needs_answers:
        session_id, kept = context.complete(
            [PartitionAnswer(r.error_code, r.high_watermark, r.last_stable_offset,
                             r.log_start_offset, r.size, i in tags and
                             tags[i].diverging_epoch is not None)
             for i, r in enumerate(answered)],
            state.clock.milliseconds())
    else:
        session_id, kept = 0, range(len(answered))
    topics: list[TopicResults] = []
    last: str | uuid.UUID | None = None
    partitions: list[Any] = []
    for i in kept:
        p = context.partitions[i]
        topic: str | uuid.UUID = p.topic_id if by_id else (p.topic or "")
        if topic != last or not topics:
            partitions = []
            topics.append((topic, partitions))
            last = topic
        partitions.append((p.partition, answered[i], tags.get(i)))
    return encode_fetch_response(version, topics, read_committed=read_committed,
                                 session_id=session_id, node_endpoints=list(endpoints.values()),
                                 throttle_time_ms=ctx.throttle_time_ms)


class _Read:
    """One Fetch request's reads: its partitions answered without a read (refused, invalid,
    unknown or inconsistent topic id, diverged) or read through the replica manager."""

    __slots__ = ("allowed", "by_id", "ctx", "follower_allowed", "isolation", "max_bytes",
                 "min_bytes", "replica_id", "request_invalid", "with_epoch")

    def __init__(self, ctx: RequestContext, request: Any, version: int, replica_id: int,
                 isolation: FetchIsolation, max_bytes: int) -> None:
        self.ctx = ctx
        self.replica_id = replica_id
        self.isolation = isolation
        self.max_bytes = max_bytes
        self.min_bytes = request.min_bytes
        self.by_id = version >= FIRST_TOPIC_ID_VERSION
        self.with_epoch = version >= 9
        self.request_invalid = request.max_bytes < 0
        self.follower_allowed = replica_id < 0 or ctx.authorize(AclOperation.CLUSTER_ACTION,
                                                                ResourceType.CLUSTER)
        self.allowed: dict[str, bool] = {}

    async def partitions(self, partitions: Sequence[FetchPartition], max_wait_ms: int
                         ) -> tuple[list[FetchPartitionResult], dict[int, PartitionTags],
                                    list[FetchPartitionResult]]:
        """(one answer per partition in order, tags by index, the replica manager's results)."""
        ctx = self.ctx
        replica_id = self.replica_id
        by_id = self.by_id
        fetch_infos = []
        # One slot per partition read, in order: a result when it is answered without a read
        # (refused, invalid, diverged), else None and the replica manager's next result fills
        # it.
        slots: list[FetchPartitionResult | None] = []
        tags: dict[int, PartitionTags] = {}
        allowed = self.allowed
        replica_manager = ctx.state.replica_manager
        for p in partitions:
            name = p.topic
            if name is None:
                slots.append(_UNKNOWN_TOPIC_ID)
                continue
            may_read = allowed.get(name)
            if may_read is None:
                may_read = allowed[name] = self.follower_allowed and (
                    replica_id >= 0 or ctx.authorize(AclOperation.READ, ResourceType.TOPIC,
                                                     name))
            if not may_read:
                slots.append(_REFUSED)
                continue
            if self.request_invalid or p.max_bytes < 0:
                slots.append(_INVALID)
                continue
            if by_id or p.last_fetched_epoch >= 0:
                hosted = replica_manager.get_partition(name, p.partition)
                if hosted is not None and by_id and hosted.topic_id != p.topic_id:
                    slots.append(_INCONSISTENT_TOPIC_ID)
                    continue
                if hosted is not None and p.last_fetched_epoch >= 0:
                    diverged = _diverging_epoch(hosted, p)
                    if diverged is not None:
                        result, epoch_end = diverged
                        if epoch_end is not None:
                            tags[len(slots)] = PartitionTags(diverging_epoch=epoch_end)
                        slots.append(result)
                        continue
            info = PartitionFetchInfo(p.fetch_offset, p.max_bytes,
                                      p.current_leader_epoch if self.with_epoch else -1,
                                      p.log_start_offset)
            fetch_infos.append(((name, p.partition), info))
            slots.append(None)
        results = [] if not fetch_infos and slots else await replica_manager.fetch_messages(
            fetch_infos,
            max_wait_ms=max_wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            isolation=self.isolation,
            replica_id=replica_id,
        )
        read = iter(results)
        return [slot if slot is not None else next(read) for slot in slots], tags, results


async def _read_follower_session(read: _Read, context: FetchContext, session: FetchSession,
                                 max_wait_ms: int
                                 ) -> tuple[list[FetchPartitionResult], dict[int, PartitionTags],
                                            list[FetchPartitionResult]]:
    """A follower's incremental fetch: its quiet partitions skipped (``quiet_partitions``), the
    rest read at once; with fewer than ``min_bytes`` read, the long poll waits for an append
    to (or a high watermark move of) any partition of the session, then skips and reads again,
    until ``max_wait_ms`` passed. Only the session's candidates (``SessionWatch``) are looked
    at, not every partition of the session."""
    state = read.ctx.state
    replica_manager = state.replica_manager
    hosted = replica_manager.hosted
    purgatory = replica_manager.fetch_purgatory
    replica_id = read.replica_id
    clock = state.clock
    watch = session.watch
    if not isinstance(watch, SessionWatch):
        watch = session.watch = SessionWatch[FetchPartition]()
    deadline_ms = clock.milliseconds() + max_wait_ms
    while True:
        now_ms = clock.milliseconds()
        candidates = watch.candidates(context.session_partitions, session.membership,
                                      purgatory, now_ms)
        context.skip(partial(is_quiet, hosted, replica_id, now_ms, watch.clock), candidates)
        watch.clock.advance(now_ms)
        watch.read = context.partitions
        answered, tags, results = await read.partitions(context.partitions, 0)
        left_ms = deadline_ms - now_ms
        if (left_ms <= 0 or sum(r.size for r in results) >= read.min_bytes
                or any(r.error_code for r in results)):
            return answered, tags, results
        # Watch the session as one (``Purgatory.wait_any``) and re-check only the partitions
        # notified: the others are as the read just left them.
        by_key = watch.keys
        while True:
            fired = await purgatory.wait_any(by_key.keys(),
                                             (deadline_ms - clock.milliseconds()) / 1000)
            if not fired:
                deadline_ms = now_ms  # the last round: answer what there is
                break
            if has_records_or_error(hosted, [by_key[key] for key in dict.fromkeys(fired)]):
                break


def _charge_quotas(ctx: RequestContext, replica_id: int, records_size: int) -> int:
    """Charge a consumer's fetch to ``consumer_byte_rate`` and ``request_percentage`` (a
    follower's is exempt); the larger throttle time, the bytes unrecorded when throttled."""
    request_time = ctx.request_time
    if replica_id >= 0:
        if request_time is not None:
            request_time.exempt = True  # Kafka's sendResponseExemptThrottle
        return 0
    quotas = ctx.state.quotas
    if quotas is None:
        return 0
    now_ms = ctx.state.clock.milliseconds()
    request_throttle = request_time.charge(now_ms) if request_time is not None else 0
    bandwidth_throttle = charge_fetch(quotas, ctx.principal, ctx.header.client_id,
                                      records_size, now_ms)
    throttle = max(request_throttle, bandwidth_throttle)
    if throttle > 0:  # the response carries none of the bytes just charged
        quotas.fetch.unrecord(quota_user(ctx.principal), ctx.header.client_id or "",
                              records_size, now_ms)
    return throttle


def _fetch_context(state: BrokerState, request: Any, version: int,
                   replica_id: int) -> FetchContext:
    """The request's partitions resolved (names before v13, ids from v13) in its session's
    context (none before v7)."""
    by_id = version >= FIRST_TOPIC_ID_VERSION
    names = _topic_names(state) if by_id else {}
    fetch_data: list[tuple[PartitionKey, FetchPartition]] = []
    with_last_epoch = version >= 12
    for topic in request.topics:
        if by_id:
            topic_id: uuid.UUID = topic.topic_id or ZERO_UUID
            name = names.get(topic_id)
        else:
            topic_id, name = ZERO_UUID, topic.topic
        for p in topic.partitions:
            key: str | uuid.UUID = topic_id if by_id else topic.topic
            fetch_data.append(((key, p.partition), FetchPartition(
                name, topic_id, p.partition, p.fetch_offset, p.partition_max_bytes,
                p.current_leader_epoch if version >= 9 else -1,
                p.last_fetched_epoch if with_last_epoch else -1,
                getattr(p, "log_start_offset", -1))))
    if version < 7:
        return FetchContext(None, [p for _, p in fetch_data])
    to_forget: list[PartitionKey] = []
    for forgotten in request.forgotten_topics_data:
        forgotten_key: str | uuid.UUID = ((forgotten.topic_id or ZERO_UUID) if by_id
                                          else forgotten.topic)
        to_forget.extend((forgotten_key, index) for index in forgotten.partitions)
    context = state.fetch_sessions.new_context(
        session_id=request.session_id, epoch=request.session_epoch, privileged=replica_id >= 0,
        uses_topic_ids=by_id, fetch_data=fetch_data, to_forget=to_forget,
        now_ms=state.clock.milliseconds())
    if by_id and context.session is not None:
        for p in context.partitions:  # an id cached earlier may have been deleted since
            p.topic = names.get(p.topic_id)
    return context


def _diverging_epoch(hosted: Any, p: FetchPartition
                     ) -> tuple[FetchPartitionResult, tuple[int, int] | None] | None:
    """None to read; else the answer without a read: an error, or the offsets with the
    (epoch, end offset) where the fetcher's log diverged from this one."""
    try:
        epoch, end_offset = hosted.last_offset_for_leader_epoch(
            p.current_leader_epoch, p.last_fetched_epoch, fetch_only_from_leader=True)
        log_start = hosted.log_start_offset
        if epoch < 0 or end_offset < 0 or p.fetch_offset < log_start:
            return FetchPartitionResult(ErrorCode.offset_out_of_range), None
        if epoch < p.last_fetched_epoch or end_offset < p.fetch_offset:
            return FetchPartitionResult(ErrorCode.none, hosted.high_watermark,
                                        hosted.last_stable_offset, log_start), (epoch, end_offset)
    except (PartitionError, StorageError) as exc:
        return FetchPartitionResult(error_code_of(exc)), None
    return None


def _current_leader(state: BrokerState, listener: str | None, topic: str, index: int,
                    endpoints: dict[int, NodeEndpoint]) -> tuple[int, int]:
    """(leader id, leader epoch) of a partition as the metadata has it ((-1, -1) unknown);
    the leader's endpoint on ``listener`` joins ``endpoints``."""
    leader, epoch = -1, -1
    if state.cluster is not None:
        registration = state.cluster.image.partitions.get((topic, index))
        if registration is not None and registration.has_leader:
            leader, epoch = registration.leader, registration.leader_epoch
    else:
        hosted = state.replica_manager.get_partition(topic, index)
        if hosted is not None and hosted.leader_id is not None:
            leader, epoch = hosted.leader_id, hosted.leader_epoch
    if leader >= 0 and leader not in endpoints:
        for broker in state.live_brokers(listener):
            if broker.node_id == leader:
                endpoints[leader] = NodeEndpoint(broker.node_id, broker.host, broker.port,
                                                 broker.rack)
    return leader, epoch


_names_by_topics: dict[int, tuple[Mapping[str, Any], dict[uuid.UUID, str]]] = {}


def _topic_names(state: BrokerState) -> Mapping[uuid.UUID, str]:
    """Topic id -> name from the topic store, rebuilt only when its (immutable) mapping is
    replaced."""
    topics = state.topic_store.topics()
    cached = _names_by_topics.get(id(topics))
    if cached is not None and cached[0] is topics:
        return cached[1]
    if len(_names_by_topics) >= 16:
        _names_by_topics.clear()
    names = {record.topic_id: name for name, record in topics.items()}
    _names_by_topics[id(topics)] = (topics, names)
    return names
