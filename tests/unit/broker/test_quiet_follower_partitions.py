"""A follower's incremental fetch skips its quiet partitions (``quiet_partitions``): nothing to
send, nothing new to tell, nothing to change. The response is what reading every partition
would answer, the follower's fetch is still recorded on the skipped ones (so a partition quiet
for longer than ``replica.lag.time.max.ms`` does not shrink out of the ISR when it moves again),
and the long poll is woken by an append to any partition of the session, named or not."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.fetch_session import FetchPartition
from strata.broker.handlers.fetch import handle
from strata.broker.network.request_context import Response
from strata.broker.replication.follower_state import SessionClock
from strata.broker.replication.quiet_partitions import (
    FULL_CHECK_INTERVAL_MS,
    has_records_or_error,
    is_quiet,
)
from strata.broker.replication.replica_manager import ReplicaManager
from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import decode_response_body
from strata.storage.clock import ManualClock
from strata.storage.file_records import FileSlice

from .helpers import TOPIC_ID, batch, broker_state, context
from .test_fetch import fetch_request

VERSION = 12
FOLLOWER = 2
PARTITIONS = 4
LAG_MS = 10_000


def _state(tmp_path: Path, clock: ManualClock) -> BrokerState:
    state = broker_state(tmp_path, clock=clock)
    for index in range(PARTITIONS):
        state.replica_manager.make_leader("t", index, TOPIC_ID, 0, replicas=(1, FOLLOWER),
                                          isr=frozenset({1, FOLLOWER}))
    return state


async def _append(rm: ReplicaManager, index: int, value: bytes) -> None:
    (result,) = await rm.append_records([(("t", index), batch(value))], 1, 1000)
    assert result.error_code == 0


class Follower:
    """Replica ``FOLLOWER``'s fetch session with the leader, as its fetcher keeps it."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.session_id = 0
        self.epoch = 0
        self.offsets = {index: 0 for index in range(PARTITIONS)}

    async def fetch(self, named: list[int] | None = None, **kwargs: Any) -> dict[int, Any]:
        """One fetch (the first a full one); the answered partitions by index, their offsets
        moved past the records they carried."""
        parts = [("t", i, self.offsets[i]) for i in (range(PARTITIONS) if self.epoch == 0
                                                     else named or [])]
        response = await handle(
            context(self.state, ApiKey.FETCH, VERSION),
            fetch_request(VERSION, parts, replica_id=FOLLOWER, session_id=self.session_id,
                          session_epoch=self.epoch, leader_epoch=0, **kwargs))
        assert isinstance(response, Response)
        raw = b"".join(c.read_bytes() if isinstance(c, FileSlice) else c
                       for c in response.chunks)
        body = decode_response_body(ApiKey.FETCH, VERSION, raw, 0)
        assert body.error_code == 0
        self.session_id = body.session_id
        self.epoch += 1
        answered = {p.partition_index: p for t in body.responses for p in t.partitions}
        for index, p in answered.items():
            if p.records:
                self.offsets[index] = _next_offset(p.records)
        return answered


def _next_offset(records: bytes) -> int:
    """The offset after the last batch: each batch header has its base offset at byte 0, its
    length after byte 12 at byte 8 and its last offset delta at byte 23."""
    position = end = 0
    while position < len(records):
        base = int.from_bytes(records[position:position + 8], "big")
        end = base + int.from_bytes(records[position + 23:position + 27], "big") + 1
        position += 12 + int.from_bytes(records[position + 8:position + 12], "big")
    return end


async def _settled(tmp_path: Path) -> tuple[BrokerState, ManualClock, Follower]:
    """One record in each partition, the follower caught up and told the high watermark."""
    clock = ManualClock(int(time.time() * 1000))  # the records' timestamps are the system's
    state = _state(tmp_path, clock)
    for index in range(PARTITIONS):
        await _append(state.replica_manager, index, b"v%d" % index)
    follower = Follower(state)
    first = await follower.fetch()
    assert sorted(first) == list(range(PARTITIONS))
    assert follower.offsets == {index: 1 for index in range(PARTITIONS)}
    # Fetching from the end moves the HW to 1 everywhere: every partition has news for it.
    second = await follower.fetch(named=list(range(PARTITIONS)))
    assert {i: p.high_watermark for i, p in second.items()} == {
        i: 1 for i in range(PARTITIONS)}
    return state, clock, follower


