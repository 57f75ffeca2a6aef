"""Produce v0-v2 (KIP-896): listed in ApiVersions from v0 like Kafka 4 (KAFKA-18659), refused on
the wire with UNSUPPORTED_VERSION in a response the client can read, the connection kept open.
Requests and responses are encoded and decoded by kafka-python's own protocol classes."""

from __future__ import annotations

import struct
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers import build_registry, served_versions
from strata.broker.handlers.produce import refuse_removed_version
from strata.protocol.api_keys import ApiKey
from strata.protocol.api_versions import api_versions_response
from strata.protocol.error_codes import ErrorCode

from .helpers import batch, broker_state
from .test_connection import Client, api_versions, serve

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.producer import ProduceRequest, ProduceResponse


def test_api_versions_lists_produce_from_v0_and_serves_from_v3() -> None:
    registry = build_registry()
    assert (registry.version_ranges()[ApiKey.PRODUCE].min_version,
            registry.version_ranges()[ApiKey.PRODUCE].max_version) == (0, 13)
    assert (served_versions()[ApiKey.PRODUCE].min_version,
            served_versions()[ApiKey.PRODUCE].max_version) == (3, 13)
    listed = {e.api_key: (e.min_version, e.max_version)
              for e in api_versions_response(3, registry.version_ranges()).api_keys}
    assert listed[ApiKey.PRODUCE] == (0, 13)
    for key, served in served_versions().items():  # no other API lists a removed version
        if key != ApiKey.PRODUCE:
            assert listed[key] == (served.min_version, served.max_version)
    assert registry.lookup(ApiKey.PRODUCE, 2) is None
    assert registry.lookup(ApiKey.PRODUCE, 3) is not None


def kafka_python_request(version: int, acks: int, correlation_id: int) -> bytes:
    """A framed ProduceRequest ``version`` written by kafka-python."""
    topic = ProduceRequest.TopicProduceData
    part = topic.PartitionProduceData
    request = ProduceRequest(
        acks=acks, timeout_ms=1000, topic_data=[
            topic(name="t", partition_data=[part(index=0, records=batch(b"a")),
                                            part(index=1, records=None)]),
            topic(name="ünï", partition_data=[part(index=4, records=b"")])])
    request.API_VERSION = version  # the header carries it
    request.with_header(correlation_id=correlation_id, client_id="old-librdkafka")
    frame: bytes = request.encode(version=version, header=True, framed=True)
    return frame


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerState, int]]:
    state = broker_state(tmp_path, ("t", 2))
    state.registry = build_registry()
    server, port = await serve(state)
    yield state, port
    server.close()


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_removed_versions_get_unsupported_version_and_the_connection_stays(
        broker: tuple[BrokerState, int], version: int) -> None:
    state, port = broker
    client = await Client.connect(port)
    client.writer.write(kafka_python_request(version, acks=1, correlation_id=31))
    frame = await client.frame()
    response: Any = ProduceResponse.decode(struct.pack(">i", len(frame)) + frame,
                                           version=version, header=True, framed=True)
    assert struct.unpack_from(">i", frame)[0] == 31
    answers = [(t.name, p.index, p.error_code, p.base_offset)
               for t in response.responses for p in t.partition_responses]
    assert answers == [("t", 0, 35, -1), ("t", 1, 35, -1), ("ünï", 4, 35, -1)]
    assert state.replica_manager.get_partition("t", 0).log_end_offset == 0  # type: ignore[union-attr]
    # acks=0: no response, nothing appended, and the connection still serves.
    client.writer.write(kafka_python_request(version, acks=0, correlation_id=32))
    api_versions(client, 3, 33)
    correlation_id, body = await client.response(ApiKey.API_VERSIONS, 3)
    assert correlation_id == 33 and body.error_code == ErrorCode.none
    assert state.replica_manager.get_partition("t", 0).log_end_offset == 0  # type: ignore[union-attr]
    client.close()


async def test_a_truncated_removed_version_closes_only_that_connection(
        broker: tuple[BrokerState, int]) -> None:
    _, port = broker
    client = await Client.connect(port)
    frame = kafka_python_request(1, acks=1, correlation_id=5)[4:-7]
    client.writer.write(struct.pack(">i", len(frame)) + frame)
    assert await client.closed_by_peer()
    other = await Client.connect(port)
    api_versions(other, 0, 1)
    assert (await other.response(ApiKey.API_VERSIONS, 0))[0] == 1
    other.close()


def test_refusal_rejects_bad_counts() -> None:
    body = struct.pack(">hii", 1, 1000, 2_000_000_000)
    with pytest.raises(ValueError):
        refuse_removed_version(0, body)
    assert refuse_removed_version(1, struct.pack(">hii", 1, 1000, 0)) == b"\x00" * 8
