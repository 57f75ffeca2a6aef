"""Fetch at every served version (v4-v18), through the broker's own path: a request built and
encoded by kio, decoded by ``decode_request``, answered by the handler, the response bytes
(header included) decoded by kio. Also: topic ids (KIP-516), fetch sessions (KIP-227) end to
end in the handler, v12 ``diverging_epoch``, v16 ``current_leader`` / ``node_endpoints``
(KIP-951), v15 ``replica_state`` (KIP-903), tagged fields both ways, and the hand-written
flexible response byte-identical to kio's."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers import served_versions
from strata.broker.handlers.fetch import handle
from strata.broker.network.fetch_response import (
    NodeEndpoint,
    PartitionTags,
    encode_fetch_response,
)
from strata.broker.network.request_context import RequestContext, Response
from strata.broker.replication.partition_results import FetchPartitionResult
from strata.protocol import ApiKey, build_response
from strata.protocol.codec import decode_request, encode_request
from strata.protocol.error_codes import ErrorCode
from strata.protocol.header import RequestHeader, encode_response_header, response_header_version
from strata.protocol.messages import build_request, decode_response_body, encode_body
from strata.storage.file_records import FileSlice

from .helpers import add_topics, batch, group_broker_state

VERSIONS = range(4, 19)
FLEXIBLE = range(12, 19)
BY_ID = range(13, 19)


@pytest.fixture
async def state(tmp_path: Path) -> BrokerState:
    state = group_broker_state(tmp_path)
    await add_topics(state, ("t", 3), ("u", 1))
    return state


def topic_id(state: BrokerState, name: str) -> uuid.UUID:
    record = state.topic_store.get(name)
    assert record is not None
    return record.topic_id


async def produce(state: BrokerState, topic: str, partition: int, *values: bytes) -> None:
    for value in values:
        (r,) = await state.replica_manager.append_records([((topic, partition), batch(value))],
                                                          1, 1000)
        assert r.error_code == 0


def fetch_request(state: BrokerState, version: int, parts: list[tuple[str, int, int]], *,
                  session_id: int = 0, session_epoch: int = -1, leader_epoch: int = -1,
                  last_fetched_epoch: int = -1, replica_id: int = -1,
                  forgotten: list[tuple[str, int]] | None = None,
                  ids: dict[str, uuid.UUID] | None = None) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, index, offset in parts:
        topics.setdefault(name, []).append({
            "partition": index, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
            "last_fetched_epoch": last_fetched_epoch, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20})

    def tid(name: str) -> uuid.UUID:
        return (ids or {}).get(name) or topic_id(state, name)

    return build_request(ApiKey.FETCH, version, {
        "replica_id": replica_id, "replica_state": {"replica_id": replica_id, "replica_epoch": -1},
        "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": session_epoch,
        "topics": [{"topic": n, "topic_id": tid(n), "partitions": p} for n, p in topics.items()],
        "forgotten_topics_data": [{"topic": n, "topic_id": tid(n), "partitions": [i]}
                                  for n, i in forgotten or []],
        "rack_id": ""})


async def round_trip(state: BrokerState, version: int, body: Any,
                     extra_tag: bytes = b"") -> Any:
    """Encode ``body`` as a client would, decode it as the connection does, answer it, and
    decode the response frame's bytes (response header included) with kio."""
    frame = encode_request(RequestHeader(ApiKey.FETCH, version, 99, "test"), body)[4:]
    if extra_tag:  # an unknown top-level tagged field: replace the empty tag section
        assert frame[-1] == 0
        frame = frame[:-1] + extra_tag
    request = decode_request(frame, served_versions())
    ctx = RequestContext(request.header, "127.0.0.1", 50000, state)
    response = await handle(ctx, request.body)
    assert isinstance(response, Response)
    body_bytes = b"".join(c.read_bytes() if isinstance(c, FileSlice) else c
                          for c in response.chunks)
    assert len(body_bytes) == response.size
    header = encode_response_header(99, response_header_version(ApiKey.FETCH, version))
    raw = header + body_bytes
    assert raw.startswith(struct.pack(">i", 99))
    return decode_response_body(ApiKey.FETCH, version, raw, len(header))


