"""Nothing acknowledged is lost when the broker restarts, gracefully or not.

The storage rule: a produce is acknowledged only after its bytes reached the OS, so a killed
broker process loses nothing acknowledged (fsync only matters for an OS crash). Checked with
librdkafka (confluent-kafka), the client with the most careful delivery reports:

- SIGTERM: the broker exits 0, and after a restart every acknowledged record is at its offset;
- SIGTERM or SIGKILL while a producer is sending: every record whose delivery report said
  "appended at (partition, offset)", before or after the restart, is there, and no two
  reports name the same (partition, offset);
- appends after a restart continue the offsets.

This module restarts its broker, so it has one of its own.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer

from ..broker_process import BrokerProcess
from .drivers.confluent_driver import ConfluentKafkaDriver, delivery_of
from .model import (
    ConsumedRecord,
    Delivery,
    OutRecord,
    ProduceOptions,
    expected_end_offsets,
    keyed_record,
    keyed_records,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
STOP_AFTER_ACKED = 200  # records acknowledged before the signal lands
PRODUCE_DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def client(broker: BrokerProcess) -> ConfluentKafkaDriver:
    return ConfluentKafkaDriver(broker.bootstrap)


@pytest.fixture
def topic(client: ConfluentKafkaDriver) -> Iterator[str]:
    name = f"restart.{uuid.uuid4().hex[:8]}"
    client.create_topic(name, PARTITIONS)
    yield name


def read_back(
    client: ConfluentKafkaDriver, topic: str, deliveries: Sequence[Delivery]
) -> dict[tuple[int, int], ConsumedRecord]:
    ends = expected_end_offsets(deliveries)
    consumed = client.consume(topic, {p: ends.get(p, 0) for p in range(PARTITIONS)})
    positions = [(m.partition, m.offset) for m in consumed]
    assert len(positions) == len(set(positions)), "a record was read twice"
    return dict(zip(positions, consumed, strict=True))


def assert_all_present(
    records: Sequence[OutRecord],
    deliveries: Sequence[Delivery],
    found: dict[tuple[int, int], ConsumedRecord],
    when: str,
) -> None:
    lost = [
        (d.partition, d.offset)
        for r, d in zip(records, deliveries, strict=True)
        if (got := found.get((d.partition, d.offset))) is None or got.value != r.value
    ]
    assert not lost, f"{when}: {len(lost)} acknowledged records lost or changed: {lost[:10]}"


def test_sigterm_restart_keeps_every_acknowledged_record(
    broker: BrokerProcess, client: ConfluentKafkaDriver, topic: str
) -> None:
    records = keyed_records(60, tag="term")
    deliveries = client.produce(topic, records, ProduceOptions(compression="lz4"))
    code = broker.restart()
    assert code == 0, f"SIGTERM shutdown exit code {code}\n{broker.log_tail()}"
    assert client.partition_count(topic) == PARTITIONS, "topic lost across the restart"
    assert_all_present(records, deliveries, read_back(client, topic, deliveries), "after SIGTERM")

    more = keyed_records(30, tag="term-after", base_timestamp=1_700_100_000_000)
    later = client.produce(topic, more)
    ends_before = expected_end_offsets(deliveries)
    for d in later:
        assert d.offset >= ends_before.get(d.partition, 0), f"offset reused after restart: {d}"
    all_records, all_deliveries = [*records, *more], [*deliveries, *later]
    assert_all_present(
        all_records, all_deliveries, read_back(client, topic, all_deliveries), "appended after"
    )


class BackgroundProducer:
    """A librdkafka producer sending keyed records until told to stop; records every ack."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: list[tuple[OutRecord, Delivery]] = []
        self.failed: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "enable.idempotence": False,
            "message.timeout.ms": 20_000,  # outlives the restart: in-flight records get retried
            "socket.timeout.ms": 5_000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "retry.backoff.ms": 50,
        })
        self.thread = threading.Thread(target=self._run, name="background-producer", daemon=True)

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def _report(self, record: OutRecord) -> Any:
        def report(err: KafkaError | None, msg: Message) -> None:
            with self._lock:
                if err is None:
                    self.acked.append((record, delivery_of(msg)))
                else:
                    self.failed.append(str(err))

        return report

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            record = keyed_record(i, tag="kill")
            try:
                self.producer.produce(
                    self.topic, key=record.key, value=record.value, headers=list(record.headers),
                    timestamp=record.timestamp, on_delivery=self._report(record),
                )
            except BufferError:
                self.producer.poll(0.05)  # local queue full (broker down): wait for room
                continue
            self.producer.poll(0)
            i += 1
            if i % 50 == 0:
                self.producer.poll(0.01)  # pace the sender: ~5k records/s at most

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(10)
        self.producer.flush(25)


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "kill-9"])
def test_restart_mid_produce_loses_nothing_acknowledged(
    broker: BrokerProcess, client: ConfluentKafkaDriver, topic: str, hard: bool
) -> None:
    sender = BackgroundProducer(broker.bootstrap, topic)
    sender.thread.start()
    try:
        deadline = time.monotonic() + PRODUCE_DEADLINE_S
        while sender.acked_count() < STOP_AFTER_ACKED:
            assert time.monotonic() < deadline, (
                f"only {sender.acked_count()} records acknowledged in {PRODUCE_DEADLINE_S:.0f}s; "
                f"failures: {sender.failed[:5]}"
            )
            time.sleep(0.01)
        code = broker.kill() if hard else broker.stop()
        assert code == (-9 if hard else 0), f"broker exit code {code}\n{broker.log_tail()}"
        acked_before_restart = sender.acked_count()
        broker.start()
        # The same producer carries on: its retried and new records are appended after recovery.
        deadline = time.monotonic() + PRODUCE_DEADLINE_S
        while sender.acked_count() < acked_before_restart + STOP_AFTER_ACKED:
            assert time.monotonic() < deadline, (
                f"no appends after the restart: {sender.acked_count()} acknowledged, "
                f"{acked_before_restart} before it; failures: {sender.failed[:5]}"
            )
            time.sleep(0.01)
    finally:
        sender.stop()
    with sender._lock:
        acked = list(sender.acked)
    records = [r for r, _ in acked]
    deliveries = [d for _, d in acked]
    assert len(set(deliveries)) == len(deliveries), "two acks for one (partition, offset)"
    when = "after kill -9" if hard else "after SIGTERM mid-produce"
    assert_all_present(records, deliveries, read_back(client, topic, deliveries), when)
