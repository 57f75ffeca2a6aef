"""DeleteRecords is answered once the partition's low watermark reached the offset (Kafka's
``DelayedDeleteRecords``): the smallest log start offset of the leader and its live followers,
each follower's as its last Fetch reported it.

The leader here is a ``BrokerState`` leading t-0 with replicas {1, 2, 3}; followers 2 and 3 are
Fetch requests (v12, ``replica_id``, ``log_start_offset``) sent to its Fetch handler when the test
says so. Checked: no answer until every follower reported the offset; REQUEST_TIMED_OUT when one
does not; the low watermark answered is the minimum, not the leader's log start; a follower on a
dead broker does not count (re-checked on an ISR change); a leadership moved away answers
NOT_LEADER_OR_FOLLOWER; without followers the answer is immediate.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers import delete_records, fetch
from strata.broker.network.request_context import Response
from strata.broker.replication.partition import Partition
from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import decode_response_body
from strata.storage.file_records import FileSlice

from .helpers import TOPIC_ID, batch, broker_state, context, request

TP = ("t", 0)
FETCH_VERSION = 12
DELETE_RECORDS_VERSION = 2
WAIT_S = 5.0


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.001)


@pytest.fixture
async def state(tmp_path: Path) -> AsyncIterator[BrokerState]:
    """Broker 1 leads t-0 (replicas and ISR {1, 2, 3}) with offsets 0-5 on every replica."""
    state = broker_state(tmp_path)
    state.replica_manager.make_leader("t", 0, TOPIC_ID, 0, replicas=(1, 2, 3),
                                      isr=frozenset({1, 2, 3}))
    (appended,) = await state.replica_manager.append_records(
        [(TP, batch(b"0", b"1", b"2", b"3", b"4", b"5"))], 1, 1000)
    assert appended.error_code == ErrorCode.none
    for follower in (2, 3):
        await follower_fetch(state, follower, log_start_offset=0)
    assert leader(state).high_watermark == 6
    yield state
    state.log_manager.shutdown()


def leader(state: BrokerState) -> Partition:
    partition = state.replica_manager.get_partition(*TP)
    assert partition is not None
    return partition


async def follower_fetch(state: BrokerState, replica_id: int, *, log_start_offset: int) -> None:
    """Follower ``replica_id`` fetches from the leader's log end, reporting its log start."""
    body = request(ApiKey.FETCH, FETCH_VERSION, replica_id=replica_id, max_wait_ms=0,
                   min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                   session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[{
                       "topic": "t", "partitions": [{
                           "partition": 0, "current_leader_epoch": 0,
                           "fetch_offset": leader(state).log_end_offset,
                           "log_start_offset": log_start_offset,
                           "partition_max_bytes": 1 << 20}]}])
    response = await fetch.handle(context(state, ApiKey.FETCH, FETCH_VERSION), body)
    assert isinstance(response, Response)
    raw = b"".join(c.read_bytes() if isinstance(c, FileSlice) else c for c in response.chunks)
    answer = decode_response_body(ApiKey.FETCH, FETCH_VERSION, raw, 0)
    assert answer.responses[0].partitions[0].error_code == ErrorCode.none


async def delete_before(state: BrokerState, offset: int, timeout_ms: int = 10_000
                        ) -> tuple[int, int]:
    """DeleteRecords of t-0 below ``offset``: (error code, low watermark)."""
    body = request(ApiKey.DELETE_RECORDS, DELETE_RECORDS_VERSION, timeout_ms=timeout_ms,
                   topics=[{"name": "t", "partitions": [{"partition_index": 0,
                                                         "offset": offset}]}])
    response: Any = await delete_records.handle(
        context(state, ApiKey.DELETE_RECORDS, DELETE_RECORDS_VERSION), body)
    (partition,) = response.topics[0].partitions
    return partition.error_code, partition.low_watermark


