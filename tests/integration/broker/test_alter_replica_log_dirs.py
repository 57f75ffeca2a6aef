"""AlterReplicaLogDirs against a real broker with two ``log.dirs``, asked by kafka-python's
admin client (``alter_replica_log_dirs``) as ``kafka-reassign-partitions.sh`` asks it.

While a librdkafka producer keeps producing with acks=all, the partition moves from one dir to
the other: DescribeLogDirs lists it in the destination within a deadline, its data is there, a
consumer reads every acknowledged record exactly once and in offset order, and after a restart
the partition loads from its new dir. A path that is not a log dir gets LOG_DIR_NOT_FOUND.

This module restarts its broker, so it has one of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from kafka import TopicPartitionReplica
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import LogDirNotFoundError, NoError

from ..broker_process import BrokerProcess, serving

pytestmark = pytest.mark.integration

TOPIC = "moving"
PREFILL = 20_000  # records before the move: several segments to copy
MOVE_DEADLINE_S = 60.0
CONSUME_DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    workdir = tmp_path_factory.mktemp("log-dirs-move")
    dirs = f"{workdir / 'a'},{workdir / 'b'}"
    process = BrokerProcess(workdir, {"log.dirs": dirs, "log.segment.bytes": "262144"})
    with serving(process):
        yield process


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = admin_client(broker)
    yield client
    client.close()


def admin_client(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)


def placement(admin: KafkaAdminClient, topic: str = TOPIC) -> dict[tuple[str, bool], int]:
    """(log dir, is future) -> size of the topic's partition 0 there, as DescribeLogDirs says."""
    (answer,) = admin.describe_log_dirs(topic_partitions={topic: [0]})
    return {(d["log_dir"], p["is_future_key"]): p["partition_size"]
            for d in answer["log_dirs"] for t in d["topics"] for p in t["partitions"]}


class AckedProducer:
    """An idempotent acks=all producer in a thread; records what was acknowledged where."""

    def __init__(self, bootstrap: str, topic: str = TOPIC) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5, "log_level": 0})
        self.acked: dict[int, bytes] = {}
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            offset = msg.offset()
            assert offset is not None and offset not in self.acked, f"offset {offset} twice"
            self.acked[offset] = msg.value() or b""

    def produce(self, count: int) -> None:
        for _ in range(count):
            self._send_one()
        assert self.producer.flush(60) == 0

    def _send_one(self) -> None:
        while True:
            try:
                self.producer.produce(self.topic, value=b"v-%08d" % self.sent + b"." * 200,
                                      partition=0, on_delivery=self._on_delivery)
                break
            except BufferError:
                self.producer.poll(0.1)
        self.sent += 1
        self.producer.poll(0)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._send_one()
            if self.sent % 50 == 0:
                self.producer.poll(0.01)  # a steady rate the mover can overtake

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(60) == 0


def consume_all(bootstrap: str, end: int, topic: str = TOPIC) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + CONSUME_DEADLINE_S
    try:
        while len(out) < end:
            assert time.monotonic() < deadline, f"consumed {len(out)} of {end} records"
            for msg in consumer.consume(1000, 1.0):
                assert msg.error() is None, msg.error()
                offset = msg.offset()
                assert offset is not None
                out.append((offset, msg.value() or b""))
    finally:
        consumer.close()
    return out


def test_a_bad_path_is_log_dir_not_found(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("bad-path", 2, 1)])
    answer = admin.alter_replica_log_dirs({
        TopicPartitionReplica("bad-path", 0, 1): str(broker.workdir / "nowhere"),
        TopicPartitionReplica("bad-path", 1, 1): "a"})
    assert answer == {TopicPartitionReplica("bad-path", 0, 1): LogDirNotFoundError,
                      TopicPartitionReplica("bad-path", 1, 1): LogDirNotFoundError}


def test_a_partition_moves_while_a_producer_keeps_producing(
        broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic(TOPIC, 1, 1)])
    producer = AckedProducer(broker.bootstrap)
    producer.produce(PREFILL)
    ((source, future),) = placement(admin)
    assert not future
    (target,) = {str((broker.workdir / d).resolve()) for d in ("a", "b")} - {source}

    producer.start()
    answer = admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, 1): target})
    assert answer == {TopicPartitionReplica(TOPIC, 0, 1): NoError}
    seen_future = False
    deadline = time.monotonic() + MOVE_DEADLINE_S
    while set(where := placement(admin)) != {(target, False)}:
        seen_future |= (target, True) in where
        assert time.monotonic() < deadline, f"the move did not complete: {where}"
        time.sleep(0.05)  # polling DescribeLogDirs
    producer.produce(100)  # a few more after the swap, then stop
    producer.stop()
    assert not producer.failed, producer.failed[:5]
    print(f"moved with {producer.sent - PREFILL} records produced during the move; "
          f"future replica seen by DescribeLogDirs: {seen_future}")

    assert not (Path(source) / f"{TOPIC}-0").exists()
    moved = Path(target) / f"{TOPIC}-0"
    assert sum(p.stat().st_size for p in moved.glob("*.log")) > PREFILL * 200
    end = max(producer.acked) + 1
    assert sorted(producer.acked) == list(range(end)), "an acknowledged offset is missing"
    consumed = consume_all(broker.bootstrap, end)
    assert [offset for offset, _ in consumed] == list(range(end))  # once each, in order
    assert dict(consumed) == producer.acked
    values = [value for _, value in consumed]
    assert values == sorted(values)  # the producer's order

    admin.close()  # its connections would break with the restart
    broker.restart()
    with closing(admin_client(broker)) as again:
        assert set(placement(again)) == {(target, False)}
    assert not any(p.name.endswith("-future") for d in ("a", "b")
                   for p in (broker.workdir / d).iterdir())
    assert dict(consume_all(broker.bootstrap, end)) == producer.acked


def test_a_broker_killed_during_a_move_keeps_every_acknowledged_record(
        broker: BrokerProcess) -> None:
    """SIGKILL right after the move starts, wherever the copy or swap then is: after the
    restart the partition is in exactly one dir, no ``-future`` dir is left, and every
    acknowledged record is there."""
    topic = "killed"
    with closing(admin_client(broker)) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        producer = AckedProducer(broker.bootstrap, topic)
        producer.produce(PREFILL)
        ((source, _),) = placement(admin, topic)
        (target,) = {str((broker.workdir / d).resolve()) for d in ("a", "b")} - {source}
        answer = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): target})
        assert answer == {TopicPartitionReplica(topic, 0, 1): NoError}
    assert broker.kill() == -9
    broker.start()
    homes = [d for d in ("a", "b") if (broker.workdir / d / f"{topic}-0").is_dir()]
    leftovers = [p.name for d in ("a", "b") for p in (broker.workdir / d).iterdir()
                 if p.name.startswith(f"{topic}-0.")]
    print(f"after the kill {topic}-0 (moving from {Path(source).name} to {Path(target).name}) "
          f"is in {homes}; left over: {leftovers}")
    assert len(homes) == 1 and not [n for n in leftovers if n.endswith("-future")]
    end = max(producer.acked) + 1
    assert dict(consume_all(broker.bootstrap, end, topic)) == producer.acked
