"""Hostile and random bytes: only our protocol errors come out, and the process survives.

kio 0.6.5 aborts the whole process when a body announces a huge array (its Rust reader
allocates the count before reading); ``strata.protocol.prescan`` must catch every such body first.
"""

from __future__ import annotations

import contextlib
import struct
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strata.protocol.api_keys import ApiKey
from strata.protocol.codec import decode_request, decode_response, encode_request
from strata.protocol.errors import InvalidRequest, InvalidResponse, UnsupportedVersion
from strata.protocol.header import RequestHeader, encode_request_header
from strata.protocol.messages import build_request, decode_response_body, request_type
from strata.protocol.prescan import scan
from strata.protocol.versions import SUPPORTED_VERSIONS

from .samples import sample

SERVED_PAIRS = sorted((key, v) for key, r in SUPPORTED_VERSIONS.items() for v in r.versions())


def request_frame(api_key: int, version: int, body: bytes) -> bytes:
    header = RequestHeader(api_key, version, 1, "hostile")
    flexible = request_type(api_key, version).__flexible__
    return encode_request_header(header, 2 if flexible else 1) + body


def test_kio_alone_still_aborts_on_a_huge_array_count() -> None:
    """Why the pre-scan exists. If this starts passing cleanly, kio fixed it upstream."""
    script = textwrap.dedent(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from kio.serial import entity_reader
        from kio.schema.metadata.v8 import MetadataRequest
        entity_reader(MetadataRequest)(b"\\x7f\\xff\\xff\\xff\\x01\\x00\\x00", 0)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode != 0
    assert "memory allocation" in result.stderr


@pytest.mark.parametrize(
    ("api_key", "version", "body", "match"),
    [
        # Metadata v8 topics: int32 count 2**31-1 over 3 bytes.
        (ApiKey.METADATA, 8, b"\x7f\xff\xff\xff\x01\x00\x00", "collection of size 2147483647"),
        # DescribeGroups v0 groups: an array of strings.
        (ApiKey.DESCRIBE_GROUPS, 0, b"\x10\x00\x00\x00", "collection of size 268435456"),
        # IncrementalAlterConfigs v1 (flexible): compact array count 2**32 - 2.
        (ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, b"\xff\xff\xff\xff\x0f", "collection of size"),
        # A string running past the end, a negative length, a truncated fixed field.
        (ApiKey.HEARTBEAT, 3, b"\x7f\xff", "truncated|runs past"),
        (ApiKey.HEARTBEAT, 3, b"\xff\xfe\x00\x00", "negative length -2"),
        (ApiKey.HEARTBEAT, 3, b"\x00\x01g\x00\x00", "truncated"),
        # Produce v8 records: int32 length of 1 GB with nothing behind it.
        (
            ApiKey.PRODUCE,
            8,
            b"\xff\xff" + b"\xff\xff" + b"\x00\x00\x00\x10" + b"\x00\x00\x00\x01"
            + b"\x00\x01t" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + b"\x40\x00\x00\x00",
            "length 1073741824",
        ),
        # ApiVersions v3 (flexible): compact strings, then 2**31 tagged fields announced.
        (ApiKey.API_VERSIONS, 3, b"\x02a\x02b\xff\xff\xff\xff\x07", "tagged fields announced"),
        # An unsigned varint longer than 5 bytes.
        (ApiKey.API_VERSIONS, 3, b"\xff\xff\xff\xff\xff\xff", "longer than 5 bytes"),
        # Trailing garbage after a complete body.
        (ApiKey.API_VERSIONS, 0, b"??", "2 unexpected bytes after the body"),
    ],
)
def test_malformed_bodies_are_invalid_requests(
    api_key: ApiKey, version: int, body: bytes, match: str
) -> None:
    with pytest.raises(InvalidRequest, match=match) as caught:
        decode_request(request_frame(api_key, version, body))
    assert caught.value.header is not None
    assert caught.value.header.api_key == api_key
    assert caught.value.peer_misbehaved


def test_huge_array_in_a_response_is_an_invalid_response() -> None:
    # Metadata v8 response: throttle_time_ms, then brokers with count 2**31-1.
    body = b"\x00\x00\x00\x00" + b"\x7f\xff\xff\xff"
    with pytest.raises(InvalidResponse, match="collection of size"):
        decode_response_body(ApiKey.METADATA, 8, body, 0)


def test_tagged_fields_are_scanned_inside_their_declared_size() -> None:
    # ApiVersions v3 response has tagged fields (supported_features is tag 0, an array).
    # A known tag whose content claims 2**31 entries inside a 5-byte field is rejected.
    from strata.protocol.messages import response_type

    cls = response_type(ApiKey.API_VERSIONS, 3)
    body = b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x01" + b"\x00\x05\xff\xff\xff\xff\x07"
    with pytest.raises(ValueError, match="collection of size"):
        scan(cls, body, 0, len(body))


def test_nullable_structs_are_scanned() -> None:
    # No served API has one yet (KIP-893); ConsumerGroupHeartbeat v0 responses do.
    from strata.protocol.messages import build_response, encode_body, response_type

    cls = response_type(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0)
    for assignment in (sample(cls)["assignment"], None):
        description = {**sample(cls), "assignment": assignment}
        body = build_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, description)
        raw = encode_body(body)
        assert scan(cls, raw, 0, len(raw)) == len(raw)
        assert decode_response_body(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, raw, 0) == body


@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_protocol_errors(frame: bytes) -> None:
    with contextlib.suppress(InvalidRequest, UnsupportedVersion):
        decode_request(frame)


@settings(max_examples=600, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(pair=st.sampled_from(SERVED_PAIRS), body=st.binary(max_size=120))
def test_served_header_with_arbitrary_body_raises_only_invalid_request(
    pair: tuple[ApiKey, int], body: bytes
) -> None:
    api_key, version = pair
    try:
        decode_request(request_frame(api_key, version, body))
    except InvalidRequest as exc:
        assert exc.header is not None


@settings(max_examples=600, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    pair=st.sampled_from(SERVED_PAIRS),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 10_000),
)
def test_corrupted_valid_requests_raise_only_our_errors(
    pair: tuple[ApiKey, int], edits: list[tuple[int, int]], cut: int
) -> None:
    api_key, version = pair
    body = build_request(api_key, version, sample(request_type(api_key, version), array_length=1))
    frame = bytearray(encode_request(RequestHeader(api_key, version, 9, "c"), body)[4:])
    for position, value in edits:
        frame[position % len(frame)] = value
    frame = frame[: len(frame) - cut % 8]
    with contextlib.suppress(InvalidRequest, UnsupportedVersion):
        decode_request(bytes(frame))


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(pair=st.sampled_from(SERVED_PAIRS), frame=st.binary(max_size=120))
def test_arbitrary_response_bytes_raise_only_invalid_response(
    pair: tuple[ApiKey, int], frame: bytes
) -> None:
    api_key, version = pair
    with contextlib.suppress(InvalidResponse):
        decode_response(frame, api_key, version)


def test_request_header_constant_used_by_the_hostile_frames() -> None:
    frame = request_frame(ApiKey.METADATA, 8, b"")
    assert struct.unpack_from(">hhi", frame) == (3, 8, 1)