async def test_a_quiet_session_is_answered_empty_and_each_fetch_still_recorded(
        tmp_path: Path) -> None:
    state, clock, follower = await _settled(tmp_path)
    clock.advance(7_000)
    assert await follower.fetch() == {}
    for index in range(PARTITIONS):
        partition = state.replica_manager.get_partition("t", index)
        assert partition is not None
        recorded = partition.followers[FOLLOWER].settled()  # the session clock's time in
        assert (recorded.last_fetch_ms, recorded.last_caught_up_ms, recorded.log_end_offset) == (
            clock.milliseconds(), clock.milliseconds(), 1)


async def test_only_the_partition_written_is_answered_with_its_records(tmp_path: Path) -> None:
    state, _, follower = await _settled(tmp_path)
    await _append(state.replica_manager, 2, b"news")
    answered = await follower.fetch()
    assert list(answered) == [2]
    assert answered[2].records and follower.offsets[2] == 2
    # The follower names partition 2 at its new offset: the HW moves and is told, once.
    assert {i: p.high_watermark for i, p in (await follower.fetch(named=[2])).items()} == {2: 2}
    assert await follower.fetch() == {}


async def test_a_partition_quiet_longer_than_the_lag_stays_in_the_isr_when_written(
        tmp_path: Path) -> None:
    state, clock, follower = await _settled(tmp_path)
    rm = state.replica_manager
    for _ in range(12):  # a minute of quiet fetches, one every 5 s
        clock.advance(5_000)
        assert await follower.fetch() == {}
    await _append(rm, 0, b"after a quiet minute")
    clock.advance(1)
    answered = await follower.fetch()  # reads partition 0 from offset 1, below the new end
    assert list(answered) == [0]
    assert rm.maybe_shrink_isr(LAG_MS) == 0
    partition = rm.get_partition("t", 0)
    assert partition is not None and FOLLOWER in partition.isr


async def test_the_long_poll_wakes_for_an_append_to_a_partition_the_request_did_not_name(
        tmp_path: Path) -> None:
    state, _, follower = await _settled(tmp_path)
    rm = state.replica_manager
    waiting = asyncio.create_task(follower.fetch(max_wait_ms=30_000, min_bytes=1))
    deadline = time.monotonic() + 5
    while rm.fetch_purgatory.watched(("t", 3)) == 0:  # parked on every partition of the session
        assert time.monotonic() < deadline and not waiting.done()
        await asyncio.sleep(0.001)
    await _append(rm, 3, b"wake up")
    answered = await asyncio.wait_for(waiting, 5)
    assert list(answered) == [3] and answered[3].records


async def test_a_parked_fetch_rechecks_the_partitions_notified_and_parks_again(
        tmp_path: Path) -> None:
    """The session is watched as one (``Purgatory.wait_any``): a wake-up for a partition with
    nothing new parks the fetch again; the next append is answered, alone."""
    state, _, follower = await _settled(tmp_path)
    rm = state.replica_manager
    waiting = asyncio.create_task(follower.fetch(max_wait_ms=30_000, min_bytes=1))
    deadline = time.monotonic() + 5
    while rm.fetch_purgatory.watched(("t", 3)) == 0:
        assert time.monotonic() < deadline and not waiting.done()
        await asyncio.sleep(0.001)
    assert len(rm.fetch_purgatory) == 1  # one registration for the whole session
    assert rm.fetch_purgatory.notify(("t", 2)) == 1  # woken: partition 2 has nothing new
    for _ in range(20):  # event-loop turns, not time: the fetch re-checks and parks again
        await asyncio.sleep(0)
    assert not waiting.done() and rm.fetch_purgatory.watched(("t", 3)) == 1
    await _append(rm, 3, b"wake up")
    answered = await asyncio.wait_for(waiting, 5)
    assert list(answered) == [3] and answered[3].records


def _told(rm: ReplicaManager, index: int) -> FetchPartition:
    """A session's memory of partition ``index`` after a read at the leader's end."""
    partition = rm.get_partition("t", index)
    assert partition is not None
    log = partition.log
    return FetchPartition("t", TOPIC_ID, index, log.log_end_offset, 1 << 20,
                          current_leader_epoch=partition.leader_epoch,
                          high_watermark=log.high_watermark,
                          last_stable_offset=log.last_stable_offset(),
                          local_log_start_offset=log.log_start_offset)


