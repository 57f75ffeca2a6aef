"""strata.client.fetch_codec, the one hand-written Fetch v11 (followers and Spark) against kio:
request bytes identical to kio's writer, response values identical to kio's reader (records as
views of the frame), ``InvalidResponse`` for anything malformed — None in the follower's form
(the fetcher then lets the generic codec say what is wrong)."""

from __future__ import annotations

from typing import Any

import pytest

from strata.broker.network.fetch_response import encode_fetch_response
from strata.broker.replication.partition_results import FetchPartitionResult
from strata.client.fetch_codec import (
    AbortedTransaction,
    FetchPosition,
    decode_fetch_response,
    encode_fetch_request,
    read_fetch_response,
)
from strata.protocol import ApiKey, ErrorCode, InvalidResponse, build_request, build_response
from strata.protocol.messages import decode_response_body, encode_body
from strata.storage.records import RecordSpec, build_batch


def batch(*values: bytes) -> bytes:
    """One RecordBatch v2 holding ``values`` (keys k0, k1, ...), as a client sends it."""
    return build_batch([RecordSpec(key=b"k%d" % i, value=v, timestamp=1_700_000_000_000)
                        for i, v in enumerate(values)])


POSITIONS = [
    [FetchPosition("t", 0, 3, 1234, 1 << 20)],
    [FetchPosition("a", 2, 0, 0, 65536), FetchPosition("ünï", 0, 7, 1 << 40, 1),
     FetchPosition("a", 1, -1, 5, 1 << 20)],
    [],
]


@pytest.mark.parametrize("positions", POSITIONS)
def test_request_bytes_are_kios(positions: list[FetchPosition]) -> None:
    topics: dict[str, list[dict[str, int]]] = {}
    for p in positions:
        topics.setdefault(p.topic, []).append({
            "partition": p.partition, "current_leader_epoch": p.current_leader_epoch,
            "fetch_offset": p.fetch_offset, "log_start_offset": -1,
            "partition_max_bytes": p.partition_max_bytes})
    kio = encode_body(build_request(ApiKey.FETCH, 11, {
        "replica_id": 2, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 10 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [], "rack_id": ""}))
    assert encode_fetch_request(2, 500, 1, 10 << 20, positions) == kio


