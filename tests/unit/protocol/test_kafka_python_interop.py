"""Cross-checks with kafka-python, an encoder and decoder we did not write.

Requests built with kafka-python's protocol classes are decoded by our codec; responses encoded
by our codec are decoded by kafka-python's response classes. Every served (api key, version)
goes both ways with synthesised samples; the APIs clients use first also get hand-written,
realistic messages.
"""

from __future__ import annotations

from typing import Any

import pytest

from strata.broker.handlers import served_versions
from strata.protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    build_response,
    decode_request,
    encode_response,
)
from strata.protocol.messages import request_type, response_type

from .kafka_python import (
    CLASSES,
    kafka_python_plain,
    request_class,
    response_class,
    to_kafka_python,
)
from .samples import plain, sample

SUPPORTED_VERSIONS = served_versions()

NOT_IN_KAFKA_PYTHON = frozenset({ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY,
                                 ApiKey.CONSUMER_GROUP_HEARTBEAT,
                                 ApiKey.CONSUMER_GROUP_DESCRIBE})
"""Served APIs kafka-python 3.0 has no message classes for (KIP-714's and KIP-848's)."""

SERVED_PAIRS = sorted((key, v) for key, r in SUPPORTED_VERSIONS.items() for v in r.versions()
                      if key not in NOT_IN_KAFKA_PYTHON)
IDS = [f"{key.name}-v{version}" for key, version in SERVED_PAIRS]


def kafka_python_frame(message: Any, correlation_id: int = 11, client_id: str = "kp") -> bytes:
    """The frame payload kafka-python would write (header included, size prefix stripped)."""
    message.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(message.encode(header=True, framed=True))[4:]


def decode_with_kafka_python(api_key: int, version: int, frame: bytes) -> Any:
    return response_class(api_key).decode(frame, version=version, header=True, framed=True)


@pytest.mark.parametrize(("api_key", "version"), SERVED_PAIRS, ids=IDS)
def test_kafka_python_requests_decode_with_ours(api_key: ApiKey, version: int) -> None:
    description = sample(request_type(api_key, version))
    message = to_kafka_python(request_class(api_key), version, description)
    frame = kafka_python_frame(message, correlation_id=version)
    request = decode_request(frame, SUPPORTED_VERSIONS)
    assert request.header == RequestHeader(api_key, version, version, "kp")
    assert plain(request.body) == description


@pytest.mark.parametrize(("api_key", "version"), SERVED_PAIRS, ids=IDS)
def test_our_responses_decode_with_kafka_python(api_key: ApiKey, version: int) -> None:
    description = sample(response_type(api_key, version))
    if api_key == ApiKey.API_VERSIONS:
        description["error_code"] = 0  # kafka-python reads any error answer as v0 (KIP-511)
    body = build_response(api_key, version, description)
    frame = encode_response(RequestHeader(api_key, version, 42, "kp"), body)
    theirs = decode_with_kafka_python(api_key, version, frame)
    assert theirs.header.correlation_id == 42
    assert kafka_python_plain(theirs) == description


# --------------------------------------------------------------- realistic first requests


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_apiversions_requests(version: int) -> None:
    cls = request_class(ApiKey.API_VERSIONS)
    fields = {"client_software_name": "kafka-python", "client_software_version": "3.0.12"}
    message = cls[version](**(fields if version >= 3 else {}))
    request = decode_request(kafka_python_frame(message), SUPPORTED_VERSIONS)
    assert (request.header.api_key, request.header.api_version) == (18, version)
    if version >= 3:
        assert request.body.client_software_name == "kafka-python"


@pytest.mark.parametrize("version", range(0, 9))
def test_metadata_requests(version: int) -> None:
    cls = request_class(ApiKey.METADATA)
    topic = cls.MetadataRequestTopic(name="orders")
    fields: dict[str, Any] = {"topics": [topic]}
    if version >= 4:
        fields["allow_auto_topic_creation"] = False
    if version >= 8:
        fields["include_cluster_authorized_operations"] = True
        fields["include_topic_authorized_operations"] = False
    frame = kafka_python_frame(cls[version](**fields), client_id="rdkafka")
    request = decode_request(frame, SUPPORTED_VERSIONS)
    assert request.header.client_id == "rdkafka"
    assert [t.name for t in request.body.topics] == ["orders"]
    if version >= 4:
        assert request.body.allow_auto_topic_creation is False
    if version >= 8:
        assert request.body.include_cluster_authorized_operations is True


