"""Fetch sessions (KIP-227, incremental fetch): the broker's ``FetchSessionCache`` and the
``FetchContext`` one Fetch request runs in. Pure: no I/O; time (``now_ms``) and the session id
source (``random.Random``) are injected.

A session remembers, per partition, what the fetcher asked for (offset, max bytes, epochs) and
what it was last told (high watermark, last stable offset, log start offset), so an incremental
request names only what changed and an incremental response carries only the partitions with
news. Kafka's rules (``FetchManager.newContext``, ``FetchSession``, ``FetchSessionCache``):

* request metadata ``(session_id, epoch)``: epoch -1 (FINAL) is a sessionless full fetch (and
  closes ``session_id`` if given); epoch 0 (INITIAL) is a full fetch that closes ``session_id``
  if given and asks for a new session; epoch > 0 is an incremental fetch of ``session_id``;
* incremental: an unknown id is FETCH_SESSION_ID_NOT_FOUND; an epoch other than the session's
  is INVALID_FETCH_SESSION_EPOCH; a request that names topics differently from the session
  (names before Fetch v13, topic ids from v13) is FETCH_SESSION_TOPIC_ID_ERROR. Otherwise the
  request's partitions are added or updated, ``forgotten_topics_data`` removed, and the
  session's epoch moves on (``next_epoch``) *before* the read, so a duplicate of the request
  is refused. A session left with no partitions is closed and the fetch is sessionless;
* a full fetch creates its session after the read (``FetchContext.complete``) with the
  partitions answered; its first incremental epoch is 1. If the cache is full and nothing may
  be evicted, the response says session 0 and the fetcher goes on with full fetches;
* a throttled fetch (a client quota) is answered ``throttled_response``: no partitions at all.
  A full fetch then creates no session (session id 0; the fetcher starts over with a full
  fetch); an incremental one keeps its session as the request updated it, its epoch moved on,
  and what each partition was last told unchanged, so the partitions not sent are sent next
  time (Kafka's ``getThrottledResponse``). If another request of the session moved its epoch
  on meanwhile, the answer is INVALID_FETCH_SESSION_EPOCH;
* an incremental response includes a partition only if it has records, an error, a diverging
  epoch, or a high watermark / last stable offset / log start offset other than the one last
  sent; a partition included is moved to the end of the session (no starvation under
  ``max_bytes``). An error resets the remembered high watermark to -1, so the partition is
  sent again once the error is gone. ``FetchContext.skip`` lets the reader leave out, before
  reading, partitions the request did not name and that it knows could not be included (a
  follower's quiet partitions, ``strata.broker.replication.quiet_partitions``).

Eviction (``try_evict``, at most ``max_entries`` sessions,
``max.incremental.fetch.session.cache.slots``): first the least recently used session if it is
stale (unused for more than ``eviction_ms``, ``min.incremental.fetch.session.eviction.ms``);
otherwise the candidates are the sessions that were older than ``eviction_ms`` when last used,
plus, for a privileged newcomer (a follower's fetch), every consumer session. The smallest
candidate by (privileged, partition count, id) is evicted unless the newcomer's (privileged,
partition count, 0) is smaller. So a consumer's session never evicts a follower's, and a
larger session displaces a smaller one that is no longer young.

Mutated only on the broker's event loop (the Fetch handler); the cache's counters feed
``strata.broker.metrics.fetch_session_metrics``.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from strata.protocol.error_codes import ErrorCode

INVALID_SESSION_ID: Final = 0
INITIAL_EPOCH: Final = 0
FINAL_EPOCH: Final = -1
INVALID_HIGH_WATERMARK: Final = -1
DEFAULT_MAX_ENTRIES: Final = 1000
DEFAULT_EVICTION_MS: Final = 120_000

PartitionKey = tuple[str | uuid.UUID, int]
"""A session's key of a partition: (topic name, index) before Fetch v13, (topic id, index)
from v13 (KIP-516)."""


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's ``FetchMetadata.nextEpoch``): wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


@dataclass(slots=True)
class FetchPartition:
    """One partition of a fetch: what the fetcher asked (updated by each request naming it) and,
    inside a session, what it was last told."""

    topic: str | None  # None: a topic id this broker does not know (UNKNOWN_TOPIC_ID)
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    high_watermark: int = INVALID_HIGH_WATERMARK
    last_stable_offset: int = -1
    local_log_start_offset: int = -1
    # Its place in the session's order (least recently sent first), for ``FetchContext.skip``.
    position: int = field(default=0, compare=False)

    def update_request(self, other: FetchPartition) -> None:
        self.topic = other.topic
        self.fetch_offset = other.fetch_offset
        self.max_bytes = other.max_bytes
        self.current_leader_epoch = other.current_leader_epoch
        self.last_fetched_epoch = other.last_fetched_epoch
        self.log_start_offset = other.log_start_offset

    def maybe_update_response_data(self, answer: PartitionAnswer, update: bool) -> bool:
        """Whether an incremental response must include this partition's ``answer``; with
        ``update``, remember what it tells the fetcher (Kafka's ``maybeUpdateResponseData``)."""
        must_respond = answer.records_size > 0 or answer.diverging
        if self.high_watermark != answer.high_watermark:
            must_respond = True
            if update:
                self.high_watermark = answer.high_watermark
        if self.last_stable_offset != answer.last_stable_offset:
            must_respond = True
            if update:
                self.last_stable_offset = answer.last_stable_offset
        if self.local_log_start_offset != answer.log_start_offset:
            must_respond = True
            if update:
                self.local_log_start_offset = answer.log_start_offset
        if answer.error_code:
            must_respond = True
            if update:
                self.high_watermark = INVALID_HIGH_WATERMARK
        return must_respond


class PartitionAnswer(NamedTuple):
    """What a fetch answered for a partition, as far as the session needs to know."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records_size: int
    diverging: bool = False


@dataclass(eq=False)
class FetchSession:
    """A session's partitions in order, least recently sent first (``position`` ascending).
    ``membership`` counts the changes to which partitions it holds, and under which topic
    names; ``watch`` is the reader's own record of the session (the Fetch handler's, opaque
    here)."""

    id: int
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    partitions: dict[PartitionKey, FetchPartition] = field(default_factory=dict)
    membership: int = 0
    watch: object | None = None
    _next_position: int = 0

    def __post_init__(self) -> None:
        for partition in self.partitions.values():
            self.place_last(partition)

    def place_last(self, partition: FetchPartition) -> None:
        """Give ``partition`` the last place in the session's order."""
        partition.position = self._next_position
        self._next_position += 1

    @property
    def size(self) -> int:
        return len(self.partitions)

    def update(self, fetch_data: Iterable[tuple[PartitionKey, FetchPartition]],
               to_forget: Iterable[PartitionKey]) -> dict[int, FetchPartition]:
        """Add or update the request's partitions, drop the forgotten; each cached partition
        the request named, by ``id``."""
        named: dict[int, FetchPartition] = {}
        for key, requested in fetch_data:
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = cached = requested
                self.place_last(cached)
                self.membership += 1
            else:
                if cached.topic != requested.topic:
                    self.membership += 1
                cached.update_request(requested)
            named[id(cached)] = cached
        for key in to_forget:
            if self.partitions.pop(key, None) is not None:
                self.membership += 1
        return named


