"""decode_request / encode_response (and the client-side pair) end to end."""

from __future__ import annotations

import struct

import pytest

from strata.broker.handlers import served_versions
from strata.protocol import (
    ApiKey,
    ErrorCode,
    FrameReader,
    HandlerRegistry,
    InvalidRequest,
    MessageBuildError,
    RequestHeader,
    UnsupportedVersion,
    VersionRange,
    build_request,
    build_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from strata.protocol.header import encode_request_header
from strata.protocol.messages import request_type, response_type

from .samples import plain, sample

SUPPORTED_VERSIONS = served_versions()

SERVED_PAIRS = sorted((key, v) for key, r in SUPPORTED_VERSIONS.items() for v in r.versions())
IDS = [f"{key.name}-v{version}" for key, version in SERVED_PAIRS]


@pytest.mark.parametrize(("api_key", "version"), SERVED_PAIRS, ids=IDS)
def test_request_round_trip_through_frames(api_key: ApiKey, version: int) -> None:
    header = RequestHeader(api_key, version, correlation_id=version * 1000 + 7, client_id="cli")
    body = build_request(api_key, version, sample(request_type(api_key, version)))
    data = encode_request(header, body)
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    reader = FrameReader()
    reader.feed(data[:3])
    reader.feed(data[3:])
    payload = reader.next_frame()
    assert payload is not None
    request = decode_request(payload, SUPPORTED_VERSIONS)
    assert request.header == header
    assert request.body == body
    assert plain(request.body) == sample(request_type(api_key, version))


@pytest.mark.parametrize(("api_key", "version"), SERVED_PAIRS, ids=IDS)
def test_response_round_trip(api_key: ApiKey, version: int) -> None:
    header = RequestHeader(api_key, version, correlation_id=-3, client_id=None)
    description = sample(response_type(api_key, version))
    if api_key == ApiKey.API_VERSIONS:
        description["error_code"] = 0  # an error answer is read as v0 (KIP-511)
    data = encode_response(header, build_response(api_key, version, description))
    assert struct.unpack_from(">ii", data) == (len(data) - 4, -3)
    correlation_id, body = decode_response(data[4:], api_key, version)
    assert correlation_id == -3
    assert plain(body) == description


def test_flexible_response_uses_header_v1_and_apiversions_v3_header_v0() -> None:
    flexible = response_type(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    data = encode_response(
        RequestHeader(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, 5, "c"),
        build_response(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, throttle_time_ms=0, responses=[]),
    )
    assert flexible.__flexible__
    # size, correlation id, empty TAG_BUFFER, throttle_time_ms, compact empty array, TAG_BUFFER
    assert data == struct.pack(">ii", 11, 5) + b"\x00" + b"\x00\x00\x00\x00" + b"\x01" + b"\x00"


def test_produce_request_fields_are_kios() -> None:
    records = b"\x00" * 70  # opaque here: the codec never looks inside records
    body = build_request(ApiKey.PRODUCE, 8, {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 2, "records": records}]}],
    })
    frame = encode_request(RequestHeader(0, 8, 1, "p"), body)[4:]
    request = decode_request(frame, SUPPORTED_VERSIONS)
    assert request.body.acks == -1
    assert request.body.timeout.total_seconds() == 30
    partition = request.body.topic_data[0].partition_data[0]
    assert (partition.index, bytes(partition.records)) == (2, records)


def test_decode_request_accepts_any_buffer_type() -> None:
    body = build_request(ApiKey.METADATA, 4, topics=[{"name": "t"}], allow_auto_topic_creation=True)
    frame = encode_request(RequestHeader(ApiKey.METADATA, 4, 3, "c"), body)[4:]
    for buffer in (frame, bytearray(frame), memoryview(frame)):
        request = decode_request(buffer, SUPPORTED_VERSIONS)
        assert request.header == RequestHeader(ApiKey.METADATA, 4, 3, "c")
        assert request.body == body


def test_unknown_api_key_is_unsupported() -> None:
    frame = encode_request_header(RequestHeader(4242, 0, 1, "x"), 1)
    with pytest.raises(UnsupportedVersion, match="api key 4242 is not served") as caught:
        decode_request(frame, SUPPORTED_VERSIONS)
    assert caught.value.peer_misbehaved
    assert caught.value.header.correlation_id == 1


