"""The fetch session cache (KIP-227) as a pure state machine: session ids and epochs, full and
incremental contexts, what an incremental response leaves out, and Kafka's eviction rules."""

from __future__ import annotations

import random
import uuid

from strata.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchContext,
    FetchPartition,
    FetchSessionCache,
    PartitionAnswer,
    PartitionKey,
    next_epoch,
)
from strata.protocol.error_codes import ErrorCode

TOPIC_ID = uuid.UUID("6d1c1a5e-0000-4000-8000-000000000002")
EVICTION_MS = 1000


def part(index: int, offset: int = 0, topic: str = "t") -> tuple[PartitionKey, FetchPartition]:
    return (topic, index), FetchPartition(topic, TOPIC_ID, index, offset, 1 << 20)


def answer(hw: int = 5, *, size: int = 0, error: int = 0, log_start: int = 0) -> PartitionAnswer:
    return PartitionAnswer(error, hw, hw, log_start, size)


def cache(max_entries: int = 10) -> FetchSessionCache:
    return FetchSessionCache(max_entries, EVICTION_MS, random.Random(7))


def open_session(c: FetchSessionCache, *parts: tuple[PartitionKey, FetchPartition],
                 now: int = 0, privileged: bool = False, hw: int = 5) -> int:
    ctx = c.new_context(session_id=0, epoch=INITIAL_EPOCH, privileged=privileged,
                        uses_topic_ids=False, fetch_data=list(parts), to_forget=[], now_ms=now)
    session_id, kept = ctx.complete([answer(hw) for _ in parts], now)
    assert kept == list(range(len(parts)))  # a full response carries every partition
    return session_id


def incremental(c: FetchSessionCache, session_id: int, epoch: int,
                *parts: tuple[PartitionKey, FetchPartition],
                forget: list[PartitionKey] | None = None,
                now: int = 1, uses_topic_ids: bool = False) -> FetchContext:
    return c.new_context(session_id=session_id, epoch=epoch, privileged=False,
                         uses_topic_ids=uses_topic_ids, fetch_data=list(parts),
                         to_forget=forget or [], now_ms=now)


def test_next_epoch_wraps_to_one_and_final_stays_final() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(0x7FFFFFFF) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_full_fetch_creates_a_session_at_epoch_one() -> None:
    c = cache()
    session_id = open_session(c, part(0), part(1))
    assert session_id != INVALID_SESSION_ID
    session = c.get(session_id)
    assert session is not None and session.epoch == 1 and session.size == 2
    assert c.partitions_cached == 2


def test_final_epoch_is_sessionless_and_closes_the_session_named() -> None:
    c = cache()
    session_id = open_session(c, part(0))
    ctx = c.new_context(session_id=session_id, epoch=FINAL_EPOCH, privileged=False,
                        uses_topic_ids=False, fetch_data=[part(0)], to_forget=[], now_ms=1)
    assert ctx.complete([answer()], 1) == (INVALID_SESSION_ID, [0])
    assert c.get(session_id) is None and len(c) == 0


def test_a_new_full_fetch_replaces_the_session_named() -> None:
    c = cache()
    first = open_session(c, part(0))
    ctx = c.new_context(session_id=first, epoch=INITIAL_EPOCH, privileged=False,
                        uses_topic_ids=False, fetch_data=[part(1)], to_forget=[], now_ms=1)
    second, _ = ctx.complete([answer()], 1)
    assert c.get(first) is None and second not in (first, INVALID_SESSION_ID)
    assert len(c) == 1


def test_incremental_errors() -> None:
    c = cache()
    session_id = open_session(c, part(0))
    assert incremental(c, 12345, 1).error_code == ErrorCode.fetch_session_id_not_found
    assert incremental(c, session_id, 2).error_code == ErrorCode.invalid_fetch_session_epoch
    assert (incremental(c, session_id, 1, uses_topic_ids=True).error_code
            == ErrorCode.fetch_session_topic_id_error)
    ok = incremental(c, session_id, 1)
    assert ok.error_code == ErrorCode.none and ok.incremental
    # The epoch moved on before the read: a duplicate of the same request is refused.
    assert incremental(c, session_id, 1).error_code == ErrorCode.invalid_fetch_session_epoch
    assert c.incremental_fetches == 1