class FetchContext:
    """One Fetch request's view of its session: ``partitions`` to read, in order; after the
    read, ``complete`` says which answers go into the response and under which session id.
    ``error_code`` non-zero: the whole request is refused (no partitions, session id 0)."""

    def __init__(self, cache: FetchSessionCache | None, partitions: Sequence[FetchPartition], *,
                 error_code: ErrorCode = ErrorCode.none, session: FetchSession | None = None,
                 create: tuple[bool, bool] | None = None,
                 named: dict[int, FetchPartition] | None = None) -> None:
        self._cache = cache
        self.partitions = partitions
        self.session_partitions = partitions  # what ``skip`` narrows ``partitions`` from
        self._named = named or {}  # the session's partitions the request named, by id
        self.error_code = error_code
        self.session = session
        self._create = create  # (privileged, uses_topic_ids) of a full fetch's new session
        self._epoch = session.epoch if session is not None else None  # expected at the answer

    @property
    def incremental(self) -> bool:
        return self.session is not None

    @property
    def needs_answers(self) -> bool:
        """Whether ``complete`` reads the answers (a sessionless fetch keeps every one)."""
        return self.session is not None or (self._create is not None
                                             and self._cache is not None)

    def skip(self, may_skip: Callable[[FetchPartition], bool],
             candidates: Iterable[FetchPartition] | None = None) -> None:
        """Narrow ``partitions`` (an incremental session's) to those the request named and
        those ``may_skip`` does not let go: a skipped partition is neither read nor answered,
        and stays in the session as it was. With ``candidates`` (partitions of the session),
        every other partition the request did not name is skipped without asking
        ``may_skip``. ``may_skip`` is asked about every named partition too (its answer does
        not matter there). The order stays the session's. A full fetch answers every
        partition."""
        if self.session is None:
            return
        named = self._named
        if candidates is None:
            self.partitions = [p for p in self.session_partitions
                               if not may_skip(p) or id(p) in named]
            return
        chosen = dict(named)
        for p in candidates:
            chosen[id(p)] = p
        self.partitions = sorted((p for p in chosen.values()
                                  if not may_skip(p) or id(p) in named), key=_position)

    def throttled_response(self) -> tuple[ErrorCode, int]:
        """(error code, session id) of the response to a throttled fetch, which carries no
        partitions and changes nothing in the session."""
        session = self.session
        if session is None:
            return ErrorCode.none, INVALID_SESSION_ID
        if session.epoch != self._epoch:
            return ErrorCode.invalid_fetch_session_epoch, session.id
        return ErrorCode.none, session.id

    def complete(self, answers: Sequence[PartitionAnswer], now_ms: int
                 ) -> tuple[int, list[int]]:
        """(response session id, indexes into ``partitions`` of the answers to send)."""
        session = self.session
        if session is not None:
            kept = []
            for index, (partition, answer) in enumerate(zip(self.partitions, answers,
                                                            strict=True)):
                if partition.maybe_update_response_data(answer, True):
                    kept.append(index)
                    key = _key_of(partition, session.uses_topic_ids)
                    # Sent now: last in line next time, so no partition starves.
                    moved = session.partitions.pop(key, None)
                    if moved is not None:
                        session.partitions[key] = moved
                        session.place_last(moved)
            return session.id, kept
        every = list(range(len(self.partitions)))
        if self._create is None or self._cache is None:
            return INVALID_SESSION_ID, every
        privileged, uses_topic_ids = self._create
        for partition, answer in zip(self.partitions, answers, strict=True):
            partition.maybe_update_response_data(answer, True)
        cached = {_key_of(p, uses_topic_ids): p for p in self.partitions}
        session_id = self._cache.maybe_create_session(now_ms, privileged, uses_topic_ids,
                                                      lambda: cached)
        return session_id, every


