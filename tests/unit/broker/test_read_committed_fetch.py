"""read_committed on the partition side: Fetch bounded by the LSO with the aborted
transactions, the encoder's aborted_transactions against kio, the long poll woken by a
marker, ListOffsets latest/max-timestamp under read_committed."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.network.fetch_response import encode_fetch_response
from strata.broker.network.request_context import Response
from strata.broker.replication.partition import FetchIsolation
from strata.broker.replication.partition_results import FetchPartitionResult, PartitionFetchInfo
from strata.protocol import ApiKey, build_response
from strata.protocol.messages import encode_body
from strata.storage.file_records import FileSlice
from strata.storage.log_transactions import AppendOrigin
from strata.storage.records import build_end_transaction_marker

from .helpers import batch, broker_state

ABORTED, OPEN = 5000, 6000


def _txn(pid: int, sequence: int, *values: bytes, **kwargs: Any) -> bytes:
    return batch(*values, producer_id=pid, producer_epoch=0, base_sequence=sequence,
                 is_transactional=True, **kwargs)


async def _append(state: BrokerState, records: bytes, *, marker: bool = False) -> None:
    origin = AppendOrigin.COORDINATOR if marker else AppendOrigin.CLIENT
    (result,) = await state.replica_manager.append_records([(("t", 0), records)], 1, 1000,
                                                           origin)
    assert result.error_code == 0, result


def _marker(pid: int, commit: bool) -> bytes:
    return build_end_transaction_marker(pid, 0, 0, commit, 0)


async def _fetch(state: BrokerState, isolation: FetchIsolation, offset: int = 0,
                 max_wait_ms: int = 0, min_bytes: int = 1) -> FetchPartitionResult:
    (result,) = await state.replica_manager.fetch_messages(
        [(("t", 0), PartitionFetchInfo(offset, 1 << 20))], max_wait_ms=max_wait_ms,
        min_bytes=min_bytes, max_bytes=1 << 20, isolation=isolation)
    return result


@pytest.fixture
def state(tmp_path: Path) -> BrokerState:
    return broker_state(tmp_path, ("t", 1))


async def test_read_committed_stops_at_the_lso_and_lists_aborted(state: BrokerState) -> None:
    await _append(state, _txn(ABORTED, 0, b"a1", b"a2"))  # 0-1
    await _append(state, batch(b"plain"))  # 2
    await _append(state, _marker(ABORTED, False), marker=True)  # 3
    await _append(state, _txn(OPEN, 0, b"o1"))  # 4, open
    await _append(state, batch(b"after"))  # 5
    uncommitted = await _fetch(state, FetchIsolation.HIGH_WATERMARK)
    committed = await _fetch(state, FetchIsolation.TXN_COMMITTED)
    assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (6, 4)
    assert uncommitted.aborted_transactions is None
    assert (committed.high_watermark, committed.last_stable_offset) == (6, 4)
    assert committed.aborted_transactions == ((ABORTED, 0),)
    assert committed.size < uncommitted.size  # nothing at or past the LSO
    assert await _fetch(state, FetchIsolation.TXN_COMMITTED, offset=4) == FetchPartitionResult(
        0, 6, 4, 0, (), 0, ())


async def test_long_poll_wakes_when_the_commit_marker_moves_the_lso(state: BrokerState) -> None:
    await _append(state, _txn(OPEN, 0, b"o1", b"o2"))
    waiting = asyncio.ensure_future(_fetch(state, FetchIsolation.TXN_COMMITTED,
                                           max_wait_ms=5000))
    await asyncio.sleep(0)  # the fetch is parked in the purgatory (no data below the LSO)
    assert not waiting.done()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await _append(state, _marker(OPEN, True), marker=True)
    result = await asyncio.wait_for(waiting, 5)
    assert loop.time() - started < 2
    assert (result.last_stable_offset, result.aborted_transactions) == (3, ())
    assert result.size > 0


async def test_list_offsets_under_read_committed(state: BrokerState) -> None:
    partition = state.replica_manager.get_partition_or_error("t", 0)
    await _append(state, batch(b"p", timestamp=1000))  # 0
    await _append(state, _txn(OPEN, 0, b"o", timestamp=5000))  # 1, open
    latest = partition.fetch_offset_for_timestamp(-1, FetchIsolation.TXN_COMMITTED)
    assert latest is not None and latest.offset == 1
    hw_latest = partition.fetch_offset_for_timestamp(-1, FetchIsolation.HIGH_WATERMARK)
    assert hw_latest is not None and hw_latest.offset == 2
    # the max timestamp and a timestamp search only answer what read_committed may read
    assert partition.fetch_offset_for_timestamp(-3, FetchIsolation.TXN_COMMITTED) is None
    assert partition.fetch_offset_for_timestamp(4000, FetchIsolation.TXN_COMMITTED) is None
    found = partition.fetch_offset_for_timestamp(4000, FetchIsolation.HIGH_WATERMARK)
    assert found is not None and found.offset == 1
    await _append(state, _marker(OPEN, True), marker=True)
    committed = partition.fetch_offset_for_timestamp(4000, FetchIsolation.TXN_COMMITTED)
    assert committed is not None and committed.offset == 1


# -------------------------------------------------------------------- the encoder vs kio


def _materialise(response: Response) -> bytes:
    return b"".join(c.read_bytes() if isinstance(c, FileSlice) else c for c in response.chunks)


@pytest.mark.parametrize("version", range(4, 19))
def test_aborted_transactions_encoded_as_kio_does(tmp_path: Path, version: int) -> None:
    data = batch(b"x")
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        txns = ((ABORTED, 0), (OPEN, 7))
        tid = uuid.UUID("6d1c1a5e-0000-4000-8000-00000000000d")
        topic: Any = tid if version >= 13 else "t"
        ours = encode_fetch_response(version, [(topic, [
            (0, FetchPartitionResult(0, 10, 8, 0, (FileSlice(fd, 0, len(data)),), len(data),
                                     txns)),
            (1, FetchPartitionResult(0, 5, 5, 0, (), 0, ())),
        ])], read_committed=True)
        kinds = [type(c).__name__ for c in ours.chunks]
        assert kinds == ["bytes", "FileSlice", "bytes"]
        expected = build_response(ApiKey.FETCH, version, {
            "throttle_time_ms": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic": "t", "topic_id": tid, "partitions": [
                {"partition_index": 0, "error_code": 0, "high_watermark": 10,
                 "last_stable_offset": 8, "log_start_offset": 0, "records": data,
                 "preferred_read_replica": -1,
                 "aborted_transactions": [{"producer_id": p, "first_offset": o}
                                          for p, o in txns]},
                {"partition_index": 1, "error_code": 0, "high_watermark": 5,
                 "last_stable_offset": 5, "log_start_offset": 0, "records": b"",
                 "preferred_read_replica": -1, "aborted_transactions": []}]}]})
        assert _materialise(ours) == encode_body(expected)
    finally:
        os.close(fd)
