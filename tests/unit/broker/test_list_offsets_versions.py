"""ListOffsets v1-v11 end to end on the wire: kio's requests (with an unknown tagged field from
v6, the first flexible version) through the broker's decode -> handler -> encode path, decoded
by kio; MAX_TIMESTAMP (-3) finds the record holding the largest timestamp inside its batch;
-4 earliest-local, -5 latest-tiered and -6 earliest-pending-upload without tiered storage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers import served_versions
from strata.broker.handlers.list_offsets import handle
from strata.protocol import ApiKey
from strata.protocol.codec import decode_request, encode_response
from strata.protocol.header import RequestHeader, encode_request_header, request_header_version
from strata.protocol.messages import decode_response_body, encode_body, is_flexible
from strata.storage.records import RecordSpec, build_batch

from .helpers import broker_state, context, now_ms, request

SERVED = served_versions()[ApiKey.LIST_OFFSETS]
VERSIONS = list(SERVED.versions())
BASE = now_ms() - 60_000
UNKNOWN_TAG = b"\x01\x1f\x03abc"  # a TAG_BUFFER holding one tag (31) no schema knows


def test_serves_up_to_v11() -> None:
    assert (SERVED.min_version, SERVED.max_version) == (1, 11)


def list_offsets_request(version: int, timestamps: list[int], partition: int = 0) -> Any:
    return request(ApiKey.LIST_OFFSETS, version, replica_id=-1, isolation_level=0,
                   timeout_ms=30_000,
                   topics=[{"name": "t", "partitions": [
                       {"partition_index": partition, "timestamp": ts,
                        "current_leader_epoch": -1} for ts in timestamps]}])


async def round_trip(state: BrokerState, version: int, body: Any) -> list[Any]:
    header = RequestHeader(ApiKey.LIST_OFFSETS, version, 5, "golden")
    raw = encode_body(body)
    if is_flexible(ApiKey.LIST_OFFSETS, version):
        assert raw.endswith(b"\x00")
        raw = raw[:-1] + UNKNOWN_TAG
    frame = encode_request_header(
        header, request_header_version(ApiKey.LIST_OFFSETS, version)) + raw
    decoded = decode_request(frame, served_versions())
    assert decoded.body == body
    response = await handle(context(state, ApiKey.LIST_OFFSETS, version), decoded.body)
    out = encode_response(decoded.header, response)
    # size prefix, correlation id, then (flexible) the response header's TAG_BUFFER
    offset = 8 + (1 if is_flexible(ApiKey.LIST_OFFSETS, version) else 0)
    assert int.from_bytes(out[4:8], "big") == 5
    got = decode_response_body(ApiKey.LIST_OFFSETS, version, out, offset)
    return [p for t in got.topics for p in t.partitions]


@pytest.fixture
async def state(tmp_path: Path) -> BrokerState:
    """``t-0``: offsets 0-2 in one batch with timestamps +100, +400, +250 (the largest in the
    middle), then offsets 3-4 in a second batch with +300, +350."""
    state = broker_state(tmp_path, ("t", 1))
    for specs in ([BASE + 100, BASE + 400, BASE + 250], [BASE + 300, BASE + 350]):
        records = build_batch([RecordSpec(key=b"k", value=b"v", timestamp=ts) for ts in specs])
        (r,) = await state.replica_manager.append_records([(("t", 0), records)], 1, 1000)
        assert r.error_code == 0
    return state


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_version_round_trips(state: BrokerState, version: int) -> None:
    answers = await round_trip(state, version, list_offsets_request(version, [-1]))
    (latest,) = answers
    assert (latest.error_code, latest.offset) == (0, 5)
    (by_time,) = await round_trip(state, version, list_offsets_request(version, [BASE + 260]))
    assert (by_time.offset, by_time.timestamp) == (1, BASE + 400)
    if version >= 4:
        assert by_time.leader_epoch == 0


@pytest.mark.parametrize("version", VERSIONS)
async def test_max_timestamp_is_the_record_holding_it(state: BrokerState, version: int) -> None:
    (top,) = await round_trip(state, version, list_offsets_request(version, [-3]))
    # Not the batch's last offset (2): the record at offset 1 has the largest timestamp.
    assert (top.error_code, top.offset, top.timestamp) == (0, 1, BASE + 400)
    if version >= 4:
        assert top.leader_epoch == 0


async def test_max_timestamp_under_log_append_time(tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1), log_message_timestamp_type="LogAppendTime")
    records = build_batch([RecordSpec(key=b"k", value=b"v", timestamp=BASE + d)
                           for d in (100, 400, 250)])
    (r,) = await state.replica_manager.append_records([(("t", 0), records)], 1, 1000)
    assert r.error_code == 0 and r.log_append_time > BASE
    (top,) = await round_trip(state, 11, list_offsets_request(11, [-3]))
    # Every record carries the batch's append time: the first one holds the maximum (Kafka).
    assert (top.offset, top.timestamp) == (0, r.log_append_time)


async def test_max_timestamp_of_an_empty_log(tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1))
    (top,) = await round_trip(state, 11, list_offsets_request(11, [-3]))
    assert (top.error_code, top.offset, top.timestamp) == (0, -1, -1)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 8])
async def test_earliest_local_and_tiered_sentinels(state: BrokerState, version: int) -> None:
    assert state.replica_manager.get_partition_or_error("t", 0).delete_records_on_leader(1) == 1
    sentinels = [-4] + ([-5] if version >= 9 else []) + ([-6] if version >= 11 else [])
    for ts in sentinels:
        (answer,) = await round_trip(state, version, list_offsets_request(version, [ts]))
        got = (answer.error_code, answer.offset, answer.timestamp, answer.leader_epoch)
        if ts == -4:
            assert got == (0, 1, -1, 0), ts  # the log start offset
        else:
            assert got == (0, -1, -1, -1), ts  # nothing tiered: Kafka's answer without it
