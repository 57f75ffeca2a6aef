"""TopicStore: Kafka's topic-name rules and the versioned JSON registry file."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from strata.broker.topic_store import (
    FORMAT_VERSION,
    TOPIC_STORE_FILE_NAME,
    FileTopicStore,
    TopicExistsError,
    TopicRecord,
    TopicStore,
    TopicStoreError,
    UnknownTopicError,
    colliding_topic,
    invalid_topic_name_reason,
    new_topic_id,
)


@pytest.mark.parametrize(
    "name", ["a", "orders", "Orders.v2", "under_score", "da-sh", "x" * 249, "__consumer_offsets",
             "...", "0"],
)
def test_legal_topic_names(name: str) -> None:
    assert invalid_topic_name_reason(name) is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "can't be empty"),
        (None, "can't be empty"),
        (".", "cannot be"),
        ("..", "cannot be"),
        ("x" * 250, "longer than 249"),
        ("a b", "illegal"),
        ("a/b", "illegal"),
        ("t\u00e9", "illegal"),
        ("a:b", "illegal"),
    ],
)
def test_illegal_topic_names(name: str | None, reason: str) -> None:
    message = invalid_topic_name_reason(name)
    assert message is not None and reason in message


def test_dot_and_underscore_collide() -> None:
    existing = {"a.b": 1, "c": 2}
    assert colliding_topic("a_b", existing) == "a.b"
    assert colliding_topic("a.b", existing) is None  # itself
    assert colliding_topic("c", existing) is None
    assert colliding_topic("x_y", existing) is None


def test_topic_ids_are_random_and_not_reserved() -> None:
    ids = {new_topic_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(i.int >= 100 for i in ids)


async def test_round_trip_through_the_file(tmp_path: Path) -> None:
    store = FileTopicStore.open(tmp_path)
    assert not store.existed and store.topics() == {}
    record = TopicRecord.new("orders", 3, 1, {"retention.ms": "1000"})
    await store.create_topic(record)
    await store.set_partition_count("orders", 5)
    await store.set_leader_epoch("orders", 4, 2)
    await store.set_broker_configs("", {"log.retention.ms": "5"})
    await store.set_broker_configs("1", {"log.segment.bytes": "2048"})

    again = FileTopicStore.open(tmp_path)
    assert again.existed
    loaded = again.get("orders")
    assert loaded is not None
    assert loaded.topic_id == record.topic_id
    assert loaded.partitions == 5
    assert loaded.leader_epochs == (0, 0, 0, 0, 2)
    assert dict(loaded.configs) == {"retention.ms": "1000"}
    assert dict(again.broker_configs("")) == {"log.retention.ms": "5"}
    assert dict(again.broker_configs("1")) == {"log.segment.bytes": "2048"}
    assert dict(again.broker_configs("2")) == {}
    doc = json.loads((tmp_path / TOPIC_STORE_FILE_NAME).read_text())
    assert doc["version"] == FORMAT_VERSION


async def test_writes_keep_their_invariants(tmp_path: Path) -> None:
    store: TopicStore = FileTopicStore.open(tmp_path)
    await store.create_topic(TopicRecord.new("t", 2, 1))
    with pytest.raises(TopicExistsError):
        await store.create_topic(TopicRecord.new("t", 1, 1))
    with pytest.raises(ValueError, match="cannot shrink"):
        await store.set_partition_count("t", 1)
    with pytest.raises(UnknownTopicError):
        await store.set_topic_configs("nope", {})
    deleted = await store.delete_topic("t")
    assert deleted.name == "t" and store.get("t") is None
    with pytest.raises(UnknownTopicError):
        await store.delete_topic("t")
    await store.set_broker_configs("", {"log.retention.ms": "1"})
    await store.set_broker_configs("", {})
    assert dict(store.broker_configs("")) == {}


async def test_failed_write_changes_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = FileTopicStore(blocker / "sub" / TOPIC_STORE_FILE_NAME, {}, {}, existed=False)
    with pytest.raises(OSError):
        await store.create_topic(TopicRecord.new("t", 1, 1))
    assert store.topics() == {}


def test_newer_format_is_refused(tmp_path: Path) -> None:
    (tmp_path / TOPIC_STORE_FILE_NAME).write_text(
        json.dumps({"version": FORMAT_VERSION + 1, "topics": {}, "broker_configs": {}}))
    with pytest.raises(TopicStoreError, match="format version"):
        FileTopicStore.open(tmp_path)


@pytest.mark.parametrize(
    "text",
    [
        "{",
        "[]",
        json.dumps({"version": 1}),
        json.dumps({"version": 1, "topics": {"t": {"topic_id": "zz"}}, "broker_configs": {}}),
        json.dumps({"version": "1", "topics": {}, "broker_configs": {}}),
    ],
)
def test_malformed_file_is_refused_not_forgotten(tmp_path: Path, text: str) -> None:
    (tmp_path / TOPIC_STORE_FILE_NAME).write_text(text)
    with pytest.raises(TopicStoreError, match="malformed"):
        FileTopicStore.open(tmp_path)


def test_record_new_starts_every_partition_at_epoch_zero() -> None:
    record = TopicRecord.new("t", 4, 1)
    assert record.leader_epochs == (0, 0, 0, 0)
    assert isinstance(record.topic_id, uuid.UUID)
