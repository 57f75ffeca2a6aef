"""OffsetForLeaderEpoch v2-3 handler: end offsets per epoch from the leader-epoch cache, epoch
fencing, leader-only answers, unknown partitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers.offset_for_leader_epoch import handle
from strata.protocol import ApiKey, encode_response
from strata.protocol.error_codes import ErrorCode

from .helpers import batch, broker_state, context, request


async def end_offsets(state: BrokerState, version: int, parts: list[tuple[str, int, int, int]],
                      *, replica_id: int = -1) -> list[Any]:
    """``parts``: (topic, partition, current_leader_epoch, leader_epoch)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, index, current, epoch in parts:
        topics.setdefault(name, []).append({"partition": index, "current_leader_epoch": current,
                                            "leader_epoch": epoch})
    req = request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, replica_id=replica_id,
                  topics=[{"topic": n, "partitions": p} for n, p in topics.items()])
    ctx = context(state, ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    response = await handle(ctx, req)
    encode_response(ctx.header, response)  # must be encodable at this version
    return [(p.error_code, p.leader_epoch, p.end_offset) for t in response.topics
            for p in t.partitions]


async def append(state: BrokerState, count: int) -> None:
    for _ in range(count):
        (result,) = await state.replica_manager.append_records([(("t", 0), batch(b"v"))], 1, 1000)
        assert result.error_code == 0


@pytest.fixture
async def state(tmp_path: Path) -> BrokerState:
    """Partition t-0 led in epoch 0 for offsets 0-2, epoch 3 for 3-4, epoch 5 from 5 (LEO 7)."""
    state = broker_state(tmp_path, ("t", 1))
    part = state.replica_manager.get_partition("t", 0)
    assert part is not None
    await append(state, 3)
    part.make_leader(3)
    await append(state, 2)
    part.make_leader(5)
    await append(state, 2)
    return state


@pytest.mark.parametrize("version", [2, 3])
async def test_end_offset_of_each_epoch(state: BrokerState, version: int) -> None:
    answers = await end_offsets(state, version, [
        ("t", 0, -1, 0),   # an old epoch: ends where epoch 3 starts
        ("t", 0, -1, 2),   # never used: the largest epoch below it, and where it ended
        ("t", 0, -1, 3),
        ("t", 0, 5, 5),    # the current epoch: the log end offset
        ("t", 0, -1, 9),   # newer than any: undefined
        ("t", 0, -1, -1),  # a bootstrapping follower: undefined
    ])
    assert answers == [(0, 0, 3), (0, 0, 3), (0, 3, 5), (0, 5, 7), (0, -1, -1), (0, -1, -1)]


async def test_current_leader_epoch_is_checked(state: BrokerState) -> None:
    answers = await end_offsets(state, 3, [("t", 0, 4, 3), ("t", 0, 6, 3)])
    assert [a[0] for a in answers] == [ErrorCode.fenced_leader_epoch,
                                       ErrorCode.unknown_leader_epoch]
    assert all(a[1:] == (-1, -1) for a in answers)


async def test_unknown_partitions(state: BrokerState) -> None:
    answers = await end_offsets(state, 3, [("t", 1, -1, 0), ("nope", 0, -1, 0)])
    assert answers == [(ErrorCode.unknown_topic_or_partition, -1, -1)] * 2


async def test_only_the_leader_answers_except_for_debugging(state: BrokerState) -> None:
    part = state.replica_manager.get_partition("t", 0)
    assert part is not None
    part.leader_id = 2  # another broker leads now; this one still has the log
    (consumer,) = await end_offsets(state, 3, [("t", 0, -1, 3)])
    assert consumer == (ErrorCode.not_leader_or_follower, -1, -1)
    (debug,) = await end_offsets(state, 3, [("t", 0, -1, 3)], replica_id=-2)
    assert debug == (0, 3, 5)
