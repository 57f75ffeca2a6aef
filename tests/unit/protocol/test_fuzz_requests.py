"""Hypothesis on the request side of the codec beyond ``test_hostile_input``: framing of arbitrary
streams, the header peek, tagged-field sections, and nulls where a version allows none.

Every decoder answers bad bytes with its documented exception and nothing else:

======================  =========================================================================
``FrameReader``         frames, or ``FrameTooLarge`` / ``InvalidFrameSize`` (then it stays failed)
``peek_request_header`` a header, or ``InvalidRequest``
``decode_request``      a request, or ``InvalidRequest`` / ``UnsupportedVersion``
======================  =========================================================================

Derandomized, no example database: CI and a developer see the same examples.
"""

from __future__ import annotations

import contextlib
import dataclasses
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strata.broker.handlers import served_versions
from strata.protocol.api_keys import ApiKey
from strata.protocol.codec import decode_request
from strata.protocol.errors import (
    FrameTooLarge,
    InvalidFrameSize,
    InvalidRequest,
    InvalidResponse,
    UnsupportedVersion,
)
from strata.protocol.framing import FrameReader, frame
from strata.protocol.header import RequestHeader, encode_request_header, peek_request_header
from strata.protocol.messages import (
    build_request,
    decode_response_body,
    encode_body,
    request_type,
)
from strata.protocol.primitives import write_uvarint

from .samples import kafka_name, sample

SUPPORTED_VERSIONS = served_versions()

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
SERVED = sorted((key, v) for key, r in SUPPORTED_VERSIONS.items() for v in r.versions())
FLEXIBLE = [(k, v) for k, v in SERVED if request_type(k, v).__flexible__]


def request_frame(api_key: int, version: int, body: bytes) -> bytes:
    header = RequestHeader(api_key, version, 5, "fuzz")
    flexible = request_type(api_key, version).__flexible__
    return encode_request_header(header, 2 if flexible else 1) + body


def sample_body(api_key: int, version: int, *, top_level_tags: bool = True) -> bytes:
    """A sample request body; without ``top_level_tags`` its top-level tagged fields keep their
    defaults, so the body ends with an empty TAG_BUFFER (Fetch v12+ has some)."""
    entity_type = request_type(api_key, version)
    fields = sample(entity_type, array_length=1)
    if not top_level_tags:
        tagged = {kafka_name(f) for f in dataclasses.fields(entity_type) if "tag" in f.metadata}
        fields = {k: v for k, v in fields.items() if k not in tagged}
    return encode_body(build_request(api_key, version, fields))


# ------------------------------------------------------------------ framing
@FUZZ
@given(st.lists(st.binary(max_size=40), max_size=8), st.integers(0, 64))
def test_frame_reader_on_arbitrary_streams(chunks: list[bytes], max_frame_bytes: int) -> None:
    reader = FrameReader(max_frame_bytes)
    try:
        for chunk in chunks:
            reader.feed(chunk)
            for payload in reader.frames():
                assert len(payload) <= max_frame_bytes
    except (FrameTooLarge, InvalidFrameSize) as exc:
        with pytest.raises(type(exc)):  # a failed reader stays failed
            reader.feed(b"")


