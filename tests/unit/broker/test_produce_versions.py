"""Produce v3-v13 end to end on the wire: requests written by kio (with an unknown tagged field
in the flexible versions) go through the broker's decode -> handler -> encode path, and kio
decodes the answer; the hand-written flexible encoder against kio's bytes (current_leader,
node_endpoints, record_errors); topic ids (v13); record_errors on a compacted topic (KIP-467)."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from strata.broker.broker_state import BrokerEndpoint, BrokerState
from strata.broker.cluster.image import BrokerRegistration, ClusterImage, PartitionRegistration
from strata.broker.handlers import served_versions
from strata.broker.handlers.produce import (
    LeaderHints,
    encode_produce_response,
    handle,
    topic_name,
)
from strata.broker.network.request_context import Response
from strata.broker.replication.partition_results import PartitionAppendResult
from strata.protocol import ApiKey, build_response
from strata.protocol.codec import decode_request
from strata.protocol.header import RequestHeader, encode_request_header, request_header_version
from strata.protocol.messages import decode_response_body, encode_body, is_flexible
from strata.storage.records import RecordSpec, build_batch

from .helpers import TOPIC_ID, batch, broker_state, context, request

SERVED = served_versions()[ApiKey.PRODUCE]
VERSIONS = list(SERVED.versions())
UNKNOWN_TAG = b"\x01\x1f\x03abc"  # a TAG_BUFFER holding one tag (31) no schema knows


def test_serves_up_to_v13() -> None:
    assert (SERVED.min_version, SERVED.max_version) == (3, 13)


def produce_request(version: int, parts: list[tuple[str, int, bytes | None]],
                    topic_ids: dict[str, uuid.UUID | None] | None = None,
                    acks: int = 1) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, index, records in parts:
        topics.setdefault(name, []).append({"index": index, "records": records})
    ids = topic_ids or {}
    return request(ApiKey.PRODUCE, version, transactional_id=None, acks=acks, timeout_ms=1000,
                   topic_data=[{"name": n, "topic_id": ids.get(n, TOPIC_ID),
                                "partition_data": p} for n, p in topics.items()])


def wire(version: int, body: Any, *, unknown_tag: bool) -> bytes:
    """The request frame (without the size prefix) a client would send."""
    header = RequestHeader(ApiKey.PRODUCE, version, 11, "golden")
    raw = encode_body(body)
    if unknown_tag:
        assert raw.endswith(b"\x00")  # the top-level TAG_BUFFER, empty
        raw = raw[:-1] + UNKNOWN_TAG
    return encode_request_header(header, request_header_version(ApiKey.PRODUCE, version)) + raw


def body_bytes(response: Response) -> bytes:
    return b"".join(c for c in response.chunks if isinstance(c, bytes))


async def round_trip(state: BrokerState, version: int, body: Any) -> Any:
    """decode_request (the connection's decoder) -> handle -> our bytes -> kio's decoder."""
    decoded = decode_request(wire(version, body, unknown_tag=is_flexible(ApiKey.PRODUCE, version)),
                             served_versions())
    assert decoded.body == body  # the unknown tag was skipped, nothing else changed
    response = await handle(context(state, ApiKey.PRODUCE, version), decoded.body)
    assert isinstance(response, Response)
    return decode_response_body(ApiKey.PRODUCE, version, body_bytes(response), 0)


@pytest.fixture
def state(tmp_path: Path) -> BrokerState:
    return broker_state(tmp_path, ("t", 2))


async def host_topic(state: BrokerState, name: str, partitions: int,
                     configs: dict[str, str] | None = None) -> uuid.UUID:
    await state.create_internal_topic(name, partitions, 1, configs or {})
    record = state.topic_store.get(name)
    assert record is not None
    return record.topic_id


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_version_round_trips_through_the_wire(state: BrokerState,
                                                          version: int) -> None:
    topic_id = await host_topic(state, "v", 2)
    body = produce_request(version, [("v", 0, batch(b"a", b"b")), ("v", 1, batch(b"c")),
                                     ("v", 7, batch(b"d"))], {"v": topic_id})
    first = await round_trip(state, version, body)
    second = await round_trip(state, version, body)
    (topic,) = second.responses
    if version >= 13:
        assert topic.topic_id == topic_id
    else:
        assert topic.name == "v"
    got = [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses]
    assert got == [(0, 0, 2), (1, 0, 1), (7, 3, -1)]  # 3: UNKNOWN_TOPIC_OR_PARTITION
    if version >= 5:
        assert [p.log_start_offset for p in topic.partition_responses] == [0, 0, -1]
    assert [p.base_offset for p in first.responses[0].partition_responses] == [0, 0, -1]
    if version >= 8:
        assert all(p.record_errors == () for p in topic.partition_responses)
    assert second.throttle_time.total_seconds() == 0


@pytest.mark.parametrize("stranger", [uuid.UUID("00000000-0000-4000-8000-00000000abcd"),
                                      None])  # None: kio's all-zero id on the wire
async def test_v13_unknown_topic_id(state: BrokerState, stranger: uuid.UUID | None) -> None:
    body = produce_request(13, [("t", 0, batch(b"a")), ("t", 1, batch(b"b"))],
                           {"t": stranger})
    (topic,) = (await round_trip(state, 13, body)).responses
    assert topic.topic_id == stranger
    assert [p.error_code for p in topic.partition_responses] == [100, 100]  # UNKNOWN_TOPIC_ID
    assert state.replica_manager.get_partition("t", 0).log_end_offset == 0  # type: ignore[union-attr]


def test_topic_name_cache_never_answers_a_stale_id() -> None:
    first, second = uuid.uuid4(), uuid.uuid4()
    records = {"r": SimpleNamespace(name="r", topic_id=first)}
    store = SimpleNamespace(topics=lambda: records, get=records.get)
    assert topic_name(store, first) == "r"
    records["r"] = SimpleNamespace(name="r", topic_id=second)  # deleted and recreated
    assert topic_name(store, first) is None
    assert topic_name(store, second) == "r"
    del records["r"]
    assert topic_name(store, second) is None


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 8])
async def test_keyless_records_on_a_compacted_topic_are_listed(state: BrokerState,
                                                               version: int) -> None:
    topic_id = await host_topic(state, "c", 1, {"cleanup.policy": "compact"})
    keyless = set(range(5, 100, 10))
    specs = [RecordSpec(key=None if i in keyless else b"k%d" % i, value=b"v%d" % i)
             for i in range(100)]
    records = build_batch(specs)
    (topic,) = (await round_trip(state, version, produce_request(
        version, [("c", 0, records)], {"c": topic_id}))).responses
    (p,) = topic.partition_responses
    assert p.error_code == 87  # INVALID_RECORD
    assert p.base_offset == -1 and p.log_start_offset == 0
    assert [e.batch_index for e in p.record_errors] == sorted(keyless)
    assert all("without a key" in (e.batch_index_error_message or "") for e in p.record_errors)
    assert p.error_message.startswith("One or more records have been rejected due to 10 record")
    # The batch failed as a whole: nothing of it was appended.
    assert state.replica_manager.get_partition("c", 0).log_end_offset == 0  # type: ignore[union-attr]
    keyed = build_batch([RecordSpec(key=b"k%d" % i, value=b"v") for i in range(90)])
    (topic,) = (await round_trip(state, version, produce_request(
        version, [("c", 0, keyed)], {"c": topic_id}))).responses
    assert (topic.partition_responses[0].error_code, topic.partition_responses[0].base_offset) \
        == (0, 0)


# ----------------------------------------------------------------- the encoder against kio


def kio_response(version: int, topics: Any, results: list[PartitionAppendResult],
                 current: dict[int, tuple[int, int]], endpoints: list[BrokerEndpoint]) -> bytes:
    flat = [(t, d) for t in topics for d in t.partition_data]
    responses = []
    for t in topics:
        parts = []
        for j, (tt, d) in enumerate(flat):
            if tt is not t:
                continue
            r = results[j]
            part: dict[str, Any] = {
                "index": d.index, "error_code": r.error_code, "base_offset": r.base_offset,
                "log_append_time_ms": r.log_append_time, "log_start_offset": r.log_start_offset,
                "record_errors": [{"batch_index": i, "batch_index_error_message": m}
                                  for i, m in r.record_errors],
                "error_message": r.error_message if r.error_code else None}
            if version >= 10 and j in current:
                part["current_leader"] = {"leader_id": current[j][0],
                                          "leader_epoch": current[j][1]}
            parts.append(part)
        responses.append({"name": getattr(t, "name", None),
                          "topic_id": getattr(t, "topic_id", None),
                          "partition_responses": parts})
    fields: dict[str, Any] = {"throttle_time_ms": 0, "responses": responses}
    if version >= 10:
        fields["node_endpoints"] = [{"node_id": b.node_id, "host": b.host, "port": b.port,
                                     "rack": b.rack} for b in endpoints]
    return encode_body(build_response(ApiKey.PRODUCE, version, fields))


@pytest.mark.parametrize("version", VERSIONS)
def test_encoder_bytes_match_kio(version: int) -> None:
    topics = produce_request(version, [("t", 0, b""), ("t", 1, b""), ("ünï", 3, b""),
                                       ("t", 2, b"")]).topic_data
    results = [PartitionAppendResult(0, 41, -1, 0),
               PartitionAppendResult(87, log_start_offset=4, error_message="refused",
                                     record_errors=((3, "no key"), (9, None))),
               PartitionAppendResult(0, 7, 1_700_000_000_123, 5),
               PartitionAppendResult(6, error_message="not the leader")]
    current = {3: (2, 17)} if version >= 10 else {}
    endpoints = [BrokerEndpoint(2, "broker-2.example", 9093, "rack-b"),
                 BrokerEndpoint(5, "b5", 19092)] if version >= 10 else []
    hints = LeaderHints(current, endpoints) if version >= 10 else None
    ours = body_bytes(encode_produce_response(version, topics, results, hints))
    assert ours == kio_response(version, topics, results, current, endpoints)
    decoded = decode_response_body(ApiKey.PRODUCE, version, ours, 0)
    parts = [p for t in decoded.responses for p in t.partition_responses]
    throttled = decode_response_body(ApiKey.PRODUCE, version, body_bytes(
        encode_produce_response(version, topics, results, hints, throttle_time_ms=1234)), 0)
    assert throttled.throttle_time.total_seconds() == 1.234
    assert throttled.responses == decoded.responses
    if version >= 8:
        assert [(e.batch_index, e.batch_index_error_message) for e in parts[1].record_errors] \
            == [(3, "no key"), (9, None)]
    if version >= 10:
        assert (parts[3].current_leader.leader_id, parts[3].current_leader.leader_epoch) == (2, 17)
        assert parts[0].current_leader.leader_id == -1  # default: the tag is not written
        assert [(n.node_id, n.host, n.port, n.rack) for n in decoded.node_endpoints] == [
            (2, "broker-2.example", 9093, "rack-b"), (5, "b5", 19092, None)]


def test_a_long_unicode_message_is_cut_not_overflowed() -> None:
    topics = produce_request(11, [("t", 0, b"")]).topic_data
    results = [PartitionAppendResult(87, error_message="é" * 300_000)]
    decoded = decode_response_body(
        ApiKey.PRODUCE, 11, body_bytes(encode_produce_response(11, topics, results)), 0)
    assert len(decoded.responses[0].partition_responses[0].error_message) == 8000


# --------------------------------------------------------------- NOT_LEADER_OR_FOLLOWER (KIP-951)


async def led_elsewhere(state: BrokerState, leader: int | None) -> uuid.UUID:
    """Topic ``n`` (2 partitions): partition 0 follows, and a cluster image in which ``n`` is
    led by ``leader`` (None: no leader) at epoch 9, with brokers 1 (this one) and 2."""
    topic_id = await host_topic(state, "n", 2)
    state.replica_manager.make_follower("n", 0, topic_id, leader, 9, replicas=(1, 2),
                                        isr=frozenset({1, 2}), partition_epoch=1)
    brokers = {i: BrokerRegistration(node_id=i, host=f"h{i}", port=9000 + i, rack=None,
                                     epoch=1) for i in (1, 2)}
    partitions = {("n", i): PartitionRegistration(
        topic_id=topic_id, replicas=(1, 2), isr=(1, 2),
        leader=-1 if leader is None else leader, leader_epoch=9, partition_epoch=1)
        for i in (0, 1)}
    state.cluster = SimpleNamespace(  # type: ignore[assignment]
        image=ClusterImage(brokers=brokers, partitions=partitions))
    return topic_id


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 10])
async def test_not_leader_names_the_current_leader(state: BrokerState, version: int) -> None:
    topic_id = await led_elsewhere(state, 2)
    response = await round_trip(state, version, produce_request(
        version, [("n", 0, batch(b"a")), ("n", 1, batch(b"b"))], {"n": topic_id}))
    p0, p1 = response.responses[0].partition_responses
    assert p0.error_code == 6  # NOT_LEADER_OR_FOLLOWER
    assert (p0.current_leader.leader_id, p0.current_leader.leader_epoch) == (2, 9)
    assert p1.error_code == 0 and p1.current_leader.leader_id == -1
    assert [(n.node_id, n.host, n.port) for n in response.node_endpoints] == [(2, "h2", 9002)]


async def test_not_leader_without_a_known_leader(state: BrokerState) -> None:
    topic_id = await led_elsewhere(state, None)
    response = await round_trip(state, 13, produce_request(13, [("n", 0, batch(b"a"))],
                                                           {"n": topic_id}))
    (p,) = response.responses[0].partition_responses
    assert p.error_code == 6 and p.current_leader.leader_id == -1
    assert response.node_endpoints == ()
