"""Storage robustness against a real broker process on loopback (confluent-kafka / librdkafka):

- a segment damaged on disk after a clean shutdown (a torn last batch; a partition whose log
  cannot be opened at all) no longer stops the broker: it starts, recovers the torn partition,
  takes only the unloadable one offline with one error line and no traceback, and serves the rest;
- a topic one partition beyond the capacity (18,721 partitions under a 20,000-descriptor limit:
  one descriptor each plus the pool of inactive segments' descriptors; 10,001 when a partition
  was budgeted two) is refused at once with POLICY_VIOLATION naming the limit, while 4,000
  partitions are hosted within it (about one descriptor each) and the broker keeps answering;
- a broker out of descriptors (a flood of connections: EMFILE in accept) keeps serving once
  they are closed, without tracebacks.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strata.broker.partition_capacity import derived_capacity
from strata.storage import record_batch as rb

from ..broker_process import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CLIENT_TIMEOUT_S = 30.0
RECORDS = 40


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path, {"num.partitions": "3"})
    b.start()
    yield b
    if b.is_running():
        b.stop()


def create_topic(bootstrap: str, name: str, partitions: int) -> KafkaException | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(name, partitions, 1)],
                                 operation_timeout=CLIENT_TIMEOUT_S,
                                 request_timeout=CLIENT_TIMEOUT_S)[name]
    try:
        future.result(timeout=CLIENT_TIMEOUT_S * 2)
    except KafkaException as exc:
        return exc
    return None


def produce(bootstrap: str, topic: str, partition: int, count: int) -> list[int]:
    """Offsets of ``count`` records appended to ``partition`` (acks=all); [] if refused."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": 8000, "enable.idempotence": False})
    offsets: list[int] = []

    def report(err: KafkaError | None, msg: object) -> None:
        if err is None:
            offsets.append(msg.offset())  # type: ignore[attr-defined]

    for i in range(count):
        producer.produce(topic, value=b"value-%d" % i, partition=partition, on_delivery=report)
        producer.poll(0)  # one batch per record: a segment of many small batches
        producer.flush(CLIENT_TIMEOUT_S)
    producer.flush(CLIENT_TIMEOUT_S)
    return offsets


def consume_offsets(bootstrap: str, topic: str, partition: int, end: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False, "check.crcs": True})
    consumer.assign([TopicPartition(topic, partition, 0)])
    got: list[int] = []
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    try:
        while (not got or got[-1] < end - 1) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.offset())
    finally:
        consumer.close()
    return got


def test_damaged_segments_after_a_clean_shutdown_do_not_stop_the_broker(
        broker: BrokerProcess) -> None:
    topic = "damaged"
    assert create_topic(broker.bootstrap, topic, 3) is None
    for partition in range(3):
        assert len(produce(broker.bootstrap, topic, partition, RECORDS)) == RECORDS
    assert broker.stop() == 0
    # Partition 0: the last batch torn in half ("record batch truncated: 97 of 195 bytes").
    seg0 = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))[-1]
    position, last = list(rb.iter_headers(seg0.read_bytes()))[-1]
    os.truncate(seg0, position + last.size // 2)
    # Partition 1: its .log cannot even be opened.
    seg1 = sorted((broker.data_dir / f"{topic}-1").glob("*.log"))[-1]
    seg1.unlink()
    seg1.mkdir()
    log_start = broker.log_path.stat().st_size

    broker.start()  # ready, instead of "exit 1" on every retry

    assert consume_offsets(broker.bootstrap, topic, 0, last.base_offset) == \
        list(range(last.base_offset))
    assert produce(broker.bootstrap, topic, 0, 1) == [last.base_offset]
    assert produce(broker.bootstrap, topic, 2, 1) == [RECORDS]
    assert consume_offsets(broker.bootstrap, topic, 2, RECORDS + 1) == list(range(RECORDS + 1))
    said = broker.log_path.read_text()[log_start:]
    errors = [line for line in said.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and f"{topic}-1" in errors[0], said
    assert "Traceback" not in said
    assert broker.stop() == 0


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_partitions_beyond_capacity_are_refused_and_thousands_fit(
        broker: BrokerProcess) -> None:
    pid = broker.pid
    assert pid is not None
    beyond = derived_capacity(resource.prlimit(pid, resource.RLIMIT_NOFILE)[0]) + 1
    started = time.monotonic()
    refused = create_topic(broker.bootstrap, "too-many", beyond)
    assert refused is not None and time.monotonic() - started < 10
    error = refused.args[0]
    assert error.code() == KafkaError.POLICY_VIOLATION, error
    assert "file descriptors" in error.str(), error.str()
    base = open_descriptors(pid)
    assert create_topic(broker.bootstrap, "many", 4_000) is None
    held = open_descriptors(pid) - base
    assert held <= 4_000 + 100, f"{held} descriptors for 4,000 partitions"
    assert produce(broker.bootstrap, "many", 3_999, 1) == [0]
    assert broker.stop() == 0
    broker.start()
    pid = broker.pid
    assert pid is not None
    assert open_descriptors(pid) <= 4_000 + 200
    assert produce(broker.bootstrap, "many", 3_999, 1) == [1]


LOWERED_LIMIT = 1_500


def test_running_out_of_descriptors_never_stalls_the_broker(tmp_path: Path) -> None:
    """A broker whose limit drops to 1,500 descriptors: its capacity follows the limit (220
    partitions: 1,500 less 1,024 reserved and 256 for the inactive segments' pool; the limit
    was 1,200 when a partition was budgeted two descriptors and no pool), and a flood of
    connections that exhausts its descriptors (EMFILE in accept) leaves it serving."""
    broker = BrokerProcess(tmp_path)
    broker.start()
    pid = broker.pid
    assert pid is not None
    try:  # the running broker's limit only (the test process keeps its own)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (LOWERED_LIMIT, LOWERED_LIMIT))
    except (ValueError, OSError) as exc:
        broker.stop()
        if os.environ.get("CI"):  # CI runs as root: the limit can always be lowered there
            pytest.fail(f"cannot lower the broker's open file limit in CI: {exc}")
        pytest.skip(f"cannot lower the broker's open file limit: {exc}")
    try:
        assert create_topic(broker.bootstrap, "fits", 50) is None
        refused = create_topic(broker.bootstrap, "too-many", 200)
        assert refused is not None
        assert refused.args[0].code() == KafkaError.POLICY_VIOLATION
        host, port = broker.bootstrap.split(":")
        flood: list[socket.socket] = []
        try:
            for _ in range(LOWERED_LIMIT + 200):
                sock = socket.socket()
                sock.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    sock.connect((host, int(port)))
                flood.append(sock)
            deadline = time.monotonic() + CLIENT_TIMEOUT_S
            while open_descriptors(pid) < LOWERED_LIMIT - 10 and time.monotonic() < deadline:
                time.sleep(0.05)  # polls the broker's accept progress against a deadline
            assert open_descriptors(pid) >= LOWERED_LIMIT - 10, \
                "the flood did not exhaust the broker"
        finally:
            for sock in flood:
                sock.close()
        assert produce(broker.bootstrap, "fits", 49, 1) == [0]
        said = broker.log_path.read_text()
        assert "Traceback" not in said, said[-3000:]
    finally:
        assert broker.stop() == 0
