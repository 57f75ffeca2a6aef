"""strata.spark.fetch_codec: FetchResponse v11 read by hand equals kio's encoding of it."""

from __future__ import annotations

import pytest

from strata.protocol import ApiKey, InvalidResponse, build_response
from strata.protocol.messages import encode_body
from strata.spark.fetch_codec import PartitionAnswer, parse_fetch_response
from strata.spark.record_columns import AbortedTransaction


def encoded(error_code: int = 0) -> bytes:
    return encode_body(build_response(
        ApiKey.FETCH, 11, throttle_time_ms=5, error_code=error_code, session_id=0, responses=[
            {"topic": "orders", "partitions": [
                {"partition_index": 0, "error_code": 0, "high_watermark": 10,
                 "last_stable_offset": 8, "log_start_offset": 2,
                 "aborted_transactions": [{"producer_id": 7, "first_offset": 3}],
                 "preferred_read_replica": -1, "records": b"batch-bytes"},
                {"partition_index": 1, "error_code": 1, "high_watermark": -1,
                 "last_stable_offset": -1, "log_start_offset": -1,
                 "aborted_transactions": None, "preferred_read_replica": -1, "records": None},
            ]},
            {"topic": "ünïcode", "partitions": [
                {"partition_index": 4, "error_code": 6, "high_watermark": 0,
                 "last_stable_offset": 0, "log_start_offset": 0, "aborted_transactions": [],
                 "preferred_read_replica": -1, "records": b""}]},
        ]))


def test_every_field_as_kio_wrote_it() -> None:
    error, answers = parse_fetch_response(memoryview(encoded(error_code=0)))
    assert error == 0
    assert [(a.topic, a.partition_index, a.error_code, a.high_watermark, a.last_stable_offset,
             a.log_start_offset, a.aborted_transactions, bytes(a.records)) for a in answers] == [
        ("orders", 0, 0, 10, 8, 2, (AbortedTransaction(7, 3),), b"batch-bytes"),
        ("orders", 1, 1, -1, -1, -1, None, b""),
        ("ünïcode", 4, 6, 0, 0, 0, (), b""),
    ]
    assert all(isinstance(a, PartitionAnswer) for a in answers)


def test_records_are_a_view_into_the_frame() -> None:
    frame = bytearray(encoded())
    _error, answers = parse_fetch_response(memoryview(frame))
    at = frame.index(b"batch-bytes")
    frame[at] = ord("B")
    assert bytes(answers[0].records) == b"Batch-bytes"


def test_a_top_level_error_is_returned() -> None:
    assert parse_fetch_response(memoryview(encoded(error_code=70)))[0] == 70


@pytest.mark.parametrize("cut", [3, 20, 60, 100])
def test_a_truncated_frame_is_an_invalid_response(cut: int) -> None:
    with pytest.raises(InvalidResponse, match="pass the end"):
        parse_fetch_response(memoryview(encoded()[:cut]))