def test_session_request_bytes_are_kios() -> None:
    """An incremental fetch (KIP-227): the session's id and epoch, the partitions that moved,
    and the ones it forgets, grouped by topic."""
    positions = [FetchPosition("t", 0, 3, 1234, 1 << 20)]
    kio = encode_body(build_request(ApiKey.FETCH, 11, {
        "replica_id": 2, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 10 << 20,
        "isolation_level": 0, "session_id": 77, "session_epoch": 5,
        "topics": [{"topic": "t", "partitions": [{
            "partition": 0, "current_leader_epoch": 3, "fetch_offset": 1234,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [{"topic": "t", "partitions": [4, 1]},
                                  {"topic": "ü", "partitions": [0]}],
        "rack_id": ""}))
    assert encode_fetch_request(2, 500, 1, 10 << 20, positions, session_id=77, session_epoch=5,
                                forgotten=[("t", 4), ("ü", 0), ("t", 1)]) == kio


def test_response_session_id_is_read() -> None:
    body = encode_body(build_response(ApiKey.FETCH, 11, {
        "throttle_time_ms": 0, "error_code": 0, "session_id": 123456, "responses": []}))
    assert decode_fetch_response(body).session_id == 123456


def response_body(partitions: list[dict[str, Any]], error_code: int = 0) -> bytes:
    return encode_body(build_response(ApiKey.FETCH, 11, {
        "throttle_time_ms": 0, "error_code": error_code, "session_id": 0,
        "responses": [{"topic": "t", "partitions": partitions},
                      {"topic": "ü", "partitions": partitions[:1]}]}))


def partition(index: int, records: bytes | None, error_code: int = 0,
              aborted: list[dict[str, int]] | None = None) -> dict[str, Any]:
    return {"partition_index": index, "error_code": error_code, "high_watermark": 40 + index,
            "last_stable_offset": 40, "log_start_offset": 0, "aborted_transactions": aborted,
            "preferred_read_replica": -1, "records": records}


def plain(response: Any) -> Any:
    return (response.error_code, [(t.topic, [
        (p.partition_index, p.error_code, p.high_watermark,
         None if p.records is None else bytes(p.records)) for p in t.partitions])
        for t in response.responses])


RECORDS = batch(b"a", b"b") + batch(b"c")
RESPONSES = {
    "records": response_body([partition(0, RECORDS), partition(1, b"")]),
    "null records and errors": response_body([partition(0, None, 6),
                                              partition(3, None, 74)]),
    "aborted transactions": response_body([partition(0, RECORDS, 0, [
        {"producer_id": 7, "first_offset": 3}, {"producer_id": 8, "first_offset": 9}])]),
    "top-level error": response_body([], 70),
}


@pytest.mark.parametrize("name", RESPONSES)
def test_response_values_are_kios(name: str) -> None:
    body = b"\x00\x00\x00\x07" + RESPONSES[name]  # after a v0 response header
    ours = read_fetch_response(body, 4)
    assert ours is not None
    assert plain(ours) == plain(decode_response_body(ApiKey.FETCH, 11, body, 4))
    assert all(isinstance(p.error_code, ErrorCode) for t in ours.responses for p in t.partitions)
    for t in ours.responses:
        for p in t.partitions:
            assert p.records is None or (p.records.obj is body and p.records.readonly)


def test_reads_the_leaders_hand_written_response() -> None:
    """The leader's ``fetch_response`` encoder and the follower's reader agree."""
    result = FetchPartitionResult(0, 12, 12, 0, (), 0)
    chunks = encode_fetch_response(11, [("t", [(0, result), (1, FetchPartitionResult(6))])],
                                   read_committed=False).chunks
    body = b"".join(c for c in chunks if isinstance(c, bytes))
    ours = read_fetch_response(body, 0)
    assert ours is not None
    assert plain(ours) == (ErrorCode.none, [("t", [(0, ErrorCode.none, 12, b""),
                                                   (1, ErrorCode.not_leader_or_follower, -1,
                                                    b"")])])


@pytest.mark.parametrize("name", RESPONSES)
def test_malformed_responses_are_left_to_the_generic_codec(name: str) -> None:
    body = RESPONSES[name]
    for cut in range(1, len(body)):
        assert read_fetch_response(body[:-cut], 0) is None, cut
    assert read_fetch_response(body + b"\x00", 0) is None
    unknown_code = bytearray(body)
    unknown_code[4:6] = (30000).to_bytes(2, "big")  # top-level error_code
    assert read_fetch_response(bytes(unknown_code), 0) is None


# Spark's reading of the same responses (it was strata.spark.fetch_codec): every field, records
# as a writable view of Spark's reused receive buffer.
def spark_body(error_code: int = 0) -> bytes:
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
    response = decode_fetch_response(memoryview(spark_body(error_code=0)))
    assert response.error_code == 0
    assert [(t.topic, a.partition_index, a.error_code, a.high_watermark, a.last_stable_offset,
             a.log_start_offset, a.aborted_transactions,
             None if a.records is None else bytes(a.records))
            for t in response.responses for a in t.partitions] == [
        ("orders", 0, 0, 10, 8, 2, (AbortedTransaction(7, 3),), b"batch-bytes"),
        ("orders", 1, 1, -1, -1, -1, None, None),
        ("ünïcode", 4, 6, 0, 0, 0, (), b""),
    ]


def test_records_are_a_view_into_the_frame() -> None:
    frame = bytearray(spark_body())
    response = decode_fetch_response(memoryview(frame))
    records = response.responses[0].partitions[0].records
    assert records is not None and not records.readonly
    at = frame.index(b"batch-bytes")
    frame[at] = ord("B")
    assert bytes(records) == b"Batch-bytes"


def test_a_top_level_error_is_returned() -> None:
    assert decode_fetch_response(memoryview(spark_body(error_code=70))).error_code == 70


@pytest.mark.parametrize("cut", [3, 20, 60, 100])
def test_a_truncated_frame_is_an_invalid_response(cut: int) -> None:
    with pytest.raises(InvalidResponse, match="pass the end"):
        decode_fetch_response(memoryview(spark_body()[:cut]))


def test_bytes_after_the_body_are_an_invalid_response() -> None:
    with pytest.raises(InvalidResponse, match="1 bytes after the body"):
        decode_fetch_response(spark_body() + b"\x00")