def test_incremental_response_carries_only_partitions_with_news() -> None:
    c = cache()
    session_id = open_session(c, part(0), part(1), part(2), hw=5)
    ctx = incremental(c, session_id, 1)
    assert [p.partition for p in ctx.partitions] == [0, 1, 2]
    # 0: nothing new; 1: records; 2: the high watermark moved
    sid, kept = ctx.complete([answer(5), answer(5, size=70), answer(6)], 1)
    assert sid == session_id and kept == [1, 2]
    # what was sent is remembered, and moved to the end of the session
    ctx = incremental(c, session_id, 2, now=2)
    assert [p.partition for p in ctx.partitions] == [0, 1, 2]
    assert ctx.complete([answer(5), answer(5), answer(6)], 2) == (session_id, [])


def test_an_error_is_always_sent_and_resends_the_partition_after_it() -> None:
    c = cache()
    session_id = open_session(c, part(0), hw=5)
    ctx = incremental(c, session_id, 1)
    assert ctx.complete([PartitionAnswer(6, -1, -1, -1, 0)], 1)[1] == [0]
    ctx = incremental(c, session_id, 2)
    assert ctx.complete([answer(5)], 2)[1] == [0]  # the HW was reset to -1 by the error


def test_log_start_offset_change_and_diverging_epoch_are_news() -> None:
    c = cache()
    session_id = open_session(c, part(0), part(1), hw=5)
    ctx = incremental(c, session_id, 1)
    diverged = PartitionAnswer(0, 5, 5, 0, 0, diverging=True)
    assert ctx.complete([answer(5, log_start=3), diverged], 1)[1] == [0, 1]


def test_incremental_adds_updates_and_forgets_partitions() -> None:
    c = cache()
    session_id = open_session(c, part(0), part(1))
    ctx = incremental(c, session_id, 1, part(1, offset=40), part(2), forget=[("t", 0)])
    assert [(p.partition, p.fetch_offset) for p in ctx.partitions] == [(1, 40), (2, 0)]
    session = c.get(session_id)
    assert session is not None and set(session.partitions) == {("t", 1), ("t", 2)}


def test_a_session_left_empty_is_closed_and_the_fetch_is_sessionless() -> None:
    c = cache()
    session_id = open_session(c, part(0))
    ctx = incremental(c, session_id, 1, forget=[("t", 0)])
    assert not ctx.incremental and ctx.partitions == []
    assert ctx.complete([], 1) == (INVALID_SESSION_ID, [])
    assert c.get(session_id) is None


def test_full_cache_without_evictable_session_answers_session_zero() -> None:
    c = cache(max_entries=1)
    first = open_session(c, part(0), part(1))
    assert open_session(c, part(0), part(1), part(2), now=10) == INVALID_SESSION_ID
    assert c.get(first) is not None and c.evictions == 0


def test_a_stale_session_is_evicted() -> None:
    c = cache(max_entries=1)
    first = open_session(c, part(0), part(1), part(2))
    second = open_session(c, part(0), now=EVICTION_MS + 1)
    assert second != INVALID_SESSION_ID and c.get(first) is None and c.evictions == 1


def test_a_follower_evicts_a_consumer_session_at_once() -> None:
    c = cache(max_entries=1)
    consumer = open_session(c, part(0), part(1))
    follower = open_session(c, part(0), privileged=True, now=10)
    assert follower != INVALID_SESSION_ID and c.get(consumer) is None


