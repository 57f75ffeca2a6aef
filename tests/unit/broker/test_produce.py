"""Produce v3-v8 handler: per-partition answers, acks, the hand-written response (checked
against kio's and kafka-python's view of the same bytes)."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers.produce import encode_produce_response, handle
from strata.broker.network.request_context import Response
from strata.broker.replication.partition_results import PartitionAppendResult
from strata.protocol import ApiKey, build_response
from strata.protocol.messages import decode_response_body, encode_body
from strata.security.acl import ResourceType
from strata.storage.file_records import FileSlice

from .helpers import batch, broker_state, context, request

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.producer import ProduceResponse as KafkaPythonProduceResponse

VERSIONS = range(3, 9)


def produce_request(version: int, parts: list[tuple[str, int, bytes | None]], acks: int = 1,
                    transactional_id: str | None = None) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, index, records in parts:
        topics.setdefault(name, []).append({"index": index, "records": records})
    return request(ApiKey.PRODUCE, version, transactional_id=transactional_id, acks=acks,
                   timeout_ms=1000,
                   topic_data=[{"name": n, "partition_data": p} for n, p in topics.items()])


def body(response: Response) -> bytes:
    return b"".join(c.read_bytes() if isinstance(c, FileSlice) else c for c in response.chunks)


async def produce(state: BrokerState, version: int, parts: list[tuple[str, int, bytes | None]],
                  **kwargs: Any) -> list[Any]:
    """[(partition index, error code, base offset, ...)] decoded by kio from our bytes."""
    response = await handle(context(state, ApiKey.PRODUCE, version),
                                    produce_request(version, parts, **kwargs))
    assert isinstance(response, Response)
    decoded = decode_response_body(ApiKey.PRODUCE, version, body(response), 0)
    return [p for t in decoded.responses for p in t.partition_responses]


@pytest.fixture
def state(tmp_path: Path) -> BrokerState:
    return broker_state(tmp_path, ("t", 2), ("u", 1))


@pytest.mark.parametrize("version", VERSIONS)
async def test_appends_and_answers_offsets(state: BrokerState, version: int) -> None:
    p = await produce(state, version, [("t", 0, batch(b"a", b"b")), ("t", 1, batch(b"c")),
                                       ("u", 0, batch(b"d"))])
    assert [(r.index, r.error_code, r.base_offset) for r in p] == [(0, 0, 0), (1, 0, 0), (0, 0, 0)]
    p = await produce(state, version, [("t", 0, batch(b"e"))])
    assert p[0].base_offset == 2 and p[0].log_append_time is None
    if version >= 5:
        assert p[0].log_start_offset == 0
    assert state.replica_manager.get_partition("t", 0).high_watermark == 3  # type: ignore[union-attr]


@pytest.mark.parametrize("version", VERSIONS)
def test_response_bytes_match_kio(version: int) -> None:
    topics = produce_request(version, [("t", 0, b""), ("t", 1, b""), ("ünï", 3, b"")]).topic_data
    results = [PartitionAppendResult(0, 41, -1, 0),
               PartitionAppendResult(87, error_message="Strata does not support transactions"),
               PartitionAppendResult(0, 7, 1_700_000_000_123, 5)]
    ours = body(encode_produce_response(version, topics, results))
    expected = build_response(ApiKey.PRODUCE, version, throttle_time_ms=0, responses=[
        {"name": t.name, "partition_responses": [
            {"index": d.index, "error_code": r.error_code, "base_offset": r.base_offset,
             "log_append_time_ms": r.log_append_time, "log_start_offset": r.log_start_offset,
             "record_errors": [], "error_message": r.error_message}
            for d, r in zip(t.partition_data, results[i:], strict=False)]}
        for i, t in ((0, topics[0]), (2, topics[1]))])
    assert ours == encode_body(expected)
    frame = struct.pack(">ii", len(ours) + 4, 5) + ours
    theirs = KafkaPythonProduceResponse.decode(frame, version=version, header=True, framed=True)
    got = theirs.responses[0].partition_responses
    assert [(x.index, x.error_code, x.base_offset) for x in got] == [(0, 0, 41), (1, 87, -1)]
    if version >= 8:
        assert got[1].error_message == "Strata does not support transactions"


async def test_acks_zero_appends_and_sends_nothing(state: BrokerState) -> None:
    req = produce_request(8, [("t", 0, batch(b"a")), ("nope", 0, batch(b"b"))], acks=0)
    assert await handle(context(state, ApiKey.PRODUCE, 8), req) is None
    assert state.replica_manager.get_partition("t", 0).log_end_offset == 1  # type: ignore[union-attr]


async def test_acks_all_and_invalid_acks(tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1), min_insync_replicas="2")
    (r,) = await produce(state, 8, [("t", 0, batch(b"a"))], acks=-1)
    assert r.error_code == 19  # NOT_ENOUGH_REPLICAS
    (r,) = await produce(state, 8, [("t", 0, batch(b"a"))], acks=1)
    assert r.error_code == 0
    (r,) = await produce(state, 8, [("t", 0, batch(b"a"))], acks=5)
    assert r.error_code == 21  # INVALID_REQUIRED_ACKS


def corrupt(records: bytes, at: int, value: int) -> bytes:
    raw = bytearray(records)
    raw[at] = value
    return bytes(raw)


async def test_validation_errors(tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1))
    state.log_manager.set_topic_config("t", {"max.message.bytes": "400"})
    good = batch(b"a")
    cases = {
        "corrupt CRC": (corrupt(good, len(good) - 1, good[-1] ^ 1), 2),
        "too large": (batch(b"x" * 500), 10),
        "far future timestamp": (batch(b"a", timestamp=4_000_000_000_000), 32),
        "magic 1": (corrupt(good, 16, 1), 43),
        "empty": (b"", 87),
        "null records": (None, 87),
        "truncated": (good[:-3], 2),
        "two batches": (good + batch(b"b"), 87),
        "transactional batch": (batch(b"a", producer_id=1, producer_epoch=0, base_sequence=0,
                                      is_transactional=True), 53),
    }
    parts = [("t", 0, records) for records, _ in cases.values()] + [("t", 7, good)]
    answers = await produce(state, 8, parts)
    expected = [code for _, code in cases.values()] + [3]
    assert [a.error_code for a in answers] == expected, list(cases)
    assert all(a.base_offset == -1 for a in answers)
    assert all(a.error_message for a in answers)
    assert "transactional_id" in answers[-2].error_message
    assert state.replica_manager.get_partition("t", 0).log_end_offset == 0  # type: ignore[union-attr]


async def test_transactional_produce_opens_a_transaction(tmp_path: Path) -> None:
    # The partition side alone: no transaction coordinator runs here to verify the partition
    # (KIP-890 verification has its own tests, against a real broker).
    state = broker_state(tmp_path, ("t", 2), transaction_partition_verification_enable="false")
    txn = batch(b"a", b"b", producer_id=9, producer_epoch=2, base_sequence=0,
                is_transactional=True)
    (r,) = await produce(state, 8, [("t", 0, txn)], transactional_id="tx-1")
    assert (r.error_code, r.base_offset) == (0, 0)
    log = state.replica_manager.get_partition_or_error("t", 0).log
    assert log.last_stable_offset() == 0 and log.high_watermark == 2
    (r,) = await produce(state, 8, [("t", 0, batch(b"c", producer_id=9, producer_epoch=1,
                                                     base_sequence=2, is_transactional=True))],
                         transactional_id="tx-1")
    assert r.error_code == 47  # INVALID_PRODUCER_EPOCH: fenced by the newer epoch
    (r,) = await produce(state, 8, [("t", 0, batch(b"d", producer_id=9, producer_epoch=2,
                                                     base_sequence=2))])
    assert r.error_code == 48  # INVALID_TXN_STATE: not transactional inside a transaction


async def test_idempotent_producer(state: BrokerState) -> None:
    first = batch(b"a", b"b", producer_id=3, producer_epoch=0, base_sequence=0)
    (r,) = await produce(state, 8, [("t", 0, first)])
    assert (r.error_code, r.base_offset) == (0, 0)
    (r,) = await produce(state, 8, [("t", 0, batch(b"x"))])  # someone else's record
    (dup,) = await produce(state, 8, [("t", 0, first)])
    assert (dup.error_code, dup.base_offset) == (0, 0)  # the original offset
    (gap,) = await produce(state, 8, [("t", 0, batch(b"c", producer_id=3, producer_epoch=0,
                                                       base_sequence=5))])
    assert gap.error_code == 45
    (ok,) = await produce(state, 8, [("t", 0, batch(b"c", producer_id=3, producer_epoch=1,
                                                      base_sequence=0))])
    assert (ok.error_code, ok.base_offset) == (0, 3)
    (old,) = await produce(state, 8, [("t", 0, batch(b"d", producer_id=3, producer_epoch=0,
                                                       base_sequence=2))])
    assert old.error_code == 47


async def test_storage_error(state: BrokerState) -> None:
    state.replica_manager.get_partition("t", 0).log.offline = True  # type: ignore[union-attr]
    (r, s) = await produce(state, 8, [("t", 0, batch(b"a")), ("t", 1, batch(b"a"))])
    assert (r.error_code, s.error_code) == (56, 0)


class _DenyTransactionalIds:
    def authorize(self, principal: str, host: str, operation: Any, resource_type: Any,
                  name: str) -> bool:
        return resource_type != ResourceType.TRANSACTIONAL_ID


async def test_transactional_id_needs_write_on_it(state: BrokerState) -> None:
    state.authorizer = _DenyTransactionalIds()  # type: ignore[assignment]
    txn = batch(b"a", producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
    (r,) = await produce(state, 8, [("t", 0, txn)], transactional_id="tx-1")
    assert r.error_code == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert state.replica_manager.get_partition_or_error("t", 0).log_end_offset == 0
