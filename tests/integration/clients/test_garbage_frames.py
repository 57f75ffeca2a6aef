"""Hostile bytes over raw sockets never take the broker down.

Each generated input goes to the broker on a connection of its own; the connection is then
half-closed and drained (whatever the broker answers or does not answer is its business: close,
error response, or a real answer to an input that happens to be valid). The invariant checked
after every example: the process is alive and a fresh connection still gets an ApiVersions
answer. Hypothesis shrinks a crashing input to a minimal one, shown in the failure.

Inputs: arbitrary bytes; well-framed arbitrary payloads; a plausible request header (any api
key and version) followed by noise; and valid requests of the APIs clients send first (ApiVersions,
Metadata, Produce with a real batch, Fetch, ListOffsets, InitProducerId) with bytes overwritten
and/or cut short, re-framed or not. Headers of the APIs that create or reconfigure things
(CreateTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs) are left out of the
header-plus-noise inputs: a valid body there asks for real work (a billion partitions), which is
a resource question, not a parsing one.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strata.protocol import ApiKey, ErrorCode, RequestHeader, build_request, encode_request
from strata.storage.records import RecordSpec, build_batch

from ..broker_process import BrokerProcess
from .wire import KafkaWire, api_versions

pytestmark = pytest.mark.integration

DRAIN_TIMEOUT_S: Final = 0.3
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")
RESOURCE_APIS: Final = frozenset({
    ApiKey.CREATE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.ALTER_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
})


def _request(api_key: ApiKey, version: int, fields: dict[str, Any]) -> bytes:
    return encode_request(
        RequestHeader(api_key, version, 7, "fuzz"), build_request(api_key, version, fields)
    )


VALID_REQUESTS: Final[Sequence[bytes]] = (
    _request(ApiKey.API_VERSIONS, 3, {
        "client_software_name": "fuzz", "client_software_version": "1"}),
    _request(ApiKey.METADATA, 8, {
        "topics": None, "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False}),
    _request(ApiKey.PRODUCE, 8, {
        "transactional_id": None, "acks": 1, "timeout_ms": 1000,
        "topic_data": [{"name": "fuzz", "partition_data": [{
            "index": 0,
            "records": build_batch([RecordSpec(key=b"k", value=b"v", timestamp=1)]),
        }]}]}),
    _request(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait_ms": 10, "min_bytes": 0, "max_bytes": 1 << 16,
        "isolation_level": 1, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "fuzz", "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
            "log_start_offset": -1, "partition_max_bytes": 1 << 16}]}],
        "forgotten_topics_data": [], "rack_id": ""}),
    _request(ApiKey.LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": "fuzz", "partitions": [{
            "partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}),
    _request(ApiKey.INIT_PRODUCER_ID, 1, {
        "transactional_id": None, "transaction_timeout_ms": 60_000}),
)


def _framed(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def _header_then_noise(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    return _framed(_HEADER.pack(api_key, version, correlation_id, -1) + body)


def _mutate(
    request: bytes, writes: list[tuple[int, int]], cut: int | None, reframe: bool
) -> bytes:
    data = bytearray(request)
    for position, value in writes:
        data[position % len(data)] = value
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    return _framed(bytes(data[4:])) if reframe else bytes(data)


garbage = st.one_of(
    st.binary(max_size=400),
    st.binary(max_size=400).map(_framed),
    st.builds(
        _header_then_noise,
        api_key=st.integers(-1, 80).filter(lambda key: key not in RESOURCE_APIS),
        version=st.integers(-1, 20),
        correlation_id=st.integers(-(2**31), 2**31 - 1),
        body=st.binary(max_size=300),
    ),
    st.builds(
        _mutate,
        request=st.sampled_from(VALID_REQUESTS),
        writes=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=6),
        cut=st.none() | st.integers(0, 1 << 16),
        reframe=st.booleans(),
    ),
)


def send_and_drain(bootstrap: str, data: bytes) -> None:
    """Send ``data`` on a new connection, half-close, read until EOF or a short timeout."""
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=2.0) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(DRAIN_TIMEOUT_S)
            while sock.recv(65536):
                pass
        except (TimeoutError, ConnectionError):
            pass  # the broker may close early, reset, or wait for the rest of a frame


def assert_serving(broker: BrokerProcess, after: bytes) -> None:
    assert broker.is_running(), f"broker died after {after!r}\n{broker.log_tail()}"
    try:
        response = api_versions(broker.bootstrap)
    except (OSError, ConnectionError) as exc:
        raise AssertionError(
            f"ApiVersions on a fresh connection failed after {after!r}: {exc!r}\n"
            f"{broker.log_tail()}"
        ) from exc
    assert response.error_code == ErrorCode.none, response
    assert response.api_keys, "ApiVersions lists no APIs"


@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=garbage)
def test_garbage_never_stops_the_broker(broker: BrokerProcess, data: bytes) -> None:
    send_and_drain(broker.bootstrap, data)
    assert_serving(broker, data)


def test_unsupported_api_versions_version_gets_the_v0_fallback(broker: BrokerProcess) -> None:
    with KafkaWire.to(broker.bootstrap) as wire:
        wire.sock.sendall(_header_then_noise(ApiKey.API_VERSIONS, 127, 99, b""))
        frame = wire.read_frame()
    correlation_id, error_code, count = struct.unpack_from(">ihi", frame)
    assert (correlation_id, error_code) == (99, ErrorCode.unsupported_version), frame[:16]
    assert count > 0, "the fallback must list the supported APIs (KIP-511)"


@pytest.mark.parametrize(
    "prefix",
    [_SIZE.pack(-1), _SIZE.pack(2**31 - 1), _SIZE.pack(0)],
    ids=["negative-size", "2GiB-size", "empty-frame"],
)
def test_unframeable_input_closes_only_that_connection(
    broker: BrokerProcess, prefix: bytes
) -> None:
    host, _, port = broker.bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5.0) as sock:
        sock.sendall(prefix)  # no half-close: the broker must decide from these bytes alone
        try:
            left_open = sock.recv(65536) != b""
        except ConnectionResetError:
            left_open = False
        except TimeoutError:
            left_open = True
        assert not left_open, f"connection not closed after {prefix.hex()}"
    assert_serving(broker, prefix)
