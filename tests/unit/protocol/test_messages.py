"""The kio adapter: version-neutral builders across every served version, encode and decode."""

from __future__ import annotations

import datetime

import pytest

from strata.broker.handlers import served_versions
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.errors import InvalidRequest, InvalidResponse, MessageBuildError
from strata.protocol.messages import (
    UnknownMessageVersion,
    build_entity,
    build_request,
    build_response,
    decode_request_body,
    decode_response_body,
    encode_body,
    is_flexible,
    request_type,
    response_type,
)
from strata.protocol.prescan import scan
from strata.protocol.registry import VersionRange

from .samples import merge, plain, sample

SUPPORTED_VERSIONS = served_versions()

SERVED = sorted(SUPPORTED_VERSIONS.items())


@pytest.mark.parametrize(("api_key", "served"), SERVED, ids=[k.name for k, _ in SERVED])
def test_one_union_description_builds_every_served_response_version(
    api_key: ApiKey, served: VersionRange
) -> None:
    union: dict = {}
    for version in served.versions():
        union = merge(union, sample(response_type(api_key, version)))
    for version in served.versions():
        body = build_response(api_key, version, union)
        assert type(body) is response_type(api_key, version)
        raw = encode_body(body)
        assert scan(type(body), raw, 0, len(raw)) == len(raw)
        decoded = decode_response_body(api_key, version, raw, 0)
        assert decoded == body
        assert plain(decoded) == sample(response_type(api_key, version))


@pytest.mark.parametrize(("api_key", "served"), SERVED, ids=[k.name for k, _ in SERVED])
def test_one_union_description_builds_every_served_request_version(
    api_key: ApiKey, served: VersionRange
) -> None:
    union: dict = {}
    for version in served.versions():
        union = merge(union, sample(request_type(api_key, version)))
    for version in served.versions():
        body = build_request(api_key, version, union)
        raw = encode_body(body)
        decoded = decode_request_body(api_key, version, raw, 0)
        assert decoded == body
        assert plain(decoded) == sample(request_type(api_key, version))


def test_empty_arrays_and_nulls_round_trip() -> None:
    body = build_request(ApiKey.METADATA, 8, {
        "topics": None,
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    })
    raw = encode_body(body)
    assert raw == b"\xff\xff\xff\xff\x01\x00\x00"
    assert decode_request_body(ApiKey.METADATA, 8, raw, 0).topics is None


METADATA_V8 = {
    "throttle_time_ms": 5,
    "brokers": [{"node_id": 1, "host": "h1", "port": 9092, "rack": None}],
    "cluster_id": "c1",
    "controller_id": 1,
    "topics": [
        {
            "error_code": 0,
            "name": "t",
            "is_internal": False,
            "partitions": [
                {
                    "error_code": ErrorCode.leader_not_available,
                    "partition_index": 0,
                    "leader_id": 1,
                    "leader_epoch": 3,
                    "replica_nodes": [1],
                    "isr_nodes": [1],
                    "offline_replicas": [],
                }
            ],
            "topic_authorized_operations": -2147483648,
        }
    ],
    "cluster_authorized_operations": -2147483648,
}


def test_fields_the_version_lacks_are_dropped() -> None:
    v0 = build_response(ApiKey.METADATA, 0, METADATA_V8)
    assert not hasattr(v0, "throttle_time")
    assert not hasattr(v0, "cluster_id")
    assert v0.brokers[0].host == "h1"
    assert not hasattr(v0.brokers[0], "rack")
    assert v0.topics[0].partitions[0].error_code is ErrorCode.leader_not_available


def test_kafka_and_kio_spellings_of_time_fields_and_their_types() -> None:
    as_kafka = build_response(ApiKey.METADATA, 8, METADATA_V8)
    as_kio = build_response(ApiKey.METADATA, 8, {**METADATA_V8, "throttle_time": 5})
    as_timedelta = build_response(
        ApiKey.METADATA, 8, {**METADATA_V8, "throttle_time_ms": datetime.timedelta(milliseconds=5)}
    )
    assert as_kafka == as_kio == as_timedelta
    assert as_kafka.throttle_time == datetime.timedelta(milliseconds=5)


