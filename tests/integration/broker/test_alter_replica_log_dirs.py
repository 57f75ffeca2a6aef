"""AlterReplicaLogDirs against a real broker with two ``log.dirs``, asked by kafka-python's
admin client (``alter_replica_log_dirs``) as ``kafka-reassign-partitions.sh`` asks it.

While a librdkafka producer keeps producing with acks=all, the partition moves from one dir to
the other: DescribeLogDirs lists it in the destination within a deadline, its data is there, a
consumer reads every acknowledged record exactly once and in offset order, and after a restart
the partition loads from its new dir. A broker killed during a move loses nothing either, and
the move completes after the restart. A
path that is not a log dir gets LOG_DIR_NOT_FOUND.

This module restarts its broker, so it has one of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import TopicPartitionReplica
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import LogDirNotFoundError, NoError

from ..broker_process import BrokerProcess, serving
from ..cluster.cluster_processes import Acked, BackgroundProducer, read_all

pytestmark = pytest.mark.integration

PREFILL = 20_000  # records acknowledged before the move: several segments to copy
MOVE_DEADLINE_S = 60.0
PRODUCER = {"acks": "all", "enable.idempotence": True}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    workdir = tmp_path_factory.mktemp("log-dirs-move")
    dirs = f"{workdir / 'a'},{workdir / 'b'}"
    process = BrokerProcess(workdir, {"log.dirs": dirs, "log.segment.bytes": "131072"})
    with serving(process):
        yield process


def admin_client(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)


def placement(admin: KafkaAdminClient, topic: str) -> dict[tuple[str, bool], int]:
    """(log dir, is future) -> size of the topic's partition 0 there, as DescribeLogDirs says."""
    (answer,) = admin.describe_log_dirs(topic_partitions={topic: [0]})
    return {(d["log_dir"], p["is_future_key"]): p["partition_size"]
            for d in answer["log_dirs"] for t in d["topics"] for p in t["partitions"]}


