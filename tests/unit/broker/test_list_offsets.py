"""ListOffsets v1-v5 handler: latest by isolation, earliest, max timestamp, by timestamp,
leader epochs, duplicates and unknown partitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers.list_offsets import handle
from strata.protocol import ApiKey, encode_response

from .helpers import batch, broker_state, context, now_ms, request

BASE = now_ms() - 60_000


async def list_offsets(state: BrokerState, version: int, parts: list[tuple[str, int, int]],
                       *, isolation_level: int = 0, replica_id: int = -1,
                       leader_epoch: int = -1) -> list[Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, index, ts in parts:
        topics.setdefault(name, []).append({"partition_index": index, "timestamp": ts,
                                            "current_leader_epoch": leader_epoch})
    req = request(ApiKey.LIST_OFFSETS, version, replica_id=replica_id,
                  isolation_level=isolation_level,
                  topics=[{"name": n, "partitions": p} for n, p in topics.items()])
    ctx = context(state, ApiKey.LIST_OFFSETS, version)
    response = await handle(ctx, req)
    encode_response(ctx.header, response)  # must be encodable at this version
    return [p for t in response.topics for p in t.partitions]


@pytest.fixture
async def state(tmp_path: Path) -> BrokerState:
    state = broker_state(tmp_path, ("t", 1))
    for i in range(3):
        entries = [(("t", 0), batch(b"v", timestamp=BASE + 1000 * i))]
        (r,) = await state.replica_manager.append_records(entries, 1, 1000)
        assert r.error_code == 0
    part = state.replica_manager.get_partition("t", 0)
    assert part is not None
    part.make_leader(4)
    return state


@pytest.mark.parametrize("version", range(1, 6))
async def test_special_timestamps_and_lookup(state: BrokerState, version: int) -> None:
    async def one(timestamp: int) -> Any:
        (answer,) = await list_offsets(state, version, [("t", 0, timestamp)])
        assert answer.error_code == 0
        return answer

    latest, earliest, by_ts = await one(-1), await one(-2), await one(BASE + 500)
    too_late, top = await one(BASE + 9000), await one(-3)
    assert (latest.offset, latest.timestamp) == (3, -1)
    assert (earliest.offset, earliest.timestamp) == (0, -1)
    assert (by_ts.offset, by_ts.timestamp) == (1, BASE + 1000)
    assert (too_late.offset, too_late.timestamp) == (-1, -1)
    assert (top.offset, top.timestamp) == (2, BASE + 2000)
    if version >= 4:
        assert latest.leader_epoch == 4
        assert by_ts.leader_epoch == 0  # written by the leader at epoch 0
    (unknown,) = await list_offsets(state, version, [("x", 0, -1)])
    assert (unknown.error_code, unknown.offset) == (3, -1)


async def test_a_partition_the_cluster_has_but_this_broker_does_not_host(
        state: BrokerState) -> None:
    """Kafka's ``getPartitionOrError``: NOT_LEADER_OR_FOLLOWER (6) for a partition in the
    metadata this broker does not host (a topic just created, not yet taken up; a replica
    moved away), UNKNOWN_TOPIC_OR_PARTITION (3) for one the cluster does not have."""
    state.replica_manager.partition_exists = lambda tp: tp == ("elsewhere", 0)
    elsewhere, unknown = await list_offsets(state, 5, [("elsewhere", 0, -1), ("x", 0, -1)])
    assert (elsewhere.error_code, unknown.error_code) == (6, 3)


async def test_latest_depends_on_isolation(state: BrokerState) -> None:
    part = state.replica_manager.get_partition("t", 0)
    assert part is not None
    part.log.update_high_watermark(2)
    (uncommitted,) = await list_offsets(state, 5, [("t", 0, -1)])
    (committed,) = await list_offsets(state, 5, [("t", 0, -1)], isolation_level=1)
    (follower,) = await list_offsets(state, 5, [("t", 0, -1)], replica_id=1)
    assert (uncommitted.offset, committed.offset, follower.offset) == (2, 2, 3)
    (hidden,) = await list_offsets(state, 5, [("t", 0, BASE + 1500)])
    assert hidden.offset == -1  # offset 2 is at the HW: not visible yet


async def test_leader_epoch_and_errors(state: BrokerState) -> None:
    (fenced,) = await list_offsets(state, 4, [("t", 0, -1)], leader_epoch=3)
    (unknown_epoch,) = await list_offsets(state, 4, [("t", 0, -1)], leader_epoch=5)
    (current,) = await list_offsets(state, 4, [("t", 0, -1)], leader_epoch=4)
    assert (fenced.error_code, unknown_epoch.error_code, current.error_code) == (74, 75, 0)
    dup1, dup2, other = await list_offsets(state, 5, [("t", 0, -1), ("t", 0, -2), ("x", 1, -1)])
    assert (dup1.error_code, dup2.error_code, other.error_code) == (42, 42, 3)
