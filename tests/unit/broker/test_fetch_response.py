"""The hand-written FetchResponse encoder: byte-identical to kio's writer for v4-v11, and
readable by kafka-python, with the records coming from file slices."""

from __future__ import annotations

import os
import struct
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strata.broker.network.fetch_response import encode_fetch_response
from strata.broker.network.request_context import Response
from strata.broker.replication.partition_results import FetchPartitionResult
from strata.protocol import ApiKey, build_response
from strata.protocol.messages import encode_body
from strata.storage.file_records import FileSlice

from .helpers import batch

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer import FetchResponse as KafkaPythonFetchResponse

VERSIONS = range(4, 12)


@pytest.fixture
def records_file(tmp_path: Path) -> Iterator[tuple[int, bytes, bytes]]:
    first, second = batch(b"a", b"b"), batch(b"c" * 100)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"junk" + first + second)
    fd = os.open(path, os.O_RDONLY)
    try:
        yield fd, first, second
    finally:
        os.close(fd)


def results(fd: int, first: bytes, second: bytes) -> list[tuple[str, list[Any]]]:
    one = FileSlice(fd, 4, len(first))
    two = FileSlice(fd, 4 + len(first), len(second))
    return [
        ("orders", [
            (0, FetchPartitionResult(0, 10, 10, 0, (one, two), len(first) + len(second))),
            (1, FetchPartitionResult(0, 5, 5, 2)),
            (2, FetchPartitionResult(1)),  # OFFSET_OUT_OF_RANGE: offsets -1, no records
        ]),
        ("ünïcode-tøpic", [(7, FetchPartitionResult(0, 3, 3, 0, (two,), len(second)))]),
    ]


def materialise(response: Response) -> bytes:
    return b"".join(c.read_bytes() if isinstance(c, FileSlice) else c for c in response.chunks)


def kio_bytes(version: int, topics: list[tuple[str, list[Any]]], read_committed: bool,
              error_code: int = 0) -> bytes:
    responses = []
    for name, partitions in topics:
        parts = []
        for index, r in partitions:
            parts.append({
                "partition_index": index, "error_code": r.error_code,
                "high_watermark": r.high_watermark, "last_stable_offset": r.last_stable_offset,
                "log_start_offset": r.log_start_offset,
                "aborted_transactions": [] if read_committed else None,
                "preferred_read_replica": -1,
                "records": b"".join(s.read_bytes() for s in r.records),
            })
        responses.append({"topic": name, "partitions": parts})
    body = build_response(ApiKey.FETCH, version, throttle_time_ms=0, error_code=error_code,
                          session_id=0, responses=responses)
    return encode_body(body)


@pytest.mark.parametrize("read_committed", [False, True])
@pytest.mark.parametrize("version", VERSIONS)
def test_identical_to_kio(records_file: tuple[int, bytes, bytes], version: int,
                          read_committed: bool) -> None:
    topics = results(*records_file)
    ours = encode_fetch_response(version, topics, read_committed=read_committed)
    assert materialise(ours) == kio_bytes(version, topics, read_committed)
    assert ours.size == len(materialise(ours))
    # records stay slices: header bytes, slice, slice, bytes, slice, bytes
    kinds = [type(c).__name__ for c in ours.chunks]
    assert kinds == ["bytes", "FileSlice", "FileSlice", "bytes", "FileSlice"]


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_and_top_level_error(version: int) -> None:
    ours = encode_fetch_response(version, [], read_committed=False, error_code=70)
    expected = kio_bytes(version, [], False, error_code=70 if version >= 7 else 0)
    assert materialise(ours) == expected
    assert len(ours.chunks) == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_python_decodes_it(records_file: tuple[int, bytes, bytes], version: int) -> None:
    fd, first, second = records_file
    topics = results(fd, first, second)
    body = materialise(encode_fetch_response(version, topics, read_committed=True))
    frame = struct.pack(">ii", len(body) + 4, 99) + body
    theirs = KafkaPythonFetchResponse.decode(frame, version=version, header=True, framed=True)
    assert theirs.header.correlation_id == 99
    orders, other = theirs.responses
    assert orders.topic == "orders" and other.topic == "ünïcode-tøpic"
    p0, p1, p2 = orders.partitions
    assert (p0.partition_index, p0.high_watermark, p0.last_stable_offset) == (0, 10, 10)
    assert bytes(p0.records) == first + second
    assert list(p0.aborted_transactions) == []
    assert (p1.high_watermark, bytes(p1.records)) == (5, b"")
    assert (p2.error_code, p2.high_watermark) == (1, -1)
    if version >= 5:
        assert p1.log_start_offset == 2
    if version >= 11:
        assert p0.preferred_read_replica == -1
    if version >= 7:
        assert (theirs.error_code, theirs.session_id) == (0, 0)
    assert bytes(other.partitions[0].records) == second


def test_rejects_versions_it_does_not_write() -> None:
    with pytest.raises(ValueError, match="v19"):
        encode_fetch_response(19, [], read_committed=False)
    with pytest.raises(ValueError, match="v3"):
        encode_fetch_response(3, [], read_committed=False)


def test_request_header_is_not_part_of_the_body() -> None:
    # the connection writes size + response header; the body starts with throttle_time_ms
    ours = encode_fetch_response(11, [], read_committed=False)
    assert materialise(ours) == struct.pack(">ihii", 0, 0, 0, 0)
