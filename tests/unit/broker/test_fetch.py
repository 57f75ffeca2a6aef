"""Fetch v4-v11 handler: reads, isolation, sessions, long poll, leader epochs; the
response decoded by kio from the bytes the connection would send."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers.fetch import handle
from strata.broker.network.request_context import Response
from strata.protocol import ApiKey
from strata.protocol.messages import decode_response_body
from strata.storage.file_records import FileSlice

from .helpers import batch, broker_state, context, request

VERSIONS = range(4, 12)


def fetch_request(version: int, parts: list[tuple[str, int, int]], *, max_wait_ms: int = 0,
                  min_bytes: int = 1, max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20,
                  isolation_level: int = 0, replica_id: int = -1, session_id: int = 0,
                  session_epoch: int = -1, leader_epoch: int = -1) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, index, offset in parts:
        topics.setdefault(name, []).append({
            "partition": index, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
            "log_start_offset": -1, "partition_max_bytes": partition_max_bytes})
    return request(ApiKey.FETCH, version, replica_id=replica_id, max_wait_ms=max_wait_ms,
                   min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=isolation_level,
                   session_id=session_id, session_epoch=session_epoch,
                   topics=[{"topic": n, "partitions": p} for n, p in topics.items()],
                   forgotten_topics_data=[], rack_id="")


async def fetch(state: BrokerState, version: int, parts: list[tuple[str, int, int]],
                **kwargs: Any) -> Any:
    response = await handle(context(state, ApiKey.FETCH, version),
                                  fetch_request(version, parts, **kwargs))
    assert isinstance(response, Response)
    raw = b"".join(c.read_bytes() if isinstance(c, FileSlice) else c for c in response.chunks)
    return decode_response_body(ApiKey.FETCH, version, raw, 0)


async def produce(state: BrokerState, topic: str, partition: int, *values: bytes) -> None:
    for value in values:
        (r,) = await state.replica_manager.append_records([((topic, partition), batch(value))],
                                                          1, 1000)
        assert r.error_code == 0


@pytest.fixture
def state(tmp_path: Path) -> BrokerState:
    return broker_state(tmp_path, ("t", 2))


@pytest.mark.parametrize("version", VERSIONS)
async def test_reads_records(state: BrokerState, version: int) -> None:
    await produce(state, "t", 0, b"a", b"b")
    await produce(state, "t", 1, b"c")
    resp = await fetch(state, version, [("t", 0, 0), ("t", 1, 1), ("x", 0, 0), ("t", 0, 9)])
    (topic, unknown) = resp.responses
    p0, p1, out_of_range = topic.partitions
    assert bytes(p0.records) == batch_at(state, "t", 0)
    assert (p0.high_watermark, p0.last_stable_offset) == (2, 2)
    assert (p1.error_code, p1.high_watermark, bytes(p1.records)) == (0, 1, b"")
    assert out_of_range.error_code == 1
    assert unknown.partitions[0].error_code == 3
    assert p0.aborted_transactions is None  # read_uncommitted
    if version >= 5:
        assert p0.log_start_offset == 0
    if version >= 7:
        assert (resp.error_code, resp.session_id) == (0, 0)
    if version >= 11:
        assert p0.preferred_read_replica == -1


def batch_at(state: BrokerState, topic: str, partition: int) -> bytes:
    log = state.replica_manager.get_partition(topic, partition).log  # type: ignore[union-attr]
    return log.read(0, 1 << 20, None, True).read_bytes()


async def test_read_committed_reads_to_the_lso(state: BrokerState) -> None:
    part = state.replica_manager.get_partition("t", 0)
    assert part is not None
    part.make_leader(1, replicas=(1, 2), isr=frozenset((1, 2)))
    await produce(state, "t", 0, b"a", b"b")
    lagging = await fetch(state, 11, [("t", 0, 1)], replica_id=2)  # follower 2 has offset 0
    assert lagging.responses[0].partitions[0].high_watermark == 1
    resp = await fetch(state, 11, [("t", 0, 0)], isolation_level=1)
    p = resp.responses[0].partitions[0]
    assert p.aborted_transactions == ()  # empty, not null
    assert (p.high_watermark, p.last_stable_offset) == (1, 1)
    assert len(bytes(p.records)) == len(batch(b"a"))
    follower = await fetch(state, 11, [("t", 0, 0)], replica_id=2)
    assert len(bytes(follower.responses[0].partitions[0].records)) == 2 * len(batch(b"a"))


async def test_a_full_fetch_creates_a_session_and_an_unknown_one_is_refused(
        state: BrokerState) -> None:
    await produce(state, "t", 0, b"a")
    new_session = await fetch(state, 11, [("t", 0, 0)], session_epoch=0)
    assert new_session.error_code == 0 and new_session.session_id > 0
    assert state.fetch_sessions.get(new_session.session_id) is not None
    assert bytes(new_session.responses[0].partitions[0].records)
    incremental = await fetch(state, 11, [], session_id=123, session_epoch=4)
    assert (incremental.error_code, incremental.responses) == (70, ())


async def test_long_poll_returns_on_produce(state: BrokerState) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    task = asyncio.create_task(fetch(state, 11, [("t", 0, 0)], max_wait_ms=5000))
    await asyncio.sleep(0.02)
    assert not task.done()
    await produce(state, "t", 0, b"late")
    resp = await asyncio.wait_for(task, 2)
    assert loop.time() - start < 2
    assert bytes(resp.responses[0].partitions[0].records) == batch_at(state, "t", 0)


async def test_long_poll_times_out_empty(state: BrokerState) -> None:
    resp = await fetch(state, 11, [("t", 0, 0)], max_wait_ms=50)
    p = resp.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, bytes(p.records)) == (0, 0, b"")


async def test_max_bytes_across_partitions(state: BrokerState) -> None:
    await produce(state, "t", 0, b"x" * 300)
    await produce(state, "t", 1, b"y" * 300)
    resp = await fetch(state, 11, [("t", 0, 0), ("t", 1, 0)], max_bytes=10)
    p0, p1 = resp.responses[0].partitions
    assert len(bytes(p0.records)) == len(batch(b"x" * 300))  # KIP-74: one whole batch
    assert bytes(p1.records) == b""


async def test_leader_epoch_checked_from_v9(state: BrokerState) -> None:
    await produce(state, "t", 0, b"a")
    unchecked = await fetch(state, 9, [("t", 0, 0)], leader_epoch=-1)
    assert unchecked.responses[0].partitions[0].error_code == 0
    newer = await fetch(state, 9, [("t", 0, 0)], leader_epoch=3)
    assert newer.responses[0].partitions[0].error_code == 75  # UNKNOWN_LEADER_EPOCH
    part = state.replica_manager.get_partition("t", 0)
    assert part is not None
    state.replica_manager.make_leader("t", 0, part.topic_id, 5)
    older = await fetch(state, 9, [("t", 0, 0)], leader_epoch=3)
    assert older.responses[0].partitions[0].error_code == 74  # FENCED_LEADER_EPOCH
    v8 = await fetch(state, 8, [("t", 0, 0)], leader_epoch=3)  # no such field before v9
    assert v8.responses[0].partitions[0].error_code == 0