# A RecordBatch v2 header with no records: opaque bytes to the codec.
RECORDS = bytes(range(61))


@pytest.mark.parametrize("version", range(3, 9))
def test_produce_requests(version: int) -> None:
    cls = request_class(ApiKey.PRODUCE)
    topic = cls.TopicProduceData(
        name="orders",
        partition_data=[cls.TopicProduceData.PartitionProduceData(index=1, records=RECORDS)],
    )
    message = cls[version](transactional_id=None, acks=-1, timeout_ms=1500, topic_data=[topic])
    request = decode_request(kafka_python_frame(message), SUPPORTED_VERSIONS)
    assert request.body.acks == -1
    assert request.body.timeout.total_seconds() == 1.5
    assert request.body.transactional_id is None
    partition = request.body.topic_data[0].partition_data[0]
    assert (request.body.topic_data[0].name, partition.index) == ("orders", 1)
    assert bytes(partition.records) == RECORDS


@pytest.mark.parametrize("version", range(4, 12))
def test_fetch_requests(version: int) -> None:
    cls = request_class(ApiKey.FETCH)
    partition = {
        "partition": 0,
        "current_leader_epoch": 5,
        "fetch_offset": 1234,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }
    fields: dict[str, Any] = {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 52428800,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": "orders", "partitions": [partition]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    # kafka-python writes only the fields of ``version``; the rest are ignored.
    frame = kafka_python_frame(to_kafka_python(cls, version, fields))
    request = decode_request(frame, SUPPORTED_VERSIONS)
    assert request.body.max_wait.total_seconds() == 0.5
    assert request.body.isolation_level == 1
    fetched = request.body.topics[0].partitions[0]
    assert (request.body.topics[0].topic, fetched.fetch_offset) == ("orders", 1234)


# --------------------------------------------------------------- realistic responses


@pytest.mark.parametrize("version", range(4, 12))
def test_fetch_responses_carry_records_to_kafka_python(version: int) -> None:
    partition = {
        "partition_index": 0,
        "error_code": 0,
        "high_watermark": 10,
        "last_stable_offset": 10,
        "log_start_offset": 0,
        "aborted_transactions": [],
        "preferred_read_replica": -1,
        "records": RECORDS,
    }
    description = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": "orders", "partitions": [partition]}],
    }
    body = build_response(ApiKey.FETCH, version, description)
    frame = encode_response(RequestHeader(ApiKey.FETCH, version, 3, "c"), body)
    theirs = decode_with_kafka_python(ApiKey.FETCH, version, frame)
    got = theirs.responses[0].partitions[0]
    assert (got.high_watermark, got.last_stable_offset) == (10, 10)
    assert bytes(got.records) == RECORDS


@pytest.mark.parametrize("version", range(3, 9))
def test_produce_responses(version: int) -> None:
    description = {
        "throttle_time_ms": 0,
        "responses": [{"name": "orders", "partition_responses": [{
            "index": 1,
            "error_code": ErrorCode.not_leader_or_follower,
            "base_offset": -1,
            "log_append_time_ms": -1,
            "log_start_offset": -1,
            "record_errors": [],
            "error_message": "not the leader",
        }]}],
    }
    body = build_response(ApiKey.PRODUCE, version, description)
    frame = encode_response(RequestHeader(ApiKey.PRODUCE, version, 3, "c"), body)
    theirs = decode_with_kafka_python(ApiKey.PRODUCE, version, frame)
    got = theirs.responses[0].partition_responses[0]
    assert got.error_code == 6
    assert got.log_append_time_ms == -1
    if version >= 8:
        assert got.error_message == "not the leader"


def test_only_apis_kafka_python_lacks_are_left_out() -> None:
    for api_key in NOT_IN_KAFKA_PYTHON:
        assert (int(api_key), "request") not in CLASSES, f"kafka-python now has {api_key.name}"