def wait_until(condition: Callable[[], object], what: str,
               timeout: float = MOVE_DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def other_dir(broker: BrokerProcess, source: str) -> str:
    (target,) = {str((broker.workdir / d).resolve()) for d in ("a", "b")} - {source}
    return target


def assert_read_back(broker: BrokerProcess, topic: str, acked: Acked) -> None:
    """Every acknowledged record, once each, in offset order, and the producer's order."""
    assert not acked.errors, acked.errors[:5]
    records = {offset: value for (_, offset), value in acked.records.items()}
    end = max(records) + 1
    assert sorted(records) == list(range(end)), "an acknowledged offset is missing"
    consumed = read_all(broker.bootstrap, topic, 1, end)[0]
    assert [offset for offset, _ in consumed] == list(range(end))
    assert dict(consumed) == records
    values = [value for _, value in consumed]
    assert values == sorted(values)


class TailingConsumer:
    """A consumer reading the topic from offset 0 in a thread for as long as it runs."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tail",
                                  "enable.auto.commit": False, "log_level": 0})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.read: list[tuple[int, bytes]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for message in self.consumer.consume(500, 0.2):
                    if message.error() is not None:
                        self.errors.append(str(message.error()))
                    else:
                        self.read.append((message.offset() or 0, message.value() or b""))
        finally:
            self.consumer.close()

    def stop(self) -> list[tuple[int, bytes]]:
        self._stop.set()
        self._thread.join(30)
        return self.read


def test_a_bad_path_is_log_dir_not_found(broker: BrokerProcess) -> None:
    with closing(admin_client(broker)) as admin:
        admin.create_topics([NewTopic("bad-path", 2, 1)])
        answer = admin.alter_replica_log_dirs({
            TopicPartitionReplica("bad-path", 0, 1): str(broker.workdir / "nowhere"),
            TopicPartitionReplica("bad-path", 1, 1): "a"})
    assert answer == {TopicPartitionReplica("bad-path", 0, 1): LogDirNotFoundError,
                      TopicPartitionReplica("bad-path", 1, 1): LogDirNotFoundError}


def test_a_partition_moves_while_a_producer_keeps_producing(broker: BrokerProcess) -> None:
    topic = "moving"
    with closing(admin_client(broker)) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        with BackgroundProducer(broker.bootstrap, topic, PRODUCER) as producer:
            wait_until(lambda: producer.acked.count() >= PREFILL, f"{PREFILL} acknowledged")
            ((source, future),) = placement(admin, topic)
            assert not future
            target = other_dir(broker, source)
            answer = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): target})
            assert answer == {TopicPartitionReplica(topic, 0, 1): NoError}
            tail = TailingConsumer(broker.bootstrap, topic)
            before, seen = producer.acked.count(), set()

            def moved() -> bool:  # polled: notes every placement DescribeLogDirs lists
                where = set(placement(admin, topic))
                seen.update(where)
                return where == {(target, False)}

            wait_until(moved, "the move to complete")
            moved_at = producer.acked.count()
            wait_until(lambda: producer.acked.count() > moved_at + 100, "appends after it")
            wait_until(lambda: len(tail.read) > PREFILL, "the consumer to read past the prefill")
            acked = producer.stop()
            read_during = tail.stop()
    print(f"{moved_at - before} records acknowledged during the move; DescribeLogDirs "
          f"listed {sorted(seen)}; a consumer read {len(read_during)} records meanwhile")
    # Reads went on throughout: one gapless run from offset 0, each the record acknowledged.
    assert not tail.errors, tail.errors[:5]
    assert [offset for offset, _ in read_during] == list(range(len(read_during)))
    assert len(read_during) > PREFILL
    records = {offset: value for (_, offset), value in acked.records.items()}
    assert all(records[offset] == value for offset, value in read_during)
    assert not (Path(source) / f"{topic}-0").exists()
    moved = Path(target) / f"{topic}-0"
    assert sum(p.stat().st_size for p in moved.glob("*.log")) > PREFILL * 10
    assert_read_back(broker, topic, acked)

    broker.restart()
    with closing(admin_client(broker)) as admin:
        assert set(placement(admin, topic)) == {(target, False)}
    assert not any(p.name.endswith("-future") for d in ("a", "b")
                   for p in (broker.workdir / d).iterdir())
    assert_read_back(broker, topic, acked)


@pytest.mark.parametrize("hard", [True, False], ids=["SIGKILL", "SIGTERM"])
def test_a_broker_stopped_during_a_move_keeps_every_acknowledged_record(
        broker: BrokerProcess, hard: bool) -> None:
    """SIGKILL (or SIGTERM: a clean shutdown, exit code 0) right after the move starts,
    wherever the copy or swap then is: after the restart the move completes (started again if
    the stop cut it off, as Kafka resumes it), the partition is in the destination only, no
    ``-future`` dir is left, and every acknowledged record is there."""
    topic = "killed" if hard else "stopped"
    with closing(admin_client(broker)) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        with BackgroundProducer(broker.bootstrap, topic, PRODUCER) as producer:
            wait_until(lambda: producer.acked.count() >= PREFILL, f"{PREFILL} acknowledged")
            acked = producer.stop()
        ((source, _),) = placement(admin, topic)
        target = other_dir(broker, source)
        answer = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): target})
        assert answer == {TopicPartitionReplica(topic, 0, 1): NoError}
    assert broker.restart(hard=hard) == (-9 if hard else 0)
    with closing(admin_client(broker)) as admin:
        wait_until(lambda: set(placement(admin, topic)) == {(target, False)},
                   f"{topic}-0 only in {target} after the restart")
    homes = [d for d in ("a", "b") if (broker.workdir / d / f"{topic}-0").is_dir()]
    leftovers = [p.name for d in ("a", "b") for p in (broker.workdir / d).iterdir()
                 if p.name.startswith(f"{topic}-0.")]
    print(f"after the {'kill' if hard else 'stop'} {topic}-0 (moving from {Path(source).name} to "
          f"{Path(target).name}) is in {homes}; left over: {leftovers}")
    assert homes == [Path(target).name] and not [n for n in leftovers
                                                 if n.endswith("-future")]
    assert_read_back(broker, topic, acked)