def waiting(state: BrokerState) -> int:
    return state.replica_manager.delete_records_purgatory.watched(TP)


async def test_answered_once_every_follower_reported_the_offset(state: BrokerState) -> None:
    deleting = asyncio.create_task(delete_before(state, 3))
    await until(lambda: waiting(state) == 1, "the deletion to wait for the followers")
    assert leader(state).log_start_offset == 3  # the leader deleted at once
    await follower_fetch(state, 2, log_start_offset=3)
    # Woken (the fetch moved follower 2's log start), re-checked, waiting again for broker 3.
    await until(lambda: waiting(state) == 1, "the deletion to wait for broker 3")
    assert not deleting.done()
    await follower_fetch(state, 3, log_start_offset=3)
    assert await asyncio.wait_for(deleting, WAIT_S) == (ErrorCode.none, 3)


async def test_a_follower_that_does_not_fetch_times_the_request_out(
        state: BrokerState) -> None:
    deleting = asyncio.create_task(delete_before(state, 1))
    await until(lambda: waiting(state) == 1, "the first deletion to wait")
    for follower in (2, 3):
        await follower_fetch(state, follower, log_start_offset=1)
    assert await asyncio.wait_for(deleting, WAIT_S) == (ErrorCode.none, 1)

    deleting = asyncio.create_task(delete_before(state, 4, timeout_ms=50))
    await until(lambda: waiting(state) == 1, "the second deletion to wait")
    await follower_fetch(state, 2, log_start_offset=4)  # broker 3 never fetches again
    # Kafka's answer keeps the low watermark the request found: min(4, 1, 1).
    assert await asyncio.wait_for(deleting, WAIT_S) == (ErrorCode.request_timed_out, 1)
    assert leader(state).log_start_offset == 4  # deleted on the leader all the same
    assert waiting(state) == 0

    # The low watermark is the smallest log start: broker 3 is still at 1, so a deletion below
    # 1 is done at once and answers 1, not the leader's 4.
    assert await delete_before(state, 1, timeout_ms=0) == (ErrorCode.none, 1)


async def test_a_follower_on_a_dead_broker_does_not_count(state: BrokerState) -> None:
    deleting = asyncio.create_task(delete_before(state, 2))
    await until(lambda: waiting(state) == 1, "the deletion to wait for the followers")
    await follower_fetch(state, 2, log_start_offset=2)
    await until(lambda: waiting(state) == 1, "the deletion to wait for broker 3")
    # Broker 3 dies: the controller takes it out of the ISR, which wakes the deletion.
    rm = state.replica_manager
    rm.broker_alive = lambda broker_id: broker_id != 3
    rm.apply_isr_change(leader(state), frozenset({1, 2}), leader(state).partition_epoch + 1)
    assert await asyncio.wait_for(deleting, WAIT_S) == (ErrorCode.none, 2)


async def test_a_leadership_moved_away_answers_not_leader(state: BrokerState) -> None:
    deleting = asyncio.create_task(delete_before(state, 2))
    await until(lambda: waiting(state) == 1, "the deletion to wait for the followers")
    state.replica_manager.make_follower("t", 0, TOPIC_ID, 2, 1, replicas=(1, 2, 3),
                                        isr=frozenset({1, 2, 3}), partition_epoch=1)
    assert await asyncio.wait_for(deleting, WAIT_S) == (ErrorCode.not_leader_or_follower, -1)


async def test_without_followers_the_answer_is_immediate(tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1))  # replication factor 1: this broker alone
    try:
        for value in (b"a", b"b", b"c"):
            await state.replica_manager.append_records([(TP, batch(value))], 1, 1000)
        # A timeout of 0 would answer REQUEST_TIMED_OUT had the request waited at all.
        assert await delete_before(state, 2, timeout_ms=0) == (ErrorCode.none, 2)
        assert await delete_before(state, -1, timeout_ms=0) == (ErrorCode.none, 3)
    finally:
        state.log_manager.shutdown()
