"""The ApiVersions rule (KIP-511) and the normal ApiVersions responses v0-v3."""

from __future__ import annotations

import struct

import pytest

from strata.broker.handlers import served_versions
from strata.protocol.api_keys import ApiKey
from strata.protocol.api_versions import (
    api_versions_response,
    encode_unsupported_version_response,
)
from strata.protocol.codec import decode_request, decode_response, encode_response
from strata.protocol.error_codes import ErrorCode
from strata.protocol.errors import UnsupportedVersion
from strata.protocol.framing import FrameReader
from strata.protocol.header import RequestHeader, encode_request_header
from strata.protocol.registry import HandlerRegistry

from .kafka_python import response_class

SUPPORTED_VERSIONS = served_versions()


def registry_ranges() -> dict[ApiKey, object]:
    registry: HandlerRegistry[str] = HandlerRegistry()
    for key, served in SUPPORTED_VERSIONS.items():
        registry.register(key, served.min_version, served.max_version, key.name)
    return dict(registry.version_ranges())


def read_v0_fallback(frame: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """A v0 ApiVersions response read by hand: (correlation_id, error_code, entries)."""
    size, correlation_id, error_code, count = struct.unpack_from(">iihi", frame)
    assert size == len(frame) - 4
    entries = [struct.unpack_from(">hhh", frame, 14 + 6 * i) for i in range(count)]
    assert 14 + 6 * count == len(frame)
    return correlation_id, error_code, entries


def unsupported_request(version: int, correlation_id: int = 77) -> bytes:
    # The body is irrelevant (and unknown to kio for version 999): only the header is read.
    header = RequestHeader(ApiKey.API_VERSIONS, version, correlation_id, "future-client")
    return encode_request_header(header, 2) + b"\x0bsome-client\x061.2.3\x00"


@pytest.mark.parametrize("version", [5, 6, 999, -1])
def test_unsupported_apiversions_version_is_negotiation_not_misbehaviour(version: int) -> None:
    with pytest.raises(UnsupportedVersion) as caught:
        decode_request(unsupported_request(version), SUPPORTED_VERSIONS)
    assert caught.value.peer_misbehaved is False
    assert caught.value.header.api_version == version


def test_fallback_is_a_v0_body_with_error_35_and_the_full_list() -> None:
    ranges = registry_ranges()
    with pytest.raises(UnsupportedVersion) as caught:
        decode_request(unsupported_request(5, correlation_id=1234), SUPPORTED_VERSIONS)
    frame = encode_unsupported_version_response(caught.value.header, ranges)
    correlation_id, error_code, entries = read_v0_fallback(frame)
    assert correlation_id == 1234  # response header v0: no tagged fields
    assert error_code == ErrorCode.unsupported_version == 35
    assert entries == [(k, r.min_version, r.max_version) for k, r in sorted(ranges.items())]
    assert len({key for key, _, _ in entries}) == len(entries) == len(SUPPORTED_VERSIONS)
    assert (ApiKey.API_VERSIONS, 0, 4) in entries


def test_fallback_decodes_with_kafka_python_and_with_our_client_side() -> None:
    header = RequestHeader(ApiKey.API_VERSIONS, 4, 5, "kafka-python")
    frame = encode_unsupported_version_response(header, registry_ranges())
    # kafka-python sends ApiVersions v4 first and reads an error answer as v0 (KIP-511).
    theirs = response_class(ApiKey.API_VERSIONS).decode(frame, version=4, header=True, framed=True)
    assert theirs.error_code == 35
    assert {(k.api_key, k.min_version, k.max_version) for k in theirs.api_keys} == {
        (k, r.min_version, r.max_version) for k, r in SUPPORTED_VERSIONS.items()
    }
    reader = FrameReader()
    reader.feed(frame)
    payload = reader.next_frame()
    assert payload is not None
    correlation_id, ours = decode_response(payload, ApiKey.API_VERSIONS, 3)
    assert correlation_id == 5
    assert ours.__version__ == 0
    assert ours.error_code is ErrorCode.unsupported_version


def test_fallback_only_for_apiversions() -> None:
    with pytest.raises(ValueError, match="only ApiVersions"):
        encode_unsupported_version_response(RequestHeader(3, 99, 1, None), registry_ranges())


def test_other_apis_at_unserved_versions_are_misbehaviour() -> None:
    frame = encode_request_header(RequestHeader(ApiKey.METADATA, 14, 1, "c"), 2) + b"\x00"
    with pytest.raises(UnsupportedVersion, match="served versions are 0-13") as caught:
        decode_request(frame, SUPPORTED_VERSIONS)
    assert caught.value.peer_misbehaved


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_normal_responses_v0_to_v3_decode_with_kafka_python(version: int) -> None:
    ranges = registry_ranges()
    body = api_versions_response(version, ranges, throttle_time_ms=0)
    frame = encode_response(RequestHeader(ApiKey.API_VERSIONS, version, 8, "c"), body)
    # KIP-511: the response header is v0 even for the flexible v3: correlation id, then body.
    assert struct.unpack_from(">ii", frame)[1] == 8
    assert frame[8:10] == b"\x00\x00"  # error_code NONE right after the 4-byte header
    theirs = response_class(ApiKey.API_VERSIONS).decode(
        frame, version=version, header=True, framed=True
    )
    assert theirs.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in theirs.api_keys] == [
        (k, r.min_version, r.max_version) for k, r in sorted(ranges.items())
    ]
    if version >= 1:
        assert theirs.throttle_time_ms == 0


def test_apiversions_v3_request_from_a_flexible_header_decodes() -> None:
    header = RequestHeader(ApiKey.API_VERSIONS, 3, 2, "rdkafka")
    frame = encode_request_header(header, 2) + b"\x0blibrdkafka\x062.3.0\x00"
    request = decode_request(frame, SUPPORTED_VERSIONS)
    assert request.header == header
    assert request.body.client_software_name == "librdkafka"
    assert request.body.client_software_version == "2.3.0"
