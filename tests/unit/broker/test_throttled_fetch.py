"""A throttled Fetch is answered as Kafka answers it (``getThrottledResponse``): the throttle
time and no records, the bytes charged taken back, and a fetch session left as the request left
it — whichever quota throttled (``consumer_byte_rate`` or ``request_percentage``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.fetch_session import FetchPartition, FetchSessionCache, PartitionAnswer
from strata.broker.handlers.fetch import handle
from strata.broker.network.request_context import Response
from strata.broker.quotas.broker_quotas import BrokerQuotas
from strata.broker.quotas.client_quota_manager import QuotaWindow
from strata.broker.quotas.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Alteration,
    ClientQuotas,
)
from strata.broker.quotas.quota_store import FileQuotaStore
from strata.broker.quotas.request_time import RequestTime
from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import decode_response_body
from strata.storage.file_records import FileSlice

from .helpers import batch, broker_state, context
from .test_fetch import fetch_request

SECOND_NS = 1_000_000_000


@pytest.fixture
def state(tmp_path: Path) -> BrokerState:
    state = broker_state(tmp_path, ("t", 1))
    state.quotas = BrokerQuotas(FileQuotaStore(tmp_path), QuotaWindow(11, 1000))
    return state


def _configure(state: BrokerState, **quotas: float) -> None:
    assert state.quotas is not None
    configured, _ = ClientQuotas().alter([Alteration([(CLIENT_ID, "test")], quotas)])
    state.quotas.apply(configured)


async def _append(state: BrokerState, value: bytes) -> None:
    (result,) = await state.replica_manager.append_records([(("t", 0), batch(value))], 1, 1000)
    assert result.error_code == 0


async def _fetch(state: BrokerState, version: int = 11, *, busy_ns: int = 0,
                 replica_id: int = -1, **kwargs: Any) -> tuple[Any, int]:
    """The decoded response and the throttle the connection would mute for; ``busy_ns`` of
    thread time already spent on the request (request quota)."""
    ctx = context(state, ApiKey.FETCH, version)
    if busy_ns:
        assert state.quotas is not None
        ctx.request_time = RequestTime(state.quotas.request, "", "test", clock=lambda: 0)
        ctx.request_time.add(busy_ns)
    kwargs.setdefault("parts", [("t", 0, 0)])
    response = await handle(ctx, fetch_request(version, replica_id=replica_id, **kwargs))
    assert isinstance(response, Response)
    if ctx.request_time is not None:
        ctx.request_time.charge(state.clock.milliseconds())  # as the connection does after
    raw = b"".join(c.read_bytes() if isinstance(c, FileSlice) else c for c in response.chunks)
    return decode_response_body(ApiKey.FETCH, version, raw, 0), ctx.throttle_time_ms


def _records(response: Any) -> bytes:
    return b"".join(bytes(p.records) for t in response.responses for p in t.partitions)


async def test_over_consumer_byte_rate_the_answer_has_no_records_and_is_not_charged(
        state: BrokerState) -> None:
    await _append(state, b"x" * 5000)
    _configure(state, **{CONSUMER_BYTE_RATE: 100})
    response, throttle = await _fetch(state)
    assert throttle > 0 and response.throttle_time.total_seconds() * 1000 == throttle
    assert response.responses == () and response.error_code == 0
    assert state.quotas is not None
    assert state.quotas.fetch.rate("", "test", state.clock.milliseconds()) == 0.0  # unrecorded
    assert state.quotas.fetch.throttles[("", "test")].count == 1


async def test_over_request_percentage_the_answer_has_no_records_and_a_follower_is_exempt(
        state: BrokerState) -> None:
    await _append(state, b"x" * 100)
    _configure(state, **{REQUEST_PERCENTAGE: 1.0, CONSUMER_BYTE_RATE: 10**9})
    response, throttle = await _fetch(state, busy_ns=SECOND_NS)  # 10 % against 1 %
    assert throttle == 1000  # bounded at one window
    assert response.responses == ()
    assert state.quotas is not None
    now = state.clock.milliseconds()
    assert state.quotas.fetch.rate("", "test", now) == 0.0  # the byte quota's charge taken back
    follower, follower_throttle = await _fetch(state, busy_ns=SECOND_NS, replica_id=2)
    assert follower_throttle == 0 and follower.responses != ()  # answered, not throttled
    assert state.quotas.request.exempt_rate(now) is not None  # its time counted as exempt


async def test_a_throttled_full_fetch_creates_no_session(state: BrokerState) -> None:
    await _append(state, b"a")
    _configure(state, **{REQUEST_PERCENTAGE: 1.0})
    response, throttle = await _fetch(state, busy_ns=SECOND_NS, session_epoch=0)
    assert throttle > 0
    assert (response.error_code, response.session_id, response.responses) == (0, 0, ())
    assert len(state.fetch_sessions) == 0


async def test_a_throttled_incremental_fetch_keeps_its_session_and_sends_the_rest_later(
        state: BrokerState) -> None:
    _configure(state, **{REQUEST_PERCENTAGE: 50.0})
    await _append(state, b"a")
    first, _ = await _fetch(state, session_epoch=0)
    session_id = first.session_id
    assert session_id > 0 and _records(first)
    session = state.fetch_sessions.get(session_id)
    assert session is not None
    cached = dict(session.partitions)
    told = {key: (p.high_watermark, p.last_stable_offset) for key, p in cached.items()}
    await _append(state, b"b")
    # epoch 1, throttled: nothing sent, the session's epoch moves on, what it told unchanged
    throttled, throttle = await _fetch(state, busy_ns=20 * SECOND_NS, parts=[("t", 0, 1)],
                                       session_id=session_id, session_epoch=1)
    assert throttle > 0 and throttled.responses == ()
    assert (throttled.error_code, throttled.session_id) == (0, session_id)
    assert session.epoch == 2 and session.partitions.keys() == cached.keys()
    assert {key: (p.high_watermark, p.last_stable_offset)
            for key, p in session.partitions.items()} == told
    assert session.partitions[("t", 0)].fetch_offset == 1  # the request's update stays
    # once the window has passed: epoch 2 gets what was not sent (the record and the new HW)
    assert state.quotas is not None
    state.quotas.apply(ClientQuotas())
    after, after_throttle = await _fetch(state, parts=[], session_id=session_id, session_epoch=2)
    assert after_throttle == 0
    (topic,) = after.responses
    (partition,) = topic.partitions
    assert partition.high_watermark == 2 and bytes(partition.records)


def test_a_session_moved_on_meanwhile_answers_invalid_epoch() -> None:
    cache = FetchSessionCache()
    key = ("t", 0)
    part = FetchPartition("t", uuid.UUID(int=0), 0, 0, 1 << 20)
    full = cache.new_context(session_id=0, epoch=0, privileged=False, uses_topic_ids=False,
                             fetch_data=[(key, part)], to_forget=[], now_ms=0)
    assert full.throttled_response() == (ErrorCode.none, 0)
    session_id, _ = full.complete([PartitionAnswer(0, 1, 1, 0, 10)], 0)
    first = cache.new_context(session_id=session_id, epoch=1, privileged=False,
                              uses_topic_ids=False, fetch_data=[], to_forget=[], now_ms=1)
    assert first.throttled_response() == (ErrorCode.none, session_id)
    second = cache.new_context(session_id=session_id, epoch=2, privileged=False,
                               uses_topic_ids=False, fetch_data=[], to_forget=[], now_ms=2)
    assert second.throttled_response() == (ErrorCode.none, session_id)
    # the first request's long poll ends after the second moved the epoch on
    assert first.throttled_response() == (ErrorCode.invalid_fetch_session_epoch, session_id)
