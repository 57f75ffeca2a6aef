"""Regressions of defects the request property test found (``tests/integration/broker/
test_request_properties.py``): well-formed requests that got a traceback, an
UNKNOWN_SERVER_ERROR or a closed connection. Each case is the request hypothesis reduced it to,
run through the broker's own decode → handler → encode path (``group_wire.round_trip``)."""

from __future__ import annotations

import datetime
import struct
from pathlib import Path

import pytest

from strata.broker.handlers import alter_client_quotas
from strata.broker.quotas.broker_quotas import BrokerQuotas
from strata.broker.quotas.client_quota_manager import QuotaWindow
from strata.broker.quotas.quota_store import FileQuotaStore
from strata.protocol.api_keys import ApiKey
from strata.protocol.codec import decode_response, encode_response
from strata.protocol.error_codes import ErrorCode
from strata.protocol.header import RequestHeader, encode_request_header
from strata.protocol.messages import build_response, decode_request_body

from .group_wire import SUBSCRIPTION, fresh_state, join_fields, round_trip
from .helpers import broker_state, context, request


def offset_commit_v2(retention_time_ms: int) -> bytes:
    """An OffsetCommit v2 body for group ``g`` (no generation) committing offset 1 of t[0]."""
    return (struct.pack(">h", 1) + b"g" + struct.pack(">i", -1) + struct.pack(">h", 0)
            + struct.pack(">q", retention_time_ms)
            + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
            + struct.pack(">i", 1) + struct.pack(">iq", 0, 1) + struct.pack(">h", 0))


@pytest.mark.parametrize("retention_time_ms", [2**63 - 1, -(2**63), 86_399_999_913_600_000])
def test_a_retention_time_beyond_kios_timedelta_is_read_clamped(retention_time_ms: int) -> None:
    """Kafka reads any long; kio's timedelta holds +-9223372036854775 ms (the connection was
    closed as an invalid request: ``timedelta milliseconds overflow``)."""
    body = decode_request_body(ApiKey.OFFSET_COMMIT, 2, offset_commit_v2(retention_time_ms), 0)
    limit_ms = 9_223_372_036_854_775
    expected = limit_ms if retention_time_ms > 0 else -limit_ms
    assert body.retention_time // datetime.timedelta(milliseconds=1) == expected
    assert body.topics[0].partitions[0].committed_offset == 1


@pytest.mark.parametrize("retention_time_ms", [2**63 - 1, -(2**63)])
async def test_offset_commit_with_an_extreme_retention_time_is_answered(
    tmp_path: Path, retention_time_ms: int
) -> None:
    async with fresh_state(tmp_path) as state:
        answer = await round_trip(state, ApiKey.OFFSET_COMMIT, 2, {
            "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time_ms": 0, "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}]},
            splice=lambda frame: frame)
        assert [p.error_code for t in answer.topics for p in t.partitions] == [ErrorCode.none]
        # the same commit with the extreme value, as bytes kio cannot write
        header = encode_request_header(RequestHeader(ApiKey.OFFSET_COMMIT, 2, 1, "c"), 1)
        decoded = decode_request_body(ApiKey.OFFSET_COMMIT, 2,
                                      header + offset_commit_v2(retention_time_ms), len(header))
        answer = await round_trip(state, ApiKey.OFFSET_COMMIT, 2, decoded,
                                  splice=lambda frame: frame)
        assert [p.error_code for t in answer.topics for p in t.partitions] == [ErrorCode.none]


@pytest.mark.parametrize("version", [0, 1, 5, 9])
async def test_join_group_listing_a_protocol_twice_selects_it(tmp_path: Path,
                                                             version: int) -> None:
    """The duplicate counted as a second member's support, no protocol was a candidate and the
    rebalance raised (UNKNOWN_SERVER_ERROR and a traceback)."""
    async with fresh_state(tmp_path) as state:
        fields = join_fields(version)
        fields["protocols"] = [{"name": "range", "metadata": SUBSCRIPTION},
                               {"name": "range", "metadata": b"other"}]
        answer = await round_trip(state, ApiKey.JOIN_GROUP, version, fields)
        if answer.error_code == ErrorCode.member_id_required:
            fields["member_id"] = answer.member_id
            answer = await round_trip(state, ApiKey.JOIN_GROUP, version, fields)
        assert answer.error_code == ErrorCode.none, answer
        assert answer.protocol_name == "range"
        assert [bytes(m.metadata) for m in answer.members] == [SUBSCRIPTION]  # the first entry


@pytest.mark.parametrize("version", [0, 1])
async def test_alter_client_quotas_with_a_type_both_default_and_named_is_refused(
    tmp_path: Path, version: int
) -> None:
    """Sorting the entity ((user, None), (user, "a")) raised TypeError: the connection was
    closed (the API has no top-level error field) and a traceback logged."""
    state = broker_state(tmp_path)
    state.quotas = BrokerQuotas(FileQuotaStore(tmp_path), QuotaWindow(11, 1000))
    ctx = context(state, ApiKey.ALTER_CLIENT_QUOTAS, version)
    answer = await alter_client_quotas.handle(ctx, request(
        ApiKey.ALTER_CLIENT_QUOTAS, version, validate_only=False, entries=[
            {"entity": [{"entity_type": "user", "entity_name": None},
                        {"entity_type": "user", "entity_name": "a"}],
             "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]},
            {"entity": [{"entity_type": "user", "entity_name": "b"}],
             "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}]))
    assert [e.error_code for e in answer.entries] == [ErrorCode.invalid_request, ErrorCode.none]
    assert "duplicate entity entry user" in answer.entries[0].error_message


def test_a_response_timestamp_of_minus_one_is_read() -> None:
    """Kafka answers DescribeTransactions of an Empty id with transaction_start_time_ms -1;
    kio reads no negative timestamp (``OutOfBoundValue``), so Strata's clients failed on the
    answer. It reads as the epoch; a nullable timestamp's -1 stays None."""
    state = {"error_code": 0, "transactional_id": "t", "transaction_state": "Empty",
             "transaction_timeout_ms": 60000, "transaction_start_time_ms": 0,
             "producer_id": 5, "producer_epoch": 0, "topics": []}
    body = build_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, throttle_time_ms=0,
                          transaction_states=[state])
    frame = encode_response(RequestHeader(ApiKey.DESCRIBE_TRANSACTIONS, 0, 9, "c"), body)
    epoch_ms = struct.pack(">q", 0)
    assert frame.count(epoch_ms) >= 1
    at = frame.rindex(epoch_ms, 0, frame.index(struct.pack(">q", 5)))
    wire = frame[:at] + struct.pack(">q", -1) + frame[at + 8:]
    _, decoded = decode_response(wire[4:], ApiKey.DESCRIBE_TRANSACTIONS, 0)
    start = decoded.transaction_states[0].transaction_start_time
    assert start == datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
