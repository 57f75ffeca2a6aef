"""Metadata at every served version (v0-v13) through the broker's own path: kio encodes the
request, ``decode_request`` decodes it, the handler answers, ``encode_response`` writes the
frame and kio decodes it. Also topic ids (v10+, KIP-516): refused in requests at v10-11 as
Kafka refuses them, resolved from v12; authorized operations (v8+, cluster's v8-10 only);
unknown tagged fields ignored; the v13 top-level error code."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers import served_versions
from strata.broker.handlers.metadata import handle
from strata.broker.network.request_context import RequestContext
from strata.protocol import ApiKey
from strata.protocol.codec import decode_request, decode_response, encode_request, encode_response
from strata.protocol.error_codes import ErrorCode
from strata.protocol.header import RequestHeader
from strata.protocol.messages import build_request
from strata.security.acl import AUTHORIZED_OPERATIONS_OMITTED

from .helpers import add_topics, group_broker_state

VERSIONS = range(0, 14)
ZERO = uuid.UUID(int=0)
STRANGER = uuid.UUID("0a0a0a0a-0000-4000-8000-00000000000a")


@pytest.fixture
async def state(tmp_path: Path) -> BrokerState:
    state = group_broker_state(tmp_path, auto_create_topics_enable="false")
    await add_topics(state, ("t", 2), ("u", 1))
    return state


def topic_id(state: BrokerState, name: str) -> uuid.UUID:
    record = state.topic_store.get(name)
    assert record is not None
    return record.topic_id


def metadata_request(version: int, topics: list[tuple[str | None, uuid.UUID]] | None, *,
                     topic_ops: bool = False, cluster_ops: bool = False) -> Any:
    return build_request(ApiKey.METADATA, version, {
        "topics": None if topics is None else [{"name": n, "topic_id": i} for n, i in topics],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": cluster_ops,
        "include_topic_authorized_operations": topic_ops})


async def round_trip(state: BrokerState, version: int, body: Any, extra_tag: bytes = b"") -> Any:
    frame = encode_request(RequestHeader(ApiKey.METADATA, version, 42, "test"), body)[4:]
    if extra_tag:
        assert frame[-1] == 0
        frame = frame[:-1] + extra_tag
    request = decode_request(frame, served_versions())
    response = await handle(RequestContext(request.header, "127.0.0.1", 50000, state),
                            request.body)
    raw = encode_response(request.header, response)
    correlation_id, decoded = decode_response(raw[4:], ApiKey.METADATA, version)
    assert correlation_id == 42
    return decoded


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_version_round_trips(state: BrokerState, version: int) -> None:
    names: list[tuple[str | None, uuid.UUID]] = [("t", ZERO), ("nope", ZERO)]
    resp = await round_trip(state, version, metadata_request(version, names))
    t, nope = resp.topics
    assert (t.name, t.error_code, len(t.partitions)) == ("t", 0, 2)
    assert [p.leader_id for p in t.partitions] == [1, 1]
    assert nope.error_code == ErrorCode.unknown_topic_or_partition
    assert [b.node_id for b in resp.brokers] == [1]
    if version >= 10:
        assert t.topic_id == topic_id(state, "t")
        assert nope.topic_id is None  # the zero UUID on the wire, which kio reads as None
    if version >= 13:
        assert resp.error_code == ErrorCode.none
    everything = await round_trip(state, version, metadata_request(
        version, [] if version == 0 else None))
    assert sorted(x.name for x in everything.topics) == ["t", "u"]


@pytest.mark.parametrize("version", range(9, 14))
async def test_unknown_tagged_fields_are_ignored(state: BrokerState, version: int) -> None:
    resp = await round_trip(state, version, metadata_request(version, [("u", ZERO)]),
                            extra_tag=b"\x01\x1f\x02hi")
    assert [x.name for x in resp.topics] == ["u"]


@pytest.mark.parametrize("version", [10, 11])
async def test_topic_ids_are_refused_at_v10_and_v11(state: BrokerState, version: int) -> None:
    by_id = await round_trip(state, version, metadata_request(
        version, [("t", topic_id(state, "t")), ("u", ZERO)]))
    assert [(x.name, x.error_code, x.partitions) for x in by_id.topics] == [
        ("t", ErrorCode.invalid_request, ()), ("u", ErrorCode.invalid_request, ())]
    assert by_id.topics[0].topic_id == topic_id(state, "t")
    null_name = await round_trip(state, version, metadata_request(version, [(None, ZERO)]))
    assert [(x.name, x.error_code) for x in null_name.topics] == [
        ("", ErrorCode.invalid_request)]


@pytest.mark.parametrize("version", [12, 13])
async def test_topic_ids_are_resolved_from_v12(state: BrokerState, version: int) -> None:
    resp = await round_trip(state, version, metadata_request(
        version, [(None, topic_id(state, "u")), (None, STRANGER)]))
    by_id = {x.topic_id: x for x in resp.topics}
    u, unknown = by_id[topic_id(state, "u")], by_id[STRANGER]
    assert (u.name, u.error_code, len(u.partitions)) == ("u", 0, 1)
    assert (unknown.name, unknown.error_code) == (None, ErrorCode.unknown_topic_id)
    nothing = await round_trip(state, version, metadata_request(version, [(None, ZERO)]))
    assert [x.error_code for x in nothing.topics] == [ErrorCode.invalid_request]


@pytest.mark.parametrize("version", range(8, 14))
async def test_authorized_operations(state: BrokerState, version: int) -> None:
    resp = await round_trip(state, version, metadata_request(
        version, [("t", ZERO)], topic_ops=True, cluster_ops=True))
    # No authorizer: every operation is allowed, so the bit field is not "omitted".
    assert resp.topics[0].topic_authorized_operations not in (0, AUTHORIZED_OPERATIONS_OMITTED)
    if version <= 10:
        assert resp.cluster_authorized_operations not in (0, AUTHORIZED_OPERATIONS_OMITTED)
    else:
        assert not hasattr(resp, "cluster_authorized_operations")
    plain = await round_trip(state, version, metadata_request(version, [("t", ZERO)]))
    assert plain.topics[0].topic_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED


def test_served_range() -> None:
    served = served_versions()[ApiKey.METADATA]
    assert (served.min_version, served.max_version) == (VERSIONS.start, VERSIONS.stop - 1)