def test_known_but_unserved_api_is_unsupported() -> None:
    frame = encode_request_header(RequestHeader(ApiKey.ALLOCATE_PRODUCER_IDS, 1, 1, "x"), 1)
    with pytest.raises(UnsupportedVersion, match="ALLOCATE_PRODUCER_IDS v1"):
        decode_request(frame, SUPPORTED_VERSIONS)


def test_served_ranges_come_from_the_caller() -> None:
    registry: HandlerRegistry[str] = HandlerRegistry()
    registry.register(ApiKey.HEARTBEAT, 0, 2, "heartbeat")
    body = build_request(ApiKey.HEARTBEAT, 3, {
        "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
    })
    frame = encode_request(RequestHeader(ApiKey.HEARTBEAT, 3, 1, "c"), body)[4:]
    assert decode_request(frame, SUPPORTED_VERSIONS).body == body  # the broker serves v3
    with pytest.raises(UnsupportedVersion, match="served versions are 0-2"):
        decode_request(frame, registry.version_ranges())


def test_a_served_range_beyond_kio_is_still_only_unsupported() -> None:
    # The registry forbids this; a hand-made mapping can still claim a version kio lacks.
    frame = encode_request_header(RequestHeader(ApiKey.HEARTBEAT, 99, 1, "c"), 1)
    with pytest.raises(UnsupportedVersion, match="no message class"):
        decode_request(frame, {ApiKey.HEARTBEAT: VersionRange(0, 99)})


def test_body_errors_carry_the_header() -> None:
    frame = encode_request_header(RequestHeader(ApiKey.METADATA, 8, 77, "c"), 1) + b"\x00"
    with pytest.raises(InvalidRequest) as caught:
        decode_request(frame, SUPPORTED_VERSIONS)
    assert caught.value.header == RequestHeader(ApiKey.METADATA, 8, 77, "c")
    assert "METADATA v8 (correlation id 77" in str(caught.value)


def test_encode_response_refuses_a_body_of_another_api_or_version() -> None:
    body = build_response(ApiKey.HEARTBEAT, 3, throttle_time_ms=0, error_code=0)
    with pytest.raises(MessageBuildError, match="api key 12 v3") as caught:
        encode_response(RequestHeader(ApiKey.HEARTBEAT, 2, 1, "c"), body)
    assert caught.value.peer_misbehaved is False
    with pytest.raises(MessageBuildError, match="not a kio message payload"):
        encode_response(RequestHeader(ApiKey.HEARTBEAT, 3, 1, "c"), {"error_code": 0})


def test_encode_request_refuses_a_mismatched_header() -> None:
    body = build_request(ApiKey.METADATA, 1, topics=None)
    with pytest.raises(MessageBuildError):
        encode_request(RequestHeader(ApiKey.METADATA, 2, 1, "c"), body)


def test_error_codes_reach_the_wire() -> None:
    body = build_response(ApiKey.HEARTBEAT, 3, throttle_time_ms=0,
                          error_code=ErrorCode.not_coordinator)
    data = encode_response(RequestHeader(ApiKey.HEARTBEAT, 3, 1, "c"), body)
    assert data[-2:] == struct.pack(">h", 16)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_api_versions_error_other_than_unsupported_version_is_read_at_the_asked_version(
    version: int,
) -> None:
    """Found by the live protocol fuzzer: a v3 request with a bad software name is
    answered INVALID_REQUEST in a v3 body (Kafka's rule), which the client side read as v0."""
    from strata.protocol.api_versions import api_versions_response

    header = RequestHeader(ApiKey.API_VERSIONS, version, 9, "c")
    body = api_versions_response(version, SUPPORTED_VERSIONS, error_code=ErrorCode.invalid_request)
    correlation_id, decoded = decode_response(encode_response(header, body)[4:],
                                              ApiKey.API_VERSIONS, version)
    assert correlation_id == 9
    assert decoded.error_code == ErrorCode.invalid_request
    assert len(decoded.api_keys) == len(SUPPORTED_VERSIONS)