def _position(partition: FetchPartition) -> int:
    return partition.position


def _key_of(partition: FetchPartition, uses_topic_ids: bool) -> PartitionKey:
    if uses_topic_ids:
        return partition.topic_id, partition.partition
    return partition.topic or "", partition.partition


class FetchSessionCache:
    """At most ``max_entries`` sessions by id; see the module docstring for the rules."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES,
                 eviction_ms: int = DEFAULT_EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self._sessions: dict[int, FetchSession] = {}  # least recently used first
        self.evictions = 0
        self.incremental_fetches = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    @property
    def partitions_cached(self) -> int:
        return sum(s.size for s in self._sessions.values())

    def new_context(self, *, session_id: int, epoch: int, privileged: bool,
                    uses_topic_ids: bool,
                    fetch_data: Sequence[tuple[PartitionKey, FetchPartition]],
                    to_forget: Sequence[PartitionKey], now_ms: int) -> FetchContext:
        """The context of a Fetch request with metadata ``(session_id, epoch)``."""
        requested = [p for _, p in fetch_data]
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            if epoch == FINAL_EPOCH:
                return FetchContext(self, requested)
            return FetchContext(self, requested, create=(privileged, uses_topic_ids))
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext(self, (), error_code=ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return FetchContext(self, (), error_code=ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext(self, (), error_code=ErrorCode.fetch_session_topic_id_error)
        named = session.update(fetch_data, to_forget)
        if not session.partitions:
            self.remove(session_id)
            return FetchContext(self, requested)
        self.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        self.incremental_fetches += 1
        return FetchContext(self, list(session.partitions.values()), session=session,
                            named=named)

    def maybe_create_session(self, now_ms: int, privileged: bool, uses_topic_ids: bool,
                             partitions: Callable[[], dict[PartitionKey, FetchPartition]]
                             ) -> int:
        """A new session's id, or ``INVALID_SESSION_ID`` when the cache is full of sessions
        that may not be evicted for it."""
        cached = partitions()
        if len(self._sessions) >= self.max_entries and not self.try_evict(
                privileged, len(cached), now_ms):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_session_id(), privileged, uses_topic_ids, now_ms,
                               now_ms, next_epoch(INITIAL_EPOCH), cached)
        self._sessions[session.id] = session
        return session.id

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        if self._sessions.pop(session.id, None) is not None:
            self._sessions[session.id] = session  # most recently used last

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Make room for a session of ``size`` partitions; whether one was evicted."""
        if not self._sessions:
            return False
        oldest = next(iter(self._sessions.values()))
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            self._evict(oldest)
            return True
        # Kafka's evictableByAll / evictableByPrivileged, with the age as of the last use.
        candidates = [s for s in self._sessions.values()
                      if s.last_used_ms - s.creation_ms > self.eviction_ms
                      or (privileged and not s.privileged)]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, s.size, s.id))
        if (privileged, size, 0) < (victim.privileged, victim.size, victim.id):
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        del self._sessions[session.id]
        self.evictions += 1

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, 0x7FFFFFFF)
            if session_id not in self._sessions:
                return session_id
