"""Request header peek (v1 and v2), header version rules, header encoders."""

from __future__ import annotations

import struct

import pytest

from strata.protocol.api_keys import ApiKey
from strata.protocol.errors import InvalidRequest, InvalidResponse
from strata.protocol.header import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    peek_request_header,
    read_response_header,
    request_header_version,
    response_header_version,
    skip_request_header_tags,
)
from strata.protocol.messages import UnknownMessageVersion


def v1_header(api_key: int, version: int, correlation_id: int, client_id: bytes | None) -> bytes:
    fixed = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        return fixed + struct.pack(">h", -1)
    return fixed + struct.pack(">h", len(client_id)) + client_id


def test_peek_v1_header() -> None:
    frame = v1_header(3, 8, 1234, b"rdkafka") + b"BODY"
    header, offset = peek_request_header(frame)
    assert header == RequestHeader(
        api_key=3, api_version=8, correlation_id=1234, client_id="rdkafka"
    )
    assert frame[offset:] == b"BODY"
    assert skip_request_header_tags(frame, header, offset, header_version=1) == offset


def test_peek_v2_header_then_skip_its_tagged_fields() -> None:
    # ApiVersions v3: header v2 = v1 fields + TAG_BUFFER (here one unknown tag 7 of 3 bytes).
    tags = b"\x01" + b"\x07" + b"\x03" + b"xyz"
    frame = v1_header(18, 3, -5, b"client") + tags + b"BODY"
    header, offset = peek_request_header(frame)
    assert header == RequestHeader(18, 3, -5, "client")
    body_offset = skip_request_header_tags(frame, header, offset, header_version=2)
    assert frame[body_offset:] == b"BODY"


def test_peek_null_and_unicode_client_id() -> None:
    header, _ = peek_request_header(v1_header(0, 8, 1, None))
    assert header.client_id is None
    header, _ = peek_request_header(v1_header(0, 8, 1, "prodücer".encode()))
    assert header.client_id == "prodücer"


def test_peek_reads_versions_kio_does_not_know() -> None:
    header, _ = peek_request_header(v1_header(18, 999, 7, b"future"))
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 999, 7)


@pytest.mark.parametrize("length", [0, 3, 7])
def test_short_frame_is_an_invalid_request_without_header(length: int) -> None:
    with pytest.raises(InvalidRequest, match="too short") as caught:
        peek_request_header(v1_header(3, 1, 1, b"x")[:length])
    assert caught.value.header is None
    assert caught.value.peer_misbehaved


def test_truncated_client_id_keeps_the_fixed_fields() -> None:
    frame = v1_header(3, 1, 42, b"abcdef")[:-2]
    with pytest.raises(InvalidRequest, match="client_id") as caught:
        peek_request_header(frame)
    assert caught.value.header == RequestHeader(3, 1, 42, None)


def test_bad_client_id_lengths_and_encoding() -> None:
    with pytest.raises(InvalidRequest, match="negative string length"):
        peek_request_header(struct.pack(">hhih", 3, 1, 1, -2))
    with pytest.raises(InvalidRequest, match="is truncated"):
        peek_request_header(struct.pack(">hhih", 3, 1, 1, 5) + b"abc")


def test_invalid_utf8_client_id_is_replaced_like_kafka_does() -> None:
    header, offset = peek_request_header(struct.pack(">hhih", 3, 1, 1, 3) + b"a\xffb")
    assert header.client_id == "a\ufffdb"
    assert offset == 13


def test_peek_accepts_bytearray_and_memoryview() -> None:
    frame = v1_header(3, 8, 1, b"cid")
    for buffer in (bytearray(frame), memoryview(frame)):
        assert peek_request_header(buffer) == (RequestHeader(3, 8, 1, "cid"), len(frame))


def test_truncated_header_tagged_fields() -> None:
    frame = v1_header(18, 3, 1, b"c") + b"\x01\x07\x05ab"
    header, offset = peek_request_header(frame)
    with pytest.raises(InvalidRequest, match="tagged") as caught:
        skip_request_header_tags(frame, header, offset, header_version=2)
    assert caught.value.header == header


@pytest.mark.parametrize(
    ("api_key", "version", "expected"),
    [
        (ApiKey.METADATA, 8, 1),
        (ApiKey.METADATA, 9, 2),
        (ApiKey.PRODUCE, 8, 1),
        (ApiKey.PRODUCE, 9, 2),
        (ApiKey.FETCH, 11, 1),
        (ApiKey.FETCH, 12, 2),
        (ApiKey.API_VERSIONS, 2, 1),
        (ApiKey.API_VERSIONS, 3, 2),
    ],
)
def test_request_header_version_follows_flexibility(
    api_key: ApiKey, version: int, expected: int
) -> None:
    assert request_header_version(api_key, version) == expected


@pytest.mark.parametrize(
    ("api_key", "version", "expected"),
    [
        (ApiKey.METADATA, 8, 0),
        (ApiKey.METADATA, 9, 1),
        (ApiKey.FETCH, 12, 1),
        (ApiKey.API_VERSIONS, 0, 0),
        (ApiKey.API_VERSIONS, 3, 0),  # KIP-511: flexible body, header v0
        (ApiKey.API_VERSIONS, 4, 0),
        (ApiKey.API_VERSIONS, 999, 0),  # even for versions nobody knows
    ],
)
def test_response_header_version(api_key: ApiKey, version: int, expected: int) -> None:
    assert response_header_version(api_key, version) == expected


def test_header_version_of_unknown_version_is_a_lookup_error() -> None:
    with pytest.raises(UnknownMessageVersion):
        request_header_version(ApiKey.METADATA, 999)
    with pytest.raises(LookupError):
        response_header_version(1000, 0)


def test_request_header_encoding_round_trips_through_the_peek() -> None:
    header = RequestHeader(1, 11, 99, "consumer-1")
    for version in (1, 2):
        frame = encode_request_header(header, version) + b"B"
        peeked, offset = peek_request_header(frame)
        assert peeked == header
        assert frame[skip_request_header_tags(frame, peeked, offset, version) :] == b"B"


def test_response_headers() -> None:
    assert encode_response_header(7, 0) == b"\x00\x00\x00\x07"
    assert encode_response_header(7, 1) == b"\x00\x00\x00\x07\x00"
    assert read_response_header(b"\x00\x00\x00\x07BODY", 0) == (7, 4)
    assert read_response_header(b"\x00\x00\x00\x07\x00BODY", 1) == (7, 5)
    with pytest.raises(InvalidResponse):
        read_response_header(b"\x00\x00", 0)
    with pytest.raises(InvalidResponse):
        read_response_header(b"\x00\x00\x00\x07", 1)


def test_describe_names_the_api() -> None:
    assert RequestHeader(0, 8, 3, "c").describe() == "PRODUCE v8 (correlation id 3, client 'c')"
    assert "api key 999" in RequestHeader(999, 0, 3, None).describe()