def test_a_consumer_never_evicts_a_follower_session() -> None:
    c = cache(max_entries=1)
    follower = open_session(c, part(0), privileged=True)
    ctx = incremental(c, follower, 1, now=EVICTION_MS // 2)  # keeps it from going stale
    ctx.complete([answer()], EVICTION_MS // 2)
    ctx = c.new_context(session_id=follower, epoch=2, privileged=True, uses_topic_ids=False,
                        fetch_data=[], to_forget=[], now_ms=EVICTION_MS + 2)
    assert open_session(c, part(0), part(1), part(2), now=EVICTION_MS + 3) == INVALID_SESSION_ID
    assert c.get(follower) is not None


def test_a_larger_session_evicts_a_smaller_one_only_once_it_is_not_young() -> None:
    c = cache(max_entries=1)
    small = open_session(c, part(0))
    # young (used only at creation): not evictable by another consumer
    assert open_session(c, part(0), part(1), now=EVICTION_MS // 2) == INVALID_SESSION_ID
    incremental(c, small, 1, now=EVICTION_MS + 1)  # used when older than eviction_ms
    # an equal size does not win (Kafka compares (privileged, size, id) with the new id as 0)
    assert open_session(c, part(1), now=EVICTION_MS + 2) == INVALID_SESSION_ID
    assert open_session(c, part(0), part(1), now=EVICTION_MS + 3) != INVALID_SESSION_ID
    assert c.get(small) is None and c.evictions == 1


def test_a_smaller_session_does_not_evict_a_larger_one() -> None:
    c = cache(max_entries=1)
    big = open_session(c, part(0), part(1), part(2))
    incremental(c, big, 1, now=EVICTION_MS + 1)
    assert open_session(c, part(0), now=EVICTION_MS + 2) == INVALID_SESSION_ID
    assert c.get(big) is not None


def test_the_cache_is_exported_as_prometheus_series() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from strata.broker.metrics.fetch_session_metrics import FetchSessionMetrics

    c = cache(max_entries=1)
    registry = CollectorRegistry(auto_describe=False)
    FetchSessionMetrics(registry, c)
    first = open_session(c, part(0), part(1))
    incremental(c, first, 1)
    open_session(c, part(0), now=EVICTION_MS + 5)  # evicts the stale first one
    text = generate_latest(registry).decode()
    assert "strata_fetch_session_incremental_fetch_sessions 1.0" in text
    assert "strata_fetch_session_incremental_fetch_partitions_cached 1.0" in text
    assert "strata_fetch_session_evictions_total 1.0" in text
    assert "strata_fetch_session_incremental_fetches_total 1.0" in text


def test_skip_over_candidates_keeps_the_session_order_and_the_named() -> None:
    c = cache()
    session_id = open_session(c, part(0), part(1), part(2), part(3), hw=5)
    ctx = incremental(c, session_id, 1)
    ctx.complete([answer(5), answer(6), answer(5), answer(5)], 1)  # 1 sent: last in line
    session = c.get(session_id)
    assert session is not None
    by_index = {p.partition: p for p in session.partitions.values()}
    ctx = incremental(c, session_id, 2, part(3, offset=9))
    asked: list[int] = []

    def may_skip(p: FetchPartition) -> bool:
        asked.append(p.partition)
        return p.partition == 2

    ctx.skip(may_skip, [by_index[1], by_index[2], by_index[0]])
    assert [p.partition for p in ctx.partitions] == [0, 3, 1]  # the session's order
    assert sorted(asked) == [0, 1, 2, 3]  # the named one asked too; nothing else


def test_membership_counts_partitions_added_forgotten_and_renamed() -> None:
    c = cache()
    session_id = open_session(c, part(0), part(1))
    session = c.get(session_id)
    assert session is not None
    before = session.membership
    incremental(c, session_id, 1, part(1, offset=40))  # an update: same partitions
    assert session.membership == before
    incremental(c, session_id, 2, part(2), forget=[("t", 0)], now=2)
    assert session.membership == before + 2
    renamed = FetchPartition(None, TOPIC_ID, 1, 40, 1 << 20)  # its topic id unknown now
    incremental(c, session_id, 3, (("t", 1), renamed), now=3)
    assert session.membership == before + 3