def topic_of(state: BrokerState, version: int, entry: Any) -> str:
    if version >= 13:
        names = {r.topic_id: n for n, r in state.topic_store.topics().items()}
        return names[entry.topic_id]
    return str(entry.topic)


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_version_round_trips(state: BrokerState, version: int) -> None:
    await produce(state, "t", 0, b"a", b"b")
    await produce(state, "u", 0, b"c")
    resp = await round_trip(state, version, fetch_request(
        state, version, [("t", 0, 0), ("t", 1, 0), ("u", 0, 0)]))
    t, u = resp.responses
    assert (topic_of(state, version, t), topic_of(state, version, u)) == ("t", "u")
    p0, p1 = t.partitions
    assert (p0.partition_index, p0.error_code, p0.high_watermark) == (0, 0, 2)
    log = state.replica_manager.get_partition("t", 0)
    assert log is not None
    assert bytes(p0.records) == log.log.read(0, 1 << 20, None, True).read_bytes()
    assert (p1.high_watermark, bytes(p1.records)) == (0, b"")
    assert u.partitions[0].high_watermark == 1
    if version >= 7:
        assert (resp.error_code, resp.session_id) == (0, 0)  # epoch -1: sessionless
    if version >= 12:  # nothing diverged, no leader error: the tagged fields keep defaults
        assert p0.diverging_epoch.epoch == -1 and p0.current_leader.leader_id == -1
    if version >= 16:
        assert resp.node_endpoints == ()


@pytest.mark.parametrize("version", FLEXIBLE)
async def test_unknown_tagged_fields_in_the_request_are_ignored(state: BrokerState,
                                                                version: int) -> None:
    await produce(state, "t", 0, b"a")
    unknown = b"\x01" + b"\x1f" + b"\x03xyz"  # one field, tag 31, 3 bytes
    resp = await round_trip(state, version, fetch_request(state, version, [("t", 0, 0)]),
                            extra_tag=unknown)
    assert resp.responses[0].partitions[0].high_watermark == 1


@pytest.mark.parametrize("version", BY_ID)
async def test_unknown_topic_id(state: BrokerState, version: int) -> None:
    stranger = uuid.UUID("0a0a0a0a-0000-4000-8000-00000000000a")
    resp = await round_trip(state, version, fetch_request(
        state, version, [("x", 0, 0), ("t", 0, 0)], ids={"x": stranger}))
    unknown, known = resp.responses
    assert unknown.topic_id == stranger
    assert unknown.partitions[0].error_code == ErrorCode.unknown_topic_id
    assert known.partitions[0].error_code == ErrorCode.none


async def test_inconsistent_topic_id(state: BrokerState) -> None:
    hosted = state.replica_manager.get_partition("t", 0)
    assert hosted is not None
    hosted.topic_id = uuid.UUID("0b0b0b0b-0000-4000-8000-00000000000b")  # re-created meanwhile
    resp = await round_trip(state, 13, fetch_request(state, 13, [("t", 0, 0), ("t", 1, 0)]))
    p0, p1 = resp.responses[0].partitions
    assert (p0.error_code, p1.error_code) == (ErrorCode.inconsistent_topic_id, ErrorCode.none)
    by_name = await round_trip(state, 12, fetch_request(state, 12, [("t", 0, 0)]))
    assert by_name.responses[0].partitions[0].error_code == ErrorCode.none  # no id to check


async def epoch_history(state: BrokerState) -> None:
    """t-0: offsets 0-1 written in leader epoch 0, 2-3 in leader epoch 1."""
    await produce(state, "t", 0, b"a", b"b")
    hosted = state.replica_manager.get_partition("t", 0)
    assert hosted is not None
    hosted.make_leader(1)
    await produce(state, "t", 0, b"c", b"d")


@pytest.mark.parametrize("version", FLEXIBLE)
async def test_diverging_epoch(state: BrokerState, version: int) -> None:
    await epoch_history(state)
    # The fetcher has offsets up to 3 in epoch 0, but epoch 0 ended at offset 2 here.
    resp = await round_trip(state, version, fetch_request(
        state, version, [("t", 0, 3)], last_fetched_epoch=0, leader_epoch=1))
    p = resp.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, bytes(p.records)) == (0, 4, b"")
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (0, 2)
    # In line with the log: a normal read.
    resp = await round_trip(state, version, fetch_request(
        state, version, [("t", 0, 2)], last_fetched_epoch=0, leader_epoch=1))
    p = resp.responses[0].partitions[0]
    assert p.diverging_epoch.epoch == -1 and len(bytes(p.records)) > 0