@pytest.mark.parametrize(("change", "why"), [
    (lambda told: dataclasses.replace(told, fetch_offset=0), "records to send"),
    (lambda told: dataclasses.replace(told, high_watermark=0), "a HW not yet told"),
    (lambda told: dataclasses.replace(told, last_stable_offset=0), "an LSO not yet told"),
    (lambda told: dataclasses.replace(told, local_log_start_offset=-1), "a log start not told"),
    (lambda told: dataclasses.replace(told, current_leader_epoch=7), "a fenced epoch"),
    (lambda told: dataclasses.replace(told, topic_id=uuid.UUID(int=9)), "another topic id"),
    (lambda told: dataclasses.replace(told, topic=None), "an unknown topic id"),
    (lambda told: dataclasses.replace(told, partition=PARTITIONS), "a partition not hosted"),
])
async def test_a_partition_with_anything_to_say_is_not_quiet(
        tmp_path: Path, change: Any, why: str) -> None:
    state, clock, _ = await _settled(tmp_path)
    rm = state.replica_manager
    told = _told(rm, 1)
    now = clock.milliseconds()
    assert is_quiet(rm.hosted, FOLLOWER, now, SessionClock(), told)
    assert not is_quiet(rm.hosted, FOLLOWER, now, SessionClock(), change(told)), why


async def test_replication_state_that_may_change_is_never_skipped(tmp_path: Path) -> None:
    state, clock, _ = await _settled(tmp_path)
    rm = state.replica_manager
    now = clock.milliseconds()
    partition = rm.get_partition("t", 1)
    assert partition is not None
    told = _told(rm, 1)
    assert not is_quiet(rm.hosted, 3, now, SessionClock(), told)  # not a replica: the read says so
    partition.isr = frozenset({1})  # out of the ISR: the fetch may expand it
    assert not is_quiet(rm.hosted, FOLLOWER, now, SessionClock(), told)
    partition.isr = frozenset({1, FOLLOWER})
    partition.log.offline = True  # the read answers KAFKA_STORAGE_ERROR
    assert not is_quiet(rm.hosted, FOLLOWER, now, SessionClock(), told)
    partition.log.offline = False
    rm.make_follower("t", 1, TOPIC_ID, 3, 1, replicas=(1, 3), isr=frozenset({1, 3}),
                     partition_epoch=1)
    assert not is_quiet(rm.hosted, FOLLOWER, now, SessionClock(), told)  # NOT_LEADER_OR_FOLLOWER


async def test_a_parked_fetch_wakes_only_for_records_or_an_error(tmp_path: Path) -> None:
    state, _, _ = await _settled(tmp_path)
    rm = state.replica_manager
    told = [_told(rm, index) for index in range(PARTITIONS)]
    assert not has_records_or_error(rm.hosted, told)  # a HW move alone: keep waiting
    await _append(rm, 3, b"records")
    assert has_records_or_error(rm.hosted, told)
    told = [_told(rm, index) for index in range(PARTITIONS)]
    assert not has_records_or_error(rm.hosted, told)
    rm.make_follower("t", 0, TOPIC_ID, 3, 1, replicas=(1, 3), isr=frozenset({1, 3}),
                     partition_epoch=1)
    assert has_records_or_error(rm.hosted, told)  # NOT_LEADER_OR_FOLLOWER to answer


# ------------------------------------------------------------------ the session's candidates
# Between two full checks (``FULL_CHECK_INTERVAL_MS``) a fetch looks only at its candidates;
# fetches below are 100-400 ms apart so that they do.


async def _untouched_fetches(clock: ManualClock, follower: Follower, rounds: int,
                             step_ms: int) -> None:
    for _ in range(rounds):
        clock.advance(step_ms)
        assert await follower.fetch() == {}


async def test_quiet_partitions_are_not_touched_yet_read_as_fetched(tmp_path: Path) -> None:
    state, clock, follower = await _settled(tmp_path)
    rm = state.replica_manager
    # The last fetch read every partition (to tell its HW): each is a candidate of the next,
    # found quiet, and takes the session's clock.
    clock.advance(100)
    assert await follower.fetch() == {}
    partitions = [rm.get_partition("t", index) for index in range(PARTITIONS)]
    before = [p.followers[FOLLOWER] for p in partitions if p is not None]
    assert all(state.session_clock is not None for state in before)
    await _untouched_fetches(clock, follower, 5, 100)
    after = [p.followers[FOLLOWER] for p in partitions if p is not None]
    assert all(a is b for a, b in zip(after, before, strict=True))  # no per-partition work
    assert {(s.caught_up_ms, s.settled().last_fetch_ms) for s in after} == {
        (clock.milliseconds(), clock.milliseconds())}


