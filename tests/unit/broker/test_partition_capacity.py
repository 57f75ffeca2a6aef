"""Partition capacity: CreateTopics, CreatePartitions and Metadata's auto-creation
refuse, with POLICY_VIOLATION and a message naming the limit, what this broker cannot hold;
the limit derives from the open file limit, and ``strata.max.partitions.per.broker`` can only
lower it."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from strata.broker.partition_capacity import (
    DESCRIPTORS_PER_PARTITION,
    RESERVED_DESCRIPTORS,
    current_capacity,
    derived_capacity,
    raise_open_file_limit,
    replicas_here,
)
from strata.protocol.error_codes import ErrorCode
from strata.storage.descriptor_pool import DESCRIPTOR_POOL, MAX_OPEN_INACTIVE_SEGMENTS

from .helpers import broker_state
from .test_topic_handlers import create, get_metadata, grow, topic

POLICY_VIOLATION = 44


def test_capacity_derives_from_the_descriptor_limit() -> None:
    assert ErrorCode.policy_violation == POLICY_VIOLATION
    pool = DESCRIPTOR_POOL.max_open
    assert derived_capacity(20_000) == \
        (20_000 - RESERVED_DESCRIPTORS - pool) // DESCRIPTORS_PER_PARTITION
    assert derived_capacity(20_000) >= 4_000  # thousands of partitions per broker
    # One descriptor per partition at rest, 256 for inactive segments: issue 23's 10,000
    # partitions fit a 20,000 limit (9,488 did at 2 per partition, without the pool).
    assert DESCRIPTORS_PER_PARTITION == 1 and pool == MAX_OPEN_INACTIVE_SEGMENTS == 256
    assert derived_capacity(20_000) == 18_720
    assert derived_capacity(20_000, pool_size=1_000) == 17_976
    assert derived_capacity(100) == 0
    assert current_capacity("10").limit == 10
    assert current_capacity("10000000").limit == current_capacity(None).limit  # only lowers


def test_replicas_here_is_this_brokers_share() -> None:
    assert replicas_here(1, 10, 1, 1) == 10
    assert replicas_here(1, 10, 3, 3) == 10
    assert replicas_here(1, 10, 1, 3) == 4
    assert replicas_here(2, 3, 2, 3, [[1, 2], [2, 3], [3, 1]]) == 2


def test_raise_open_file_limit_reaches_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard > 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard - 1, hard))
    try:
        new_soft, new_hard = raise_open_file_limit()
        assert new_hard == hard
        assert new_soft == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert hard == resource.RLIM_INFINITY or new_soft == hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, resource.getrlimit(
            resource.RLIMIT_NOFILE)[0]), hard))


async def test_create_topics_beyond_the_capacity_is_a_policy_violation(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    limit = current_capacity(None).limit
    result = await create(state, topic("huge", limit + 1, 1))
    code, message = result["huge"]
    assert code == ErrorCode.policy_violation
    assert message is not None and str(limit) in message and "file descriptors" in message
    assert state.topic_store.get("huge") is None
    assert not state.log_manager.all_logs()
    result = await create(state, topic("huge", limit + 1, 1), validate_only=True)
    assert result["huge"][0] == ErrorCode.policy_violation


@pytest.mark.parametrize("how", ["create", "grow", "auto"])
async def test_configured_limit_refuses_creations(tmp_path: Path, how: str) -> None:
    state = broker_state(tmp_path, strata_max_partitions_per_broker="5",
                         num_partitions="3", auto_create_topics_enable="true")
    assert (await create(state, topic("a", 3, 1)))["a"] == (ErrorCode.none, None)
    if how == "create":
        code, message = (await create(state, topic("b", 3, 1)))["b"]
    elif how == "grow":
        code, message = await grow(state, "a", 6)
    else:
        response = await get_metadata(state, ["b"])
        (answer,) = response.topics
        code, message = answer.error_code, "strata.max.partitions.per.broker=5"
    assert code == ErrorCode.policy_violation
    assert message is not None and "strata.max.partitions.per.broker=5" in message
    assert len(state.log_manager.all_logs()) == 3
    assert (await create(state, topic("c", 2, 1)))["c"] == (ErrorCode.none, None)
