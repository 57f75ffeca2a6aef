"""DeleteRecords v0-v1 handler."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.broker.handlers.delete_records import handle
from strata.protocol import ApiKey, encode_response

from .helpers import batch, broker_state, context, request


@pytest.mark.parametrize("version", [0, 1])
async def test_delete_records(tmp_path: Path, version: int) -> None:
    state = broker_state(tmp_path, ("t", 2), ("c", 1))
    state.log_manager.set_topic_config("c", {"cleanup.policy": "compact"})
    for _ in range(3):
        await state.replica_manager.append_records([(("t", 0), batch(b"a"))], 1, 1000)
    req = request(ApiKey.DELETE_RECORDS, version, timeout_ms=1000, topics=[
        {"name": "t", "partitions": [{"partition_index": 0, "offset": 2},
                                     {"partition_index": 1, "offset": 5}]},
        {"name": "c", "partitions": [{"partition_index": 0, "offset": -1}]},
        {"name": "x", "partitions": [{"partition_index": 0, "offset": 0}]},
        {"name": "t", "partitions": [{"partition_index": 0, "offset": -1}]},
    ])
    ctx = context(state, ApiKey.DELETE_RECORDS, version)
    response = await handle(ctx, req)
    encode_response(ctx.header, response)
    got = [(t.name, p.partition_index, p.error_code, p.low_watermark)
           for t in response.topics for p in t.partitions]
    assert got == [("t", 0, 0, 2), ("t", 1, 1, -1), ("c", 0, 44, -1), ("x", 0, 3, -1),
                   ("t", 0, 0, 3)]
    assert state.replica_manager.get_partition("t", 0).log_start_offset == 3  # type: ignore[union-attr]


async def test_delete_records_refuses_internal_topics(tmp_path: Path) -> None:
    """Kafka's ``deleteRecordsOnLocalLog``: INVALID_TOPIC_EXCEPTION for an internal topic (its
    coordinator alone moves its log start); the other topics of the request are served."""
    state = broker_state(tmp_path, ("__consumer_offsets", 1), ("__transaction_state", 1),
                         ("t", 1))
    for tp in (("__consumer_offsets", 0), ("__transaction_state", 0), ("t", 0)):
        for _ in range(2):
            await state.replica_manager.append_records([(tp, batch(b"a"))], 1, 1000)
    req = request(ApiKey.DELETE_RECORDS, 2, timeout_ms=1000, topics=[
        {"name": "__consumer_offsets", "partitions": [{"partition_index": 0, "offset": 1}]},
        {"name": "__transaction_state", "partitions": [{"partition_index": 0, "offset": -1}]},
        {"name": "t", "partitions": [{"partition_index": 0, "offset": 1}]},
    ])
    ctx = context(state, ApiKey.DELETE_RECORDS, 2)
    response = await handle(ctx, req)
    encode_response(ctx.header, response)
    got = [(t.name, p.error_code, p.low_watermark) for t in response.topics
           for p in t.partitions]
    assert got == [("__consumer_offsets", 17, -1), ("__transaction_state", 17, -1),
                   ("t", 0, 1)]
    for topic in ("__consumer_offsets", "__transaction_state"):
        assert state.replica_manager.get_partition(topic, 0).log_start_offset == 0  # type: ignore[union-attr]
