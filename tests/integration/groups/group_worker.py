"""One consumer-group member as its own process, driven the way an application drives it.

Run as ``python group_worker.py SPEC_JSON``. The spec names the client (``confluent``,
``kafka-python`` or ``aiokafka``), the bootstrap servers, the group, what to subscribe to
(``topics`` or a ``pattern``), and optional ``assignor`` and ``group_instance_id``;
``group_protocol: "consumer"`` (confluent only) makes it a KIP-848 member (``remote_assignor``:
its ``group.remote.assignor``; the broker owns the timeouts and the assignment); ``revoke_ms``
(confluent only): how long the revocation callback takes; ``session_timeout_ms`` (confluent
classic only): its ``session.timeout.ms`` instead of the 6 s below. The member
polls in a loop and, after each batch it has "processed", commits the batch's next offsets
synchronously: commit-after-processing, the at-least-once pattern whose duplicates are bounded
by the commit points. The kafkajs twin of this script is ``tests/integration/js/group_worker.js``;
both speak the same line protocol, read by ``workers.py``.

Every event goes to stdout as one JSON line, flushed at once (a ``kill -9`` loses at most the
line being written):

- ``{"e": "subscribed"}`` once the subscription is made;
- ``{"e": "assigned", "tps": [[topic, partition], ...], "incremental": bool, "t": float}``: the
  partitions handed to the member (all of them when not incremental);
- ``{"e": "revoked", "tps": [...], "t": float}``: partitions taken away (or lost);

  (``t``: ``time.monotonic()`` in the callback, the machine-wide clock, so that callbacks of
  different members can be ordered; the kafkajs worker does not send it);
- ``{"e": "batch", "id": n, "records": [[topic, partition, offset], ...]}``: processed;
- ``{"e": "commit", "id": n, "ok": bool, "offsets": [[topic, partition, next_offset], ...],
  "error": str | null}``: the outcome of committing batch ``n``;
- ``{"e": "closed"}`` after a graceful close (LeaveGroup for dynamic members);
- ``{"e": "fatal", "error": str}`` when the client cannot go on.

A line ``stop`` on stdin closes the member gracefully and exits 0. Timeouts are scaled down for
loopback (NOTES.md): session 6 s, heartbeat 0.5 s, fetch wait 100 ms, metadata refreshed every
second so a pattern picks up new topics quickly. This script imports nothing from the test
package: it is a client application, not part of the harness.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

SESSION_TIMEOUT_MS: Final = 6000
HEARTBEAT_INTERVAL_MS: Final = 500
MAX_POLL_INTERVAL_MS: Final = 20000  # the rebalance timeout the Java-style clients send
FETCH_MAX_WAIT_MS: Final = 100
METADATA_MAX_AGE_MS: Final = 1000
MAX_RECORDS: Final = 500
POLL_TIMEOUT_S: Final = 0.2
KAFKA_PYTHON_POLL_TIMEOUT_MS: Final = 2000  # see run_kafka_python

TP = tuple[str, int]

_out_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"e": event, **fields}, separators=(",", ":"))
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def tps(partitions: Iterable[Any]) -> list[list[Any]]:
    return sorted([p.topic, p.partition] for p in partitions)


def next_offsets(records: Sequence[tuple[str, int, int]]) -> dict[TP, int]:
    """Per partition, one past the highest offset of the batch: what a commit stores."""
    ends: dict[TP, int] = {}
    for topic, partition, offset in records:
        ends[(topic, partition)] = max(ends.get((topic, partition), 0), offset + 1)
    return ends


def watch_stdin(stop: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()  # "stop", or the harness went away (EOF)


class Batches:
    """Numbers the batches and reports each one and its commit. ``work_ms`` is the time each
    batch's "processing" takes (the spec's ``work_ms``, default 0): a slow application, so that
    rebalances overlap consumption."""

    def __init__(self, work_ms: float = 0.0) -> None:
        self.count = 0
        self.work_s = work_ms / 1000

    def processed(self, records: list[tuple[str, int, int]]) -> int:
        self.count += 1
        emit("batch", id=self.count, records=[list(r) for r in records])
        if self.work_s:
            time.sleep(self.work_s)  # the application's work on the batch
        return self.count

    async def processed_async(self, records: list[tuple[str, int, int]]) -> int:
        self.count += 1
        emit("batch", id=self.count, records=[list(r) for r in records])
        if self.work_s:
            await asyncio.sleep(self.work_s)
        return self.count

    @staticmethod
    def committed(batch: int, offsets: dict[TP, int], error: BaseException | None) -> None:
        emit("commit", id=batch, ok=error is None,
             offsets=sorted([t, p, o] for (t, p), o in offsets.items()),
             error=None if error is None else f"{type(error).__name__}: {error}")


# ------------------------------------------------------------------------------ confluent
def run_confluent(spec: dict[str, Any], stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    config: dict[str, Any] = {
        "bootstrap.servers": spec["bootstrap"],
        "group.id": spec["group"],
        "client.id": spec.get("name", "worker"),
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": spec.get("session_timeout_ms", SESSION_TIMEOUT_MS),
        "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
        "fetch.wait.max.ms": FETCH_MAX_WAIT_MS,
        "topic.metadata.refresh.interval.ms": METADATA_MAX_AGE_MS,
        "partition.assignment.strategy": spec.get("assignor", "range"),
    }
    if spec.get("group_instance_id"):
        config["group.instance.id"] = spec["group_instance_id"]
    consumer_protocol = spec.get("group_protocol") == "consumer"
    if consumer_protocol:  # KIP-848: the broker sets the timeouts and assigns
        for key in ("session.timeout.ms", "heartbeat.interval.ms",
                    "partition.assignment.strategy"):
            del config[key]
        config["group.protocol"] = "consumer"
        if spec.get("remote_assignor"):
            config["group.remote.assignor"] = spec["remote_assignor"]
    consumer = Consumer(config)

    # librdkafka hands a cooperative assignor's callbacks (and KIP-848's) only the partitions
    # that change.
    incremental = consumer_protocol or config["partition.assignment.strategy"] == \
        "cooperative-sticky"

    def on_assign(_c: Any, partitions: list[Any]) -> None:
        emit("assigned", tps=tps(partitions), incremental=incremental, t=time.monotonic())

    revoke_s = spec.get("revoke_ms", 0) / 1000

    def on_revoke(_c: Any, partitions: list[Any]) -> None:
        if revoke_s and partitions:
            time.sleep(revoke_s)  # an application slow to let go (it flushes, commits...)
        emit("revoked", tps=tps(partitions), t=time.monotonic())

    subscription = [spec["pattern"]] if spec.get("pattern") else list(spec["topics"])
    consumer.subscribe(subscription, on_assign=on_assign, on_revoke=on_revoke,
                       on_lost=on_revoke)
    emit("subscribed")
    batches = Batches(spec.get("work_ms", 0))
    while not stop.is_set():
        messages = consumer.consume(MAX_RECORDS, POLL_TIMEOUT_S)
        records = [(m.topic(), m.partition(), m.offset()) for m in messages if not m.error()]
        for m in messages:
            if m.error():
                emit("client_error", error=str(m.error()))
        if not records:
            continue
        batch = batches.processed(records)
        offsets = next_offsets(records)
        error: BaseException | None = None
        try:
            consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                            asynchronous=False)
        except KafkaException as exc:
            error = exc
        batches.committed(batch, offsets, error)
    consumer.close()


# ------------------------------------------------------------------------------ kafka-python
def python_client_config(spec: dict[str, Any]) -> dict[str, Any]:
    """What kafka-python's and aiokafka's consumers share (the same Java-style option names)."""
    return {
        "bootstrap_servers": spec["bootstrap"],
        "group_id": spec["group"],
        "client_id": spec.get("name", "worker"),
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
        "max_poll_interval_ms": MAX_POLL_INTERVAL_MS,
        "fetch_max_wait_ms": FETCH_MAX_WAIT_MS,
        "metadata_max_age_ms": METADATA_MAX_AGE_MS,
    }


def run_kafka_python(spec: dict[str, Any], stop: threading.Event) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit("revoked", tps=tps(revoked), t=time.monotonic())

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit("assigned", tps=tps(assigned), incremental=False, t=time.monotonic())

    consumer = KafkaConsumer(**python_client_config(spec),
                             request_timeout_ms=MAX_POLL_INTERVAL_MS + 5000)
    # kafka-python 3.0.12 has a race: when the group leader rejoins because the metadata of its
    # subscription changed (a topic's partitions first seen after the first join, a new topic
    # matching a pattern) and the poll's timeout runs out between sending SyncGroup and taking
    # its answer, the join never completes on the client side: no heartbeats, no assignment,
    # and the coordinator evicts it after the session timeout. Knowing the topics' metadata
    # before the first join and polling with a longer timeout make that window rare.
    for topic in spec.get("topics", ()):
        consumer.partitions_for_topic(topic)
    if spec.get("pattern"):
        consumer.subscribe(pattern=spec["pattern"], listener=Listener())
    else:
        consumer.subscribe(topics=list(spec["topics"]), listener=Listener())
    emit("subscribed")
    batches = Batches(spec.get("work_ms", 0))
    while not stop.is_set():
        try:
            polled = consumer.poll(timeout_ms=KAFKA_PYTHON_POLL_TIMEOUT_MS,
                                   max_records=MAX_RECORDS)
        except KafkaError as exc:  # kafka-python raises e.g. ECONNREFUSED while a broker restarts
            if not exc.retriable:
                raise
            emit("client_error", error=f"{type(exc).__name__}: {exc}")
            continue
        records = [(m.topic, m.partition, m.offset) for ms in polled.values() for m in ms]
        if not records:
            continue
        batch = batches.processed(records)
        offsets = next_offsets(records)
        error: BaseException | None = None
        try:
            consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                             for (t, p), o in offsets.items()})
        except KafkaError as exc:
            error = exc
        batches.committed(batch, offsets, error)
    consumer.close()


# ------------------------------------------------------------------------------ aiokafka
def run_aiokafka(spec: dict[str, Any], stop: threading.Event) -> None:
    asyncio.run(_aiokafka(spec, stop))


async def _aiokafka(spec: dict[str, Any], stop: threading.Event) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            emit("revoked", tps=tps(revoked), t=time.monotonic())

        async def on_partitions_assigned(self, assigned: Any) -> None:
            emit("assigned", tps=tps(assigned), incremental=False, t=time.monotonic())

    consumer = AIOKafkaConsumer(**python_client_config(spec),
                                rebalance_timeout_ms=MAX_POLL_INTERVAL_MS)
    if spec.get("pattern"):
        consumer.subscribe(pattern=spec["pattern"], listener=Listener())
    else:
        consumer.subscribe(topics=list(spec["topics"]), listener=Listener())
    await consumer.start()
    emit("subscribed")
    batches = Batches(spec.get("work_ms", 0))
    try:
        while not stop.is_set():
            polled = await consumer.getmany(timeout_ms=int(POLL_TIMEOUT_S * 1000),
                                            max_records=MAX_RECORDS)
            records = [(m.topic, m.partition, m.offset) for ms in polled.values() for m in ms]
            if not records:
                continue
            batch = await batches.processed_async(records)
            offsets = next_offsets(records)
            error: BaseException | None = None
            try:
                await consumer.commit({TopicPartition(t, p): o for (t, p), o in offsets.items()})
            except KafkaError as exc:
                error = exc
            batches.committed(batch, offsets, error)
    finally:
        await consumer.stop()


CLIENTS: Final[dict[str, Callable[[dict[str, Any], threading.Event], None]]] = {
    "confluent": run_confluent,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
}


def main() -> int:
    spec = json.loads(sys.argv[1])
    # The client's own log, kept by the harness for failure reports.
    logging.basicConfig(level=spec.get("log_level", "INFO"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    threading.Thread(target=watch_stdin, args=(stop,), daemon=True).start()
    try:
        CLIENTS[spec["client"]](spec, stop)
    except Exception as exc:  # noqa: BLE001 -- reported to the harness, which fails the test with it
        emit("fatal", error=f"{type(exc).__name__}: {exc}")
        return 1
    emit("closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