def test_datetime_fields_take_epoch_milliseconds() -> None:
    response = build_response(ApiKey.PRODUCE, 8, {
        "throttle_time_ms": 0,
        "responses": [{"name": "t", "partition_responses": [{
            "index": 0, "error_code": 0, "base_offset": 10, "log_append_time_ms": -1,
            "log_start_offset": 0, "record_errors": [], "error_message": None,
        }]}],
    })
    partition = response.responses[0].partition_responses[0]
    assert partition.log_append_time is None  # -1, "CreateTime topic", is kio's None
    raw = encode_body(response)
    assert b"\xff" * 8 in raw
    assert decode_response_body(ApiKey.PRODUCE, 8, raw, 0) == response
    stamped_partition = {**plain(partition), "log_append_time_ms": 1_700_000_000_123}
    stamped = build_response(ApiKey.PRODUCE, 8, throttle_time_ms=0, responses=[
        {"name": "t", "partition_responses": [stamped_partition]},
    ])
    assert plain(stamped.responses[0].partition_responses[0]) == stamped_partition


def test_keyword_fields_override_the_mapping() -> None:
    body = build_response(ApiKey.HEARTBEAT, 3, {"throttle_time_ms": 1, "error_code": 0},
                          error_code=27)
    assert body.error_code is ErrorCode.rebalance_in_progress


def test_a_kio_object_of_another_version_converts() -> None:
    v8 = build_response(ApiKey.METADATA, 8, METADATA_V8)
    v1 = build_response(ApiKey.METADATA, 1, v8)
    assert type(v1) is response_type(ApiKey.METADATA, 1)
    assert v1.controller_id == 1
    assert build_entity(type(v8), v8) is v8


def test_missing_field_names_its_path() -> None:
    broken = {**METADATA_V8, "topics": [{**METADATA_V8["topics"][0]}]}
    del broken["topics"][0]["partitions"][0]
    broken["topics"][0]["partitions"] = [{"error_code": 0}]
    with pytest.raises(MessageBuildError) as caught:
        build_response(ApiKey.METADATA, 8, broken)
    message = str(caught.value)
    assert "MetadataResponse v8.topics" in message
    assert "[0]" in message
    assert "missing field 'partition_index'" in message
    assert caught.value.peer_misbehaved is False


def test_missing_time_field_mentions_both_spellings() -> None:
    with pytest.raises(MessageBuildError, match="'throttle_time_ms' \\(or 'throttle_time'\\)"):
        build_response(ApiKey.HEARTBEAT, 3, {"error_code": 0})


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"throttle_time_ms": 0, "error_code": 4242}, "unknown error code 4242"),
        ({"throttle_time_ms": 0, "error_code": "NONE"}, "expected an error code"),
        ({"throttle_time_ms": "0", "error_code": 0}, "expected milliseconds"),
    ],
)
def test_bad_values_are_our_bug(fields: dict, match: str) -> None:
    with pytest.raises(MessageBuildError, match=match):
        build_response(ApiKey.HEARTBEAT, 3, fields)


def test_bad_shapes_are_our_bug() -> None:
    with pytest.raises(MessageBuildError, match="expected a mapping"):
        build_response(ApiKey.METADATA, 8, {**METADATA_V8, "brokers": [42]})
    with pytest.raises(MessageBuildError, match="expected a sequence"):
        build_response(ApiKey.METADATA, 8, {**METADATA_V8, "brokers": {"node_id": 1}})


def test_wrong_primitive_type_fails_at_encode_with_context() -> None:
    body = build_response(ApiKey.METADATA, 8, {**METADATA_V8, "controller_id": "one"})
    with pytest.raises(MessageBuildError, match="cannot encode MetadataResponse v8"):
        encode_body(body)


