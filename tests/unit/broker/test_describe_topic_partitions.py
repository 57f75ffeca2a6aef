"""DescribeTopicPartitions v0: topics sorted by name, partitions in pages with a cursor, and
Kafka's errors, through kio's encoder and decoder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from strata.broker.handlers import describe_topic_partitions
from strata.protocol import ApiKey, encode_response
from strata.protocol.codec import decode_response
from strata.protocol.error_codes import ErrorCode

from .helpers import add_topics, broker_state, context, request


async def _ask(state: Any, topics: list[str], limit: int,
               cursor: tuple[str, int] | None = None) -> Any:
    ctx = context(state, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0)
    body = request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0,
                   topics=[{"name": t} for t in topics], response_partition_limit=limit,
                   cursor=None if cursor is None else {"topic_name": cursor[0],
                                                       "partition_index": cursor[1]})
    response = await describe_topic_partitions.handle(ctx, body)
    _, decoded = decode_response(encode_response(ctx.header, response)[4:],
                                 ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0)
    assert decoded == response
    return decoded


def _page(response: Any) -> tuple[list[tuple[str, int]], tuple[str, int] | None]:
    listed = [(t.name, p.partition_index) for t in response.topics for p in t.partitions]
    cursor = response.next_cursor
    return listed, None if cursor is None else (cursor.topic_name, cursor.partition_index)


async def test_pages_follow_the_cursor_across_topics(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await add_topics(state, ("b", 2), ("a", 3))
    first = await _ask(state, [], 2)
    assert _page(first) == ([("a", 0), ("a", 1)], ("a", 2))
    assert all(t.topic_id is not None and t.error_code == 0 for t in first.topics)
    second = await _ask(state, [], 2, ("a", 2))
    assert _page(second) == ([("a", 2), ("b", 0)], ("b", 1))
    third = await _ask(state, [], 2, ("b", 1))
    assert _page(third) == ([("b", 1)], None)
    leader = third.topics[0].partitions[0]
    assert (leader.leader_id, leader.replica_nodes, leader.eligible_leader_replicas) == (
        1, (1,), ())


async def test_unknown_topics_and_a_cursor_outside_the_request(tmp_path: Path) -> None:
    state = broker_state(tmp_path)
    await add_topics(state, ("a", 1))
    answer = await _ask(state, ["zz", "a"], 10)
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("a", ErrorCode.none), ("zz", ErrorCode.unknown_topic_or_partition)]
    refused = await _ask(state, ["a"], 10, ("other", 0))
    assert [(t.name, t.error_code) for t in refused.topics] == [("a", ErrorCode.invalid_request)]
