"""The fault campaign's workload: real confluent-kafka clients writing and reading through faults.

Owns three kinds of client thread and what they observed:

* ``ProducerWorker`` — one idempotent acks=all producer (``enable.idempotence=true``) writing
  unique values (``chaos_checker.make_value``) round-robin over the topic's partitions at a
  steady rate. Every delivery report is appended to ``deliveries.jsonl`` in the run directory
  (producer, incarnation, sequence, partition, offset, error) and successful ones are kept as
  ``Delivery``s. A fatal librdkafka error (``KafkaError.fatal()``: the idempotent producer's
  OUT_OF_ORDER_SEQUENCE_NUMBER "sequence desynchronization", ...) is recorded once per
  incarnation and the producer replaced by a new incarnation (a fatal producer accepts nothing
  more).
* ``GroupConsumer`` — one member of a consumer group reading and committing through the faults,
  closed and reopened every ``reopen_s`` so it resumes from its committed offsets; every value it
  consumed is kept (the at-least-once check), and so is, per assignment of a partition, where
  it resumed and the latest commit the coordinator had acknowledged for it by then
  (``Resume``: an acknowledged commit must never be taken back). Latest, not highest: commits
  are last-writer-wins, in Kafka as here, and librdkafka may send an older position's commit
  after a newer one (async commits queued while the coordinator was away go out together);
  the coordinator answers one connection's commits in the order it wrote them, so the last
  acknowledged is the one in force.
* ``read_topic`` — after healing, the full read: every partition from its log start to its
  high watermark at the time of the read.

Client timeouts are lowered (``socket.timeout.ms`` 5 s, ``request.timeout.ms`` 5 s) so a
SIGSTOPped leader does not stall a producer for librdkafka's 60 s default; ``message.timeout.ms``
(60 s) is long enough to ride out the restart of every broker. Each thread owns its client;
the observed data is guarded by the worker's lock.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from strata.cli.chaos_checker import Delivery, Resume, StoredRecord, make_value

PRODUCER_CONFIG: Mapping[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "socket.timeout.ms": 5000,
    "request.timeout.ms": 5000,
    "message.timeout.ms": 60000,
    "socket.connection.setup.timeout.ms": 5000,
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 1000,
    "reconnect.backoff.max.ms": 1000,
    "topic.metadata.refresh.interval.ms": 2000,
    "metadata.max.age.ms": 6000,
    # The idempotent producer's own account (PID/epoch changes, drains, sequence errors) in
    # clients.log: what tells a client's cross-epoch duplicate from a broker's missed one.
    "debug": "eos",
}
CONSUMER_CONFIG: Mapping[str, Any] = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "socket.timeout.ms": 5000,
    "socket.connection.setup.timeout.ms": 5000,
    "reconnect.backoff.max.ms": 1000,
    "topic.metadata.refresh.interval.ms": 2000,
    "metadata.max.age.ms": 6000,
}


def client_logger(run_dir: Path) -> logging.Logger:
    """librdkafka's log lines (forwarded on poll) into ``<run_dir>/clients.log``."""
    logger = logging.getLogger(f"strata.chaos.clients.{run_dir}")
    if not logger.handlers:
        handler = logging.FileHandler(run_dir / "clients.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)  # librdkafka's debug contexts come as level 7
        logger.propagate = False
    return logger


class DeliveryLog:
    """``deliveries.jsonl``: one JSON object per delivery report, shared by the producers."""

    def __init__(self, path: Path) -> None:
        self._file: TextIO = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, entry: Mapping[str, Any]) -> None:
        line = json.dumps(entry, separators=(",", ":"))
        with self._lock:
            if not self._file.closed:  # a producer thread abandoned by a failed run may report late
                self._file.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()


@dataclass
class ProducerObservations:
    deliveries: list[Delivery] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)  # error name -> reports
    fatal: list[str] = field(default_factory=list)
    sent: int = 0