@pytest.mark.parametrize("version", VERSIONS)
async def test_current_leader_on_fenced_epoch_from_v16(state: BrokerState, version: int
                                                       ) -> None:
    await epoch_history(state)
    resp = await round_trip(state, version, fetch_request(state, version, [("t", 0, 0)],
                                                          leader_epoch=0))
    p = resp.responses[0].partitions[0]
    if version < 9:  # no current_leader_epoch in the request: nothing to fence
        assert p.error_code == ErrorCode.none
        return
    assert p.error_code == ErrorCode.fenced_leader_epoch
    if version >= 16:
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 1)
        (endpoint,) = resp.node_endpoints
        assert (endpoint.node_id, endpoint.host, endpoint.port) == (1, "127.0.0.1", 9092)
    elif version >= 12:
        assert p.current_leader.leader_id == -1  # Kafka fills it from v16 only


@pytest.mark.parametrize("version", [11, 15, 18])
async def test_follower_reads_to_the_log_end(state: BrokerState, version: int) -> None:
    hosted = state.replica_manager.get_partition("t", 0)
    assert hosted is not None
    hosted.make_leader(1, replicas=(1, 2), isr=frozenset((1, 2)))
    await produce(state, "t", 0, b"a")
    consumer = await round_trip(state, version, fetch_request(state, version, [("t", 0, 0)]))
    follower = await round_trip(state, version, fetch_request(state, version, [("t", 0, 0)],
                                                              replica_id=2))
    assert bytes(consumer.responses[0].partitions[0].records) == b""  # HW 0
    assert len(bytes(follower.responses[0].partitions[0].records)) == len(batch(b"a"))


# ----------------------------------------------------------------------- sessions end to end


@pytest.mark.parametrize("version", [7, 11, 12, 13, 18])
async def test_incremental_session(state: BrokerState, version: int) -> None:
    await produce(state, "t", 0, b"a")
    full = await round_trip(state, version, fetch_request(
        state, version, [("t", 0, 1), ("t", 1, 0), ("u", 0, 0)], session_epoch=0))
    session_id = full.session_id
    assert session_id > 0 and len(full.responses) == 2
    assert state.fetch_sessions.partitions_cached == 3
    # Nothing changed: an incremental fetch naming nothing gets nothing.
    quiet = await round_trip(state, version, fetch_request(
        state, version, [], session_id=session_id, session_epoch=1))
    assert (quiet.error_code, quiet.session_id, quiet.responses) == (0, session_id, ())
    # New records on t-1 only: only t-1 comes back.
    await produce(state, "t", 1, b"b")
    news = await round_trip(state, version, fetch_request(
        state, version, [], session_id=session_id, session_epoch=2))
    (topic,) = news.responses
    assert topic_of(state, version, topic) == "t"
    assert [(p.partition_index, p.high_watermark) for p in topic.partitions] == [(1, 1)]
    assert len(bytes(topic.partitions[0].records)) > 0
    # The fetcher moves t-1 on and forgets u-0.
    moved = await round_trip(state, version, fetch_request(
        state, version, [("t", 1, 1)], session_id=session_id, session_epoch=3,
        forgotten=[("u", 0)]))
    assert moved.responses == ()
    session = state.fetch_sessions.get(session_id)
    assert session is not None and session.size == 2
    # A stale epoch, and an unknown session.
    stale = await round_trip(state, version, fetch_request(
        state, version, [], session_id=session_id, session_epoch=3))
    assert (stale.error_code, stale.session_id, stale.responses) == (
        ErrorCode.invalid_fetch_session_epoch, 0, ())
    gone = await round_trip(state, version, fetch_request(
        state, version, [], session_id=session_id + 1, session_epoch=1))
    assert gone.error_code == ErrorCode.fetch_session_id_not_found
    # Closing it: epoch -1 is a sessionless full fetch.
    closed = await round_trip(state, version, fetch_request(
        state, version, [("t", 0, 0)], session_id=session_id, session_epoch=-1))
    assert closed.session_id == 0 and state.fetch_sessions.get(session_id) is None