async def test_lazily_recorded_fetches_keep_a_follower_in_sync_when_a_write_comes(
        tmp_path: Path) -> None:
    state, clock, follower = await _settled(tmp_path)
    rm = state.replica_manager
    await _untouched_fetches(clock, follower, 30, 400)  # 12 s of quiet > LAG_MS
    await _append(rm, 0, b"after the quiet")
    clock.advance(1)
    # The shrink check runs before the follower fetches again: caught up 1 ms ago.
    assert rm.maybe_shrink_isr(LAG_MS) == 0
    assert list(await follower.fetch()) == [0]
    # A follower that stops fetching is shrunk out where it is behind, as a read would have it.
    clock.advance(LAG_MS + 1)
    assert rm.maybe_shrink_isr(LAG_MS) == 1
    lagging = rm.get_partition("t", 0)
    quiet = rm.get_partition("t", 1)
    assert lagging is not None and FOLLOWER not in lagging.isr
    assert quiet is not None and FOLLOWER in quiet.isr


async def test_an_isr_change_makes_a_quiet_partition_a_candidate(tmp_path: Path) -> None:
    state, clock, follower = await _settled(tmp_path)
    rm = state.replica_manager
    await _untouched_fetches(clock, follower, 2, 100)
    partition = rm.get_partition("t", 1)
    assert partition is not None
    # The controller takes the follower out (its HW does not move): the next fetch reads the
    # partition and, the follower being at the end, proposes it back (adopted locally here).
    rm.apply_isr_change(partition, frozenset({1}), partition.partition_epoch + 1)
    clock.advance(100)
    assert await follower.fetch() == {}
    assert FOLLOWER in partition.isr


async def test_a_deleted_log_start_is_told_at_the_next_fetch(tmp_path: Path) -> None:
    state, clock, follower = await _settled(tmp_path)
    rm = state.replica_manager
    await _untouched_fetches(clock, follower, 2, 100)
    # Answered at once (timeout 0: this follower reports no log start, the wait is not the
    # point here); the leader's log start moved.
    await rm.delete_records([(("t", 2), 1)], 0)
    moved = rm.get_partition("t", 2)
    assert moved is not None and moved.log_start_offset == 1
    clock.advance(100)
    answered = await follower.fetch()
    assert list(answered) == [2] and answered[2].log_start_offset == 1
    # Told, partition 2 is quiet again with nothing notified: a candidate as last read.
    clock.advance(100)
    assert await follower.fetch() == {}
    partition = rm.get_partition("t", 2)
    assert partition is not None and partition.followers[FOLLOWER].session_clock is not None


@pytest.mark.parametrize("seed", range(6))
async def test_every_partition_with_news_is_answered(tmp_path: Path, seed: int) -> None:
    """A random run of appends, high watermark moves and fetches 0-150 ms apart: each fetch
    answers every partition that had records or a high watermark the follower was not told
    of, and the follower, fetching all the time, is never out of sync."""
    rng = random.Random(seed)
    state, clock, follower = await _settled(tmp_path)
    rm = state.replica_manager
    told = {index: 1 for index in range(PARTITIONS)}  # high watermarks the follower knows
    sent = dict(follower.offsets)  # the offsets its session holds
    for _ in range(150):
        for index in rng.sample(range(PARTITIONS), rng.randrange(PARTITIONS)):
            await _append(rm, index, b"r")
        clock.advance(rng.randrange(150))
        logs = {index: rm.get_partition("t", index) for index in range(PARTITIONS)}
        news = {index for index, p in logs.items() if p is not None and (
            p.log_end_offset > follower.offsets[index] or p.high_watermark != told[index])}
        named = [index for index in range(PARTITIONS) if follower.offsets[index] != sent[index]]
        sent = dict(follower.offsets)
        answered = await follower.fetch(named=named)
        assert news <= set(answered), (news, sorted(answered))
        told.update({index: p.high_watermark for index, p in answered.items()})
        assert rm.maybe_shrink_isr(1_000) == 0


async def test_a_change_nothing_notifies_is_seen_at_the_next_full_check(tmp_path: Path) -> None:
    state, clock, follower = await _settled(tmp_path)
    partition = state.replica_manager.get_partition("t", 3)
    assert partition is not None
    await _untouched_fetches(clock, follower, 2, 100)
    partition.log.offline = True  # as a failed log directory leaves it, with no notification
    await _untouched_fetches(clock, follower, 1, 100)
    clock.advance(FULL_CHECK_INTERVAL_MS)
    answered = await follower.fetch()
    assert list(answered) == [3] and answered[3].error_code == ErrorCode.kafka_storage_error