class ProducerWorker(threading.Thread):
    """One idempotent producer (replaced after a fatal error) writing at ``rate`` records/s."""

    def __init__(self, index: int, bootstrap: str, topic: str, partitions: int, rate: float,
                 log: DeliveryLog, logger: logging.Logger) -> None:
        super().__init__(name=f"chaos-producer-{index}", daemon=True)
        self.index = index
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.log = log
        self.logger = logger
        self.observed = ProducerObservations()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.incarnation = 0
        self._fatal_seen = threading.Event()
        self._fatal_incarnations: set[int] = set()

    def _new_producer(self) -> Any:
        from confluent_kafka import Producer

        def on_error(error: Any) -> None:
            if error.fatal():
                self._record_fatal(self.incarnation, f"{error.name()}: {error.str()}")

        return Producer({"bootstrap.servers": self.bootstrap, **PRODUCER_CONFIG,
                         "client.id": f"chaos-producer-{self.index}", "error_cb": on_error,
                         "logger": self.logger})

    def _on_delivery(self, incarnation: int, sequence: int, error: Any, message: Any) -> None:
        entry: dict[str, Any] = {"producer": self.index, "incarnation": incarnation,
                                 "sequence": sequence, "partition": message.partition(),
                                 "offset": message.offset(), "t": time.time()}
        with self.lock:
            if error is None:
                self.observed.deliveries.append(
                    Delivery(message.partition(), message.offset(), message.value()))
            else:
                entry["error"] = error.name()
                self.observed.failed[error.name()] = self.observed.failed.get(error.name(), 0) + 1
        self.log.write(entry)
        if error is not None and error.fatal():
            self._record_fatal(incarnation, f"{error.name()}: {error.str()} (delivery report)")

    def _record_fatal(self, incarnation: int, what: str) -> None:
        """One fatal error per incarnation (the first one librdkafka reports: error callback,
        delivery report or ``produce()``), and the producer marked for replacement."""
        with self.lock:
            if incarnation not in self._fatal_incarnations:
                self._fatal_incarnations.add(incarnation)
                self.observed.fatal.append(
                    f"producer {self.index} incarnation {incarnation}: {what}")
        self._fatal_seen.set()

    def run(self) -> None:
        producer = self._new_producer()
        sequence = 0
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stopping.is_set():
            if self._fatal_seen.is_set():
                # A fatal producer accepts nothing more: report what it still holds, replace it.
                with contextlib.suppress(Exception):
                    producer.flush(1)
                self.incarnation += 1
                self._fatal_seen.clear()
                producer = self._new_producer()
                sequence = 0
            incarnation, seq = self.incarnation, sequence
            try:
                producer.produce(
                    self.topic, value=make_value(self.index, incarnation, seq),
                    partition=seq % self.partitions,
                    on_delivery=lambda e, m, i=incarnation, s=seq: self._on_delivery(i, s, e, m))
            except BufferError:
                producer.poll(0.1)
                continue
            except Exception as exc:  # noqa: BLE001 - KafkaException: fatal state, replace it
                producer.poll(0)  # the error callback names the fatal error itself
                self._record_fatal(incarnation, f"produce(): {exc}")
                continue
            sequence += 1
            with self.lock:
                self.observed.sent += 1
            next_at += interval
            producer.poll(max(0.0, next_at - time.monotonic()))
        producer.flush(float(PRODUCER_CONFIG["message.timeout.ms"]) / 1000 + 10)

    def stop(self) -> None:
        self.stopping.set()