async def test_a_session_by_name_is_refused_by_id(state: BrokerState) -> None:
    full = await round_trip(state, 12, fetch_request(state, 12, [("t", 0, 0)], session_epoch=0))
    by_id = await round_trip(state, 13, fetch_request(
        state, 13, [], session_id=full.session_id, session_epoch=1))
    assert by_id.error_code == ErrorCode.fetch_session_topic_id_error


async def test_session_of_a_deleted_topic_id_answers_unknown_topic_id(state: BrokerState
                                                                      ) -> None:
    full = await round_trip(state, 13, fetch_request(state, 13, [("t", 0, 0)], session_epoch=0))
    session = state.fetch_sessions.get(full.session_id)
    assert session is not None
    for p in session.partitions.values():  # as if the topic were deleted and re-created
        p.topic_id = uuid.UUID("0c0c0c0c-0000-4000-8000-00000000000c")
    resp = await round_trip(state, 13, fetch_request(
        state, 13, [], session_id=full.session_id, session_epoch=1))
    (topic,) = resp.responses
    assert topic.partitions[0].error_code == ErrorCode.unknown_topic_id


# --------------------------------------------------------- the flexible encoder against kio


def slices(tmp_path: Path) -> tuple[int, bytes]:
    import os

    data = batch(b"x", b"y")
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"pad" + data)
    return os.open(path, os.O_RDONLY), data


@pytest.mark.parametrize("read_committed", [False, True])
@pytest.mark.parametrize("version", FLEXIBLE)
def test_flexible_encoder_is_byte_identical_to_kio(tmp_path: Path, version: int,
                                                   read_committed: bool) -> None:
    import os

    fd, data = slices(tmp_path)
    try:
        one = FileSlice(fd, 3, len(data))
        tid = uuid.UUID("6d1c1a5e-0000-4000-8000-00000000000d")
        topic: Any = tid if version >= 13 else "orders"
        leader = PartitionTags(current_leader=(2, 7))
        ours = encode_fetch_response(version, [(topic, [
            (0, FetchPartitionResult(0, 10, 10, 0, (one,), len(data))),
            (1, FetchPartitionResult(6), leader),
            (2, FetchPartitionResult(0, 5, 5, 0), PartitionTags(diverging_epoch=(3, 40))),
        ])], read_committed=read_committed, session_id=5,
            node_endpoints=[NodeEndpoint(2, "b2.example", 9093, "r1")])
        kinds = [type(c).__name__ for c in ours.chunks]
        assert kinds == ["bytes", "FileSlice", "bytes"]  # records stay zero-copy
        raw = b"".join(c.read_bytes() if isinstance(c, FileSlice) else c for c in ours.chunks)
        aborted = [] if read_committed else None
        common = {"aborted_transactions": aborted, "preferred_read_replica": -1}
        expected = build_response(ApiKey.FETCH, version, {
            "throttle_time_ms": 0, "error_code": 0, "session_id": 5,
            "responses": [{"topic": "orders", "topic_id": tid, "partitions": [
                {"partition_index": 0, "error_code": 0, "high_watermark": 10,
                 "last_stable_offset": 10, "log_start_offset": 0, "records": data, **common},
                {"partition_index": 1, "error_code": 6, "high_watermark": -1,
                 "last_stable_offset": -1, "log_start_offset": -1, "records": b"",
                 "current_leader": {"leader_id": 2, "leader_epoch": 7}, **common},
                {"partition_index": 2, "error_code": 0, "high_watermark": 5,
                 "last_stable_offset": 5, "log_start_offset": 0, "records": b"",
                 "diverging_epoch": {"epoch": 3, "end_offset": 40}, **common}]}],
            "node_endpoints": [{"node_id": 2, "host": "b2.example", "port": 9093,
                                "rack": "r1"}]})
        assert raw == encode_body(expected)
        decoded = decode_response_body(ApiKey.FETCH, version, raw, 0)
        assert decoded.responses[0].partitions[1].current_leader.leader_epoch == 7
        if version >= 16:
            assert decoded.node_endpoints[0].rack == "r1"
    finally:
        os.close(fd)


def test_served_range() -> None:
    served = served_versions()[ApiKey.FETCH]
    assert (served.min_version, served.max_version) == (VERSIONS.start, VERSIONS.stop - 1)
