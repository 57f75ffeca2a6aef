"""DeleteTopics drops every group's committed offsets of the deleted partitions, durably."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers.delete_topics import delete_topic
from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock

from .helpers import add_topics, group_broker_state, restarted_group_broker_state
from .test_group_handlers import call, commit_fields

CONFIG = {"offsets_topic_num_partitions": "5"}


@pytest.fixture
async def state(tmp_path: Path) -> AsyncIterator[BrokerState]:
    state = group_broker_state(tmp_path, ManualClock(), **CONFIG)
    await add_topics(state, ("t", 2), ("u", 1))
    await state.group_coordinator.startup(run_timers=False)
    assert (await call(state, ApiKey.FIND_COORDINATOR, 2, key="g",
                       key_type=0)).error_code == ErrorCode.none
    yield state
    await state.group_coordinator.shutdown()
    state.log_manager.shutdown()


async def committed(state: BrokerState, group: str) -> dict[tuple[str, int], int]:
    response: Any = await call(state, ApiKey.OFFSET_FETCH, 5, group_id=group, topics=None,
                               require_stable=False)
    assert response.error_code == ErrorCode.none
    return {(t.name, p.partition_index): p.committed_offset
            for t in response.topics for p in t.partitions}


async def test_deleted_topic_offsets_are_gone_and_stay_gone(state: BrokerState,
                                                            tmp_path: Path) -> None:
    for group in ("g", "h"):
        answer = await call(state, ApiKey.OFFSET_COMMIT, 7,
                            **commit_fields(7, ("t", 0, 3), ("t", 1, 4), ("u", 0, 5),
                                            group_id=group))
        assert all(p.error_code == 0 for t in answer.topics for p in t.partitions)
    await delete_topic(state, "t")
    assert await committed(state, "g") == {("u", 0): 5}
    assert await committed(state, "h") == {("u", 0): 5}

    await state.group_coordinator.shutdown()
    again = restarted_group_broker_state(state, tmp_path, **CONFIG)
    await again.group_coordinator.startup(run_timers=False)
    await again.group_coordinator.wait_loaded()
    try:
        assert await committed(again, "g") == {("u", 0): 5}  # the tombstones were replayed
    finally:
        await again.group_coordinator.shutdown()
        again.log_manager.shutdown()