class GroupConsumer(threading.Thread):
    """One group member consuming the topic, committing every second, reopened periodically."""

    def __init__(self, bootstrap: str, topic: str, group: str, reopen_s: float,
                 logger: logging.Logger) -> None:
        super().__init__(name="chaos-group-consumer", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.reopen_s = reopen_s
        self.logger = logger
        self.consumed: set[bytes] = set()
        self.max_offset: dict[int, int] = {}
        self.errors: dict[str, int] = {}
        self.reopens = 0
        self.acknowledged: dict[int, int] = {}  # partition -> latest acknowledged commit
        self.resumes: list[Resume] = []
        self._assigned: dict[int, int] = {}  # partition -> acknowledged at its assignment
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.drain_to: dict[int, int] | None = None
        self.drained = threading.Event()

    def _open(self) -> Any:
        from confluent_kafka import Consumer

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             **CONSUMER_CONFIG, "logger": self.logger,
                             "on_commit": self._on_commit})
        consumer.subscribe([self.topic], on_assign=self._on_assign)
        return consumer

    def _on_commit(self, error: Any, partitions: list[Any]) -> None:
        """A commit's answer: the partitions the coordinator acknowledged."""
        if error is None:
            self._acknowledge(partitions)

    def _acknowledge(self, partitions: list[Any]) -> None:
        """Commits the coordinator acknowledged, in the order it answered them: each
        partition's latest is the one in force (module docstring)."""
        with self.lock:
            for tp in partitions:
                if tp.error is None and tp.offset >= 0:
                    self.acknowledged[tp.partition] = tp.offset

    def _on_assign(self, _consumer: Any, partitions: list[Any]) -> None:
        with self.lock:
            for tp in partitions:
                self._assigned[tp.partition] = self.acknowledged.get(tp.partition, -1)

    def _consumed(self, partition: int, offset: int, value: bytes) -> None:
        with self.lock:
            self.consumed.add(value)
            self.max_offset[partition] = max(self.max_offset.get(partition, -1), offset)
            acknowledged = self._assigned.pop(partition, None)
            if acknowledged is not None:
                self.resumes.append(Resume(partition, offset, acknowledged))

    def _caught_up(self) -> bool:
        target = self.drain_to
        if target is None:
            return False
        with self.lock:
            return all(hw == 0 or self.max_offset.get(p, -1) >= hw - 1 for p, hw in target.items())

    def run(self) -> None:
        consumer = self._open()
        opened = last_commit = time.monotonic()
        try:
            while not self.stopping.is_set():
                if self._caught_up():
                    self.drained.set()
                    break
                for message in consumer.consume(500, 0.5):
                    error = message.error()
                    if error is not None:
                        with self.lock:
                            self.errors[error.name()] = self.errors.get(error.name(), 0) + 1
                        continue
                    self._consumed(message.partition(), message.offset(), message.value())
                now = time.monotonic()
                if now - last_commit >= 1.0:
                    with contextlib.suppress(Exception):
                        consumer.commit(asynchronous=True)
                    last_commit = now
                if self.drain_to is None and now - opened >= self.reopen_s:
                    with contextlib.suppress(Exception):
                        self._acknowledge(consumer.commit(asynchronous=False) or [])
                    with contextlib.suppress(Exception):
                        consumer.close()
                    consumer = self._open()
                    self.reopens += 1
                    opened = time.monotonic()
        finally:
            with contextlib.suppress(Exception):
                consumer.close()

    def drain(self, high_watermarks: Mapping[int, int], timeout: float) -> bool:
        """Keep consuming until every partition is consumed up to ``high_watermarks`` (True) or
        ``timeout`` passes (False); then stop."""
        self.drain_to = dict(high_watermarks)
        done = self.drained.wait(timeout)
        self.stopping.set()
        self.join(30)
        return done


def read_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0
               ) -> tuple[list[StoredRecord], dict[int, int], bool]:
    """Every record of ``topic`` from log start to the high watermark read at the start.

    Returns the records, the high watermark per partition, and whether the read was complete
    (every partition reached its high watermark before ``timeout``).
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "strata-chaos-reader",
                         "enable.auto.commit": False, "log_level": 0,
                         "socket.timeout.ms": 5000})
    records: list[StoredRecord] = []
    high_watermarks: dict[int, int] = {}
    try:
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            high_watermarks[p] = int(high)
        pending = {p for p, hw in high_watermarks.items() if hw > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                part, offset = message.partition(), message.offset()
                if message.error() is not None or part is None or offset is None:
                    continue
                if part not in pending or offset >= high_watermarks[part]:
                    continue
                records.append(StoredRecord(part, offset, message.value()))
                if offset >= high_watermarks[part] - 1:
                    pending.discard(part)
        return records, high_watermarks, not pending
    finally:
        with contextlib.suppress(Exception):
            consumer.close()
