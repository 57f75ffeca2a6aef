"""Requests that parse but carry values no client sends: a Kafka error, never a traceback.

Each case is a regression example the protocol fuzzers (``tests/unit/protocol/test_fuzz_*``,
``tests/integration/broker/test_protocol_fuzz.py``) found. A request whose bytes break
the grammar (a non-nullable array sent as null) is ``InvalidRequest`` in the codec and closes
the connection, as Kafka's generated readers do; a request that parses but names an impossible
value is answered with the error code of the field that holds it.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from strata.broker.handlers import build_registry
from strata.protocol.api_keys import ApiKey
from strata.protocol.codec import decode_request
from strata.protocol.error_codes import ErrorCode
from strata.protocol.errors import InvalidRequest
from strata.protocol.header import RequestHeader, encode_request_header

from .helpers import broker_state
from .test_connection import Client, serve
from .test_fetch import fetch, produce

DESCRIBE_CONFIGS_V1_NULL_RESOURCES = (
    encode_request_header(RequestHeader(ApiKey.DESCRIBE_CONFIGS, 1, 7, "fuzz"), 1)
    + struct.pack(">i", -1)  # resources: null (the field is not nullable in any version)
    + b"\x00"  # include_synonyms
)


def test_describe_configs_with_null_resources_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequest, match=r"non-nullable field .*resources") as caught:
        decode_request(DESCRIBE_CONFIGS_V1_NULL_RESOURCES, build_registry().version_ranges())
    assert caught.value.header is not None
    assert caught.value.header.api_key == ApiKey.DESCRIBE_CONFIGS


async def test_describe_configs_with_null_resources_closes_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = broker_state(tmp_path, ("t", 1))
    state.registry = build_registry()
    server, port = await serve(state)
    try:
        client = await Client.connect(port)
        frame = DESCRIBE_CONFIGS_V1_NULL_RESOURCES
        client.writer.write(struct.pack(">i", len(frame)) + frame)
        assert await client.closed_by_peer()
    finally:
        server.close()
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert any("non-nullable field" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("version", [4, 11])
async def test_fetch_with_negative_partition_max_bytes_is_invalid_request(
    tmp_path: Path, version: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    state = broker_state(tmp_path, ("t", 2))
    await produce(state, "t", 0, b"a")
    body = await fetch(state, version, [("t", 0, 0)], partition_max_bytes=-1)
    (topic,) = body.responses
    (partition,) = topic.partitions
    assert partition.error_code == ErrorCode.invalid_request
    assert not partition.records
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


async def test_fetch_negative_partition_max_bytes_spares_the_other_partitions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = broker_state(tmp_path, ("t", 2))
    await produce(state, "t", 1, b"b")
    good = await fetch(state, 11, [("t", 1, 0)])
    assert good.responses[0].partitions[0].records
    mixed = await fetch(state, 11, [("t", 0, 0), ("t", 1, 0)], partition_max_bytes=-5)
    assert [p.error_code for p in mixed.responses[0].partitions] == [
        ErrorCode.invalid_request, ErrorCode.invalid_request]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


async def test_fetch_with_negative_request_max_bytes_is_invalid_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = broker_state(tmp_path, ("t", 2))
    await produce(state, "t", 0, b"a")
    body = await fetch(state, 11, [("t", 0, 0), ("t", 1, 0)], max_bytes=-2147483648)
    assert [p.error_code for p in body.responses[0].partitions] == [
        ErrorCode.invalid_request, ErrorCode.invalid_request]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


async def test_an_unexpected_codec_error_closes_the_connection_it_came_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The live fuzzer's kio ``KeyError`` escaped ``decode_request`` and ended the serve task
    unseen, leaving the socket open and unread. Any such Strata bug now logs and closes."""
    from strata.broker.network import connection

    def broken(frame: bytes, ranges: object) -> None:
        raise KeyError("Unknown tagged field tag: 0")

    state = broker_state(tmp_path)
    state.registry = build_registry()
    monkeypatch.setattr(connection, "decode_request", broken)
    server, port = await serve(state)
    try:
        client = await Client.connect(port)
        client.send(ApiKey.METADATA, 8, 1, topics=None, allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False)
        assert await client.closed_by_peer()
    finally:
        server.close()
    assert any("serving" in r.getMessage() and r.exc_info for r in caplog.records)