@FUZZ
@given(st.lists(st.binary(max_size=30), max_size=6), st.lists(st.integers(1, 7), min_size=1))
def test_frame_reader_returns_what_was_framed_whatever_the_reads(
    payloads: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(frame(p) for p in payloads)
    reader = FrameReader(64)
    got: list[bytes] = []
    position, step = 0, 0
    while position < len(stream):
        size = cuts[step % len(cuts)]
        reader.feed(stream[position:position + size])
        got.extend(reader.frames())
        position, step = position + size, step + 1
    assert got == payloads and reader.at_frame_boundary


# ------------------------------------------------------------------ header peek
@FUZZ
@given(st.binary(max_size=40))
def test_header_peek_on_arbitrary_bytes(raw: bytes) -> None:
    try:
        header, offset = peek_request_header(raw)
    except InvalidRequest:
        return
    assert 10 <= offset <= len(raw)
    assert struct.unpack_from(">hhi", raw) == header[:3]


# ------------------------------------------------------------------ tagged fields
@pytest.mark.parametrize(("api_key", "version"), FLEXIBLE)
def test_unknown_tagged_fields_are_skipped_as_kafka_does(api_key: ApiKey, version: int) -> None:
    """Found by the live protocol fuzzer: kio 0.6.5 raised ``KeyError('Unknown tagged field
    tag: 0')`` through ``decode_request``, which ended the connection's serve task unseen.
    Kafka's readers skip a tagged field they do not know (KIP-482); so does the codec now."""
    body = sample_body(api_key, version, top_level_tags=False)
    assert body.endswith(b"\x00")  # the top-level TAG_BUFFER, empty
    expected = decode_request(request_frame(api_key, version, body), SUPPORTED_VERSIONS).body
    unknown = body[:-1] + b"\x02" + write_uvarint(99) + b"\x01\x00" + write_uvarint(7) + b"\x00"
    decoded = decode_request(request_frame(api_key, version, unknown), SUPPORTED_VERSIONS)
    assert decoded.body == expected


def api_versions_v3_response(features: bytes) -> bytes:
    """error_code, api_keys (empty), throttle_time_ms, then a TAG_BUFFER holding
    ``supported_features`` (tag 0) with one feature whose own TAG_BUFFER is ``features``."""
    feature = b"\x02f" + struct.pack(">hh", 0, 1) + features
    tag_zero = b"\x02" + feature  # compact array of one
    return (struct.pack(">h", 0) + b"\x01" + struct.pack(">i", 0)
            + b"\x01" + b"\x00" + write_uvarint(len(tag_zero)) + tag_zero)


def test_unknown_tagged_fields_of_a_response_are_skipped_too() -> None:
    body = api_versions_v3_response(b"\x00")
    plain = decode_response_body(ApiKey.API_VERSIONS, 3, body, 0)
    extra = body[:-len(body) + 7] + b"\x02" + body[8:] + write_uvarint(42) + b"\x00"
    assert decode_response_body(ApiKey.API_VERSIONS, 3, extra, 0) == plain


def test_an_unknown_tag_inside_a_known_tagged_field_is_refused() -> None:
    """Removing it would change the known field's size: not rewritten, InvalidResponse."""
    body = api_versions_v3_response(b"\x01" + write_uvarint(99) + b"\x00")
    with pytest.raises(InvalidResponse, match="KeyError"):
        decode_response_body(ApiKey.API_VERSIONS, 3, body, 0)


@FUZZ
@given(st.sampled_from(FLEXIBLE),
       st.lists(st.tuples(st.integers(0, 300), st.binary(max_size=6)), max_size=3))
def test_arbitrary_tagged_fields_raise_only_invalid_request(
    pair: tuple[ApiKey, int], fields: list[tuple[int, bytes]]
) -> None:
    api_key, version = pair
    body = sample_body(api_key, version, top_level_tags=False)
    tags = write_uvarint(len(fields)) + b"".join(
        write_uvarint(tag) + write_uvarint(len(value)) + value for tag, value in fields)
    with contextlib.suppress(InvalidRequest):
        decode_request(request_frame(api_key, version, body[:-1] + tags), SUPPORTED_VERSIONS)


# ------------------------------------------------------------------ nulls
NON_NULLABLE_NULLS = [
    # DescribeConfigs v1 resources (once a TypeError), Produce v8 topic_data,
    # Heartbeat v3 group_id (a string), Fetch v11 topics (an array).
    (ApiKey.DESCRIBE_CONFIGS, 1, struct.pack(">ib", -1, 0), "resources"),
    (ApiKey.PRODUCE, 8, struct.pack(">hhii", -1, 1, 1000, -1), "topic_data"),
    (ApiKey.HEARTBEAT, 3, struct.pack(">h", -1), "group_id"),
    (ApiKey.FETCH, 11, struct.pack(">iiiibiii", -1, 0, 1, 1, 0, 0, -1, -1), "topics"),
    # ListGroups v4 (flexible): states_filter as a compact null array.
    (ApiKey.LIST_GROUPS, 4, b"\x00\x00", "states_filter"),
]


@pytest.mark.parametrize(("api_key", "version", "body", "field"), NON_NULLABLE_NULLS)
def test_null_where_the_version_allows_none_is_an_invalid_request(
    api_key: ApiKey, version: int, body: bytes, field: str
) -> None:
    with pytest.raises(InvalidRequest, match=f"non-nullable field .*{field}"):
        decode_request(request_frame(api_key, version, body), SUPPORTED_VERSIONS)


def test_null_where_the_version_allows_it_still_decodes() -> None:
    # Metadata v8 topics null = every topic; Produce v8 transactional_id null.
    metadata = decode_request(
        request_frame(ApiKey.METADATA, 8, b"\xff\xff\xff\xff\x00\x00\x00"), SUPPORTED_VERSIONS)
    assert metadata.body.topics is None


@FUZZ
@given(st.sampled_from(SERVED), st.data())
def test_any_int32_or_int16_written_as_null_raises_only_our_errors(
    pair: tuple[ApiKey, int], data: st.DataObject
) -> None:
    api_key, version = pair
    raw = bytearray(request_frame(api_key, version, sample_body(api_key, version)))
    width = data.draw(st.sampled_from([2, 4]))
    if len(raw) < 10 + width:
        return
    position = data.draw(st.integers(10, len(raw) - width))
    raw[position:position + width] = b"\xff" * width
    with contextlib.suppress(InvalidRequest, UnsupportedVersion):
        decode_request(bytes(raw), SUPPORTED_VERSIONS)
