"""Recovery of a broker killed with transactions open: after kill -9, a torn tail on every
partition's active segment, half of each ``.txnindex`` cut off and the producer snapshots
deleted, the restarted broker rebuilds the transaction index and the producer state from the
log, and read_committed answers are unchanged: the same last stable offsets, the same committed
records. The transaction still open at the crash stays invisible until its producer, which
lived through the broker's restart, commits it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strata.protocol import ApiKey, ErrorCode

from ..broker_process import BrokerProcess
from ..clients.wire import KafkaWire
from .test_transaction_coordinator import OVERRIDES
from .test_transactions_v2 import read_committed

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STEP_S: Final = 15.0
PARTITIONS: Final = 2
MakeBroker = Callable[[Mapping[str, str] | None], BrokerProcess]


def create_topic(bootstrap: str) -> str:
    """Small segments, so aborts land in rolled segments whose ``.txnindex`` is on disk."""
    topic = f"rec.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"segment.bytes": "400"})])[
        topic].result(STEP_S)
    return topic


def producer(bootstrap: str, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                  "message.timeout.ms": 30_000, "transaction.timeout.ms": 120_000})
    p.init_transactions(STEP_S)
    return p


def transaction(p: Producer, topic: str, values: list[bytes], *, commit: bool) -> None:
    p.begin_transaction()
    for i, value in enumerate(values):
        p.produce(topic, value, partition=i % PARTITIONS)
    if commit:
        p.commit_transaction(STEP_S)
    else:
        assert p.flush(STEP_S) == 0  # in the log before the abort (else never sent at all)
        p.abort_transaction(STEP_S)


def offsets(bootstrap: str, topic: str) -> dict[str, list[int]]:
    """Per partition: the high watermark (read_uncommitted) and the last stable offset."""
    answer: dict[str, list[int]] = {}
    with KafkaWire.to(bootstrap, timeout=STEP_S) as wire:
        for name, level in (("hw", 0), ("lso", 1)):
            response = wire.request(ApiKey.LIST_OFFSETS, 5, {
                "replica_id": -1, "isolation_level": level, "topics": [{
                    "name": topic, "partitions": [
                        {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                        for p in range(PARTITIONS)]}]})
            parts = sorted(response.topics[0].partitions, key=lambda p: p.partition_index)
            assert {p.error_code for p in parts} == {ErrorCode.none}
            answer[name] = [int(p.offset) for p in parts]
    return answer


def read_committed_sorted(bootstrap: str, topic: str, want: int) -> list[bytes]:
    return sorted(read_committed(bootstrap, topic, PARTITIONS, want))


def damage(data_dir: Path, topic: str) -> list[str]:
    """A torn tail on each partition's last segment, each ``.txnindex`` cut in half, the
    producer snapshots gone; what was done, for the report."""
    done = []
    for p in range(PARTITIONS):
        partition_dir = data_dir / f"{topic}-{p}"
        last = sorted(partition_dir.glob("*.log"))[-1]
        with last.open("ab") as f:
            f.write(b"\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x01\x00torn")
        done.append(f"torn {last.name}")
        for index in partition_dir.glob("*.txnindex"):
            size = index.stat().st_size
            with index.open("r+b") as f:
                f.truncate(size // 2)
            done.append(f"{index.name} {size} -> {size // 2} bytes")
        for snapshot in partition_dir.glob("*.snapshot"):
            snapshot.unlink()
            done.append(f"deleted {snapshot.name}")
    return done


def test_read_committed_answers_survive_a_crash_with_torn_segments(
        make_broker: MakeBroker) -> None:
    broker = make_broker(OVERRIDES)
    topic = create_topic(broker.bootstrap)
    done = producer(broker.bootstrap, f"rec-done-{uuid.uuid4().hex[:6]}")
    committed = [f"c{i}".encode() for i in range(80)]
    for round_ in range(4):
        transaction(done, topic, committed[round_ * 20:round_ * 20 + 20], commit=True)
        transaction(done, topic, [f"a{round_}-{i}".encode() for i in range(20)], commit=False)
    opened = producer(broker.bootstrap, f"rec-open-{uuid.uuid4().hex[:6]}")
    opened.begin_transaction()
    for i in range(6):
        opened.produce(topic, f"o{i}".encode(), partition=i % PARTITIONS)
    assert opened.flush(STEP_S) == 0  # written, not committed
    before = offsets(broker.bootstrap, topic)
    assert before["lso"] != before["hw"]  # the open transaction holds the LSO
    assert read_committed_sorted(broker.bootstrap, topic, len(committed)) == sorted(committed)

    broker.kill()
    damaged = damage(broker.data_dir, topic)
    print("damage:", damaged)
    assert any("txnindex" in d for d in damaged)  # rolled segments indexed their aborts
    broker.start()

    assert offsets(broker.bootstrap, topic) == before
    assert read_committed_sorted(broker.bootstrap, topic, len(committed)) == sorted(committed)
    # The producer of the open transaction outlived the crash: its commit lands now.
    opened.commit_transaction(STEP_S)
    after = sorted(committed + [f"o{i}".encode() for i in range(6)])
    assert read_committed_sorted(broker.bootstrap, topic, len(after)) == after
    final = offsets(broker.bootstrap, topic)
    assert final["lso"] == final["hw"]