def test_unknown_versions_are_lookup_errors() -> None:
    with pytest.raises(UnknownMessageVersion):
        request_type(ApiKey.METADATA, 999)
    with pytest.raises(UnknownMessageVersion):
        response_type(1000, 0)
    with pytest.raises(LookupError):
        build_response(ApiKey.FETCH, 999, {})
    assert is_flexible(ApiKey.FETCH, 12) and not is_flexible(ApiKey.FETCH, 11)


def test_decode_requires_the_body_to_fill_the_frame() -> None:
    raw = encode_body(build_response(ApiKey.HEARTBEAT, 3, throttle_time_ms=0, error_code=0))
    assert decode_response_body(ApiKey.HEARTBEAT, 3, raw, 0).error_code is ErrorCode.none
    with pytest.raises(InvalidResponse, match="2 unexpected bytes after the body"):
        decode_response_body(ApiKey.HEARTBEAT, 3, raw + b"!!", 0)
    with pytest.raises(InvalidResponse, match="truncated"):
        decode_response_body(ApiKey.HEARTBEAT, 3, raw[:-1], 0)


# librdkafka 2.16's AlterUserScramCredentials v0 body (captured from confluent-kafka's
# alter_user_scram_credentials: delete dave SCRAM-SHA-512, upsert carol SCRAM-SHA-256 4096):
# the top-level empty tag buffer comes twice, the second one past the body.
LIBRDKAFKA_ALTER_USER_SCRAM_CREDENTIALS_V0 = bytes.fromhex(
    "020564617665020002066361726f6c01000010000d73616c7473616c7473616c7421efc30f1314756e"
    "68c762c1871db8c80ebeb118eaae29e80f78aa916d8f90a23e000000")


def test_flexible_bodies_may_be_followed_by_tagged_field_sections() -> None:
    body = decode_request_body(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
                               LIBRDKAFKA_ALTER_USER_SCRAM_CREDENTIALS_V0, 0)
    assert [(d.name, d.mechanism) for d in body.deletions] == [("dave", 2)]
    assert [(u.name, u.mechanism, u.iterations, u.salt) for u in body.upsertions] == [
        ("carol", 1, 4096, b"saltsaltsalt")]
    exact = LIBRDKAFKA_ALTER_USER_SCRAM_CREDENTIALS_V0[:-1]
    assert decode_request_body(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, exact, 0) == body
    # A non-empty section (one field: tag 7, 2 bytes) and several sections are skipped too.
    for tail in (b"\x01\x07\x02hi", b"\x00\x00\x01\x07\x00"):
        assert decode_request_body(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
                                   exact + tail, 0) == body
    # Anything that is not whole tag sections is still refused: a truncated field, garbage.
    for tail, size in ((b"\x01\x07\x05hi", 5), (b"\x01", 1)):
        with pytest.raises(InvalidRequest, match=f"{size} unexpected bytes after the body"):
            decode_request_body(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, exact + tail, 0)


def test_decode_accepts_bytearray_and_memoryview_at_an_offset() -> None:
    raw = encode_body(build_request(ApiKey.HEARTBEAT, 3, {
        "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
    }))
    for buffer in (b"xx" + raw, bytearray(b"xx" + raw), memoryview(b"xx" + raw)):
        assert decode_request_body(ApiKey.HEARTBEAT, 3, buffer, 2).group_id == "g"


def test_kio_decode_errors_become_invalid_request() -> None:
    # A well-framed string that is not UTF-8: the pre-scan accepts it, kio rejects it.
    raw = b"\x00\x02\xff\xfe" + b"\x00\x00\x00\x01" + b"\x00\x01m" + b"\xff\xff"
    with pytest.raises(InvalidRequest) as caught:
        decode_request_body(ApiKey.HEARTBEAT, 3, raw, 0)
    assert "HeartbeatRequest v3" in str(caught.value)
    assert caught.value.peer_misbehaved
