"""Fetch and Metadata at the versions real clients negotiate, and fetch sessions in use.

The broker advertises a small recording proxy in front of itself, so every connection of every
client passes through it; the proxy notes each request's (client id, api key, api version)
from its header and forwards the bytes unchanged. Each client then consumes a topic of many
partitions; the test prints the versions it used and asserts that each is the newest both it
and Strata support (Strata's from the handler registry, the client's pinned below per
installed release — a client upgrade that raises one shows up here as a failure to re-pin).

kafka-python runs KIP-227 incremental fetch sessions; the broker's
``strata_fetch_session_incremental_fetches_total`` must grow while it consumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
import urllib.request
import uuid
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strata.broker.handlers import served_versions
from strata.protocol import ApiKey

from ..broker_process import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

pytestmark = pytest.mark.integration

PARTITIONS: Final = 12
PER_PARTITION: Final = 40
DEADLINE_S: Final = 60.0
# The newest version each installed client sends (its own cap), per API.
CLIENT_MAX: Final[Mapping[str, Mapping[ApiKey, int]]] = {
    # kafka-python 3.0.12: the fetcher caps Fetch at v12; MetadataRequest goes to v13.
    "kafka-python": {ApiKey.FETCH: 12, ApiKey.METADATA: 13},
    # librdkafka 2.16 (confluent-kafka 2.16.1): rd_kafka_FetchRequest up to v16 (KIP-951),
    # Metadata up to v13 (KIP-1102).
    "confluent-kafka": {ApiKey.FETCH: 16, ApiKey.METADATA: 13},
    # aiokafka 0.14: FetchRequest up to v11 (KIP-392), MetadataRequest up to v5.
    "aiokafka": {ApiKey.FETCH: 11, ApiKey.METADATA: 5},
}


class RecordingProxy:
    """TCP proxy on 127.0.0.1 that records each request's (client id, api key, version)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.target_port = 0
        self.seen: dict[str, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def start(self, target_port: int) -> None:
        self.target_port = target_port
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        for s in [self.listener, *self._sockets]:
            s.close()

    def versions(self, client_id: str) -> dict[int, set[int]]:
        with self._lock:
            return {k: set(v) for k, v in self.seen.get(client_id, {}).items()}

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
            client.settimeout(None)
            upstream.settimeout(None)
            self._sockets += [client, upstream]
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._copy, args=(upstream, client), daemon=True).start()

    def _requests(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                size_bytes = _read_exactly(source, 4)
                (size,) = struct.unpack(">i", size_bytes)
                payload = _read_exactly(source, size)
                api_key, version, _, length = struct.unpack_from(">hhih", payload)
                client_id = payload[10:10 + max(length, 0)].decode(errors="replace")
                with self._lock:
                    self.seen[client_id][api_key].add(version)
                sink.sendall(size_bytes + payload)
        except (OSError, ConnectionError):
            _shut(sink)

    @staticmethod
    def _copy(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        _shut(sink)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess,
                                                                        RecordingProxy]]:
    proxy = RecordingProxy()
    broker = BrokerProcess(tmp_path_factory.mktemp("broker"), {
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    broker.start()
    proxy.start(broker.port)
    try:
        yield broker, proxy
    finally:
        proxy.close()
        assert broker.stop() == 0


@pytest.fixture
def topic(proxied: tuple[BrokerProcess, RecordingProxy]) -> str:
    _, proxy = proxied
    name = f"fetch-versions-{uuid.uuid4().hex[:8]}"
    bootstrap = f"127.0.0.1:{proxy.port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    produce(proxy, name)
    return name


def produce(proxy: RecordingProxy, topic: str, first: int = 0) -> None:
    """``PER_PARTITION`` records to each partition."""
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{proxy.port}", "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(first, first + PER_PARTITION):
            producer.produce(topic, value=b"v%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0


def expected(client: str) -> dict[int, int]:
    served = served_versions()
    return {int(api): min(top, served[api].max_version) for api, top in CLIENT_MAX[client].items()}


def check_versions(proxy: RecordingProxy, client_id: str, client: str) -> None:
    used = proxy.versions(client_id)
    for api, version in expected(client).items():
        print(f"{client}: {ApiKey(api).name} versions used {sorted(used.get(api, ()))}, "
              f"newest both support {version}")
        assert used.get(api), f"{client} sent no {ApiKey(api).name}"
        assert max(used[api]) == version, (client, ApiKey(api).name, used[api])


def metric(broker: BrokerProcess, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}/metrics",
                                timeout=5) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


def consume_until(poll: Callable[[], int], total: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    got = 0
    while got < total:
        assert time.monotonic() < deadline, f"consumed {got} of {total} records"
        got += poll()
    assert got == total


def test_kafka_python_runs_incremental_fetch_sessions(
        proxied: tuple[BrokerProcess, RecordingProxy], topic: str) -> None:
    broker, proxy = proxied
    before = metric(broker, "strata_fetch_session_incremental_fetches_total")
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{proxy.port}",
                             client_id="fv-kafka-python", enable_auto_commit=False,
                             fetch_max_wait_ms=50,
                             request_timeout_ms=30000)
    try:
        consumer.assign([KpTopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        seen: set[tuple[int, int]] = set()

        def poll() -> int:
            batches = consumer.poll(timeout_ms=200)
            new = {(r.partition, r.offset) for records in batches.values() for r in records}
            fresh = len(new - seen)
            seen.update(new)
            return fresh

        consume_until(poll, PARTITIONS * PER_PARTITION)
        # More records while the session runs: incremental responses carry them.
        produce(proxy, topic, first=PER_PARTITION)
        consume_until(poll, PARTITIONS * PER_PARTITION)
        assert len(seen) == 2 * PARTITIONS * PER_PARTITION
        # Idle polling goes on in the session: empty incremental responses (nothing changed).
        deadline = time.monotonic() + DEADLINE_S
        while (incremental := metric(broker, "strata_fetch_session_incremental_fetches_total")
               - before) < 5:
            assert time.monotonic() < deadline, f"{incremental} incremental fetches"
            assert poll() == 0
        sessions = metric(broker, "strata_fetch_session_incremental_fetch_sessions")
        cached = metric(broker, "strata_fetch_session_incremental_fetch_partitions_cached")
    finally:
        consumer.close()
    check_versions(proxy, "fv-kafka-python", "kafka-python")
    print(f"kafka-python: {incremental:.0f} incremental fetches in a session; "
          f"{sessions:.0f} sessions, {cached:.0f} partitions cached")
    assert incremental > 0
    assert sessions >= 1 and cached >= PARTITIONS


def test_confluent_kafka(proxied: tuple[BrokerProcess, RecordingProxy], topic: str) -> None:
    _, proxy = proxied
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{proxy.port}",
                         "client.id": "fv-confluent", "group.id": "fv-unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50,
                         "fetch.queue.backoff.ms": 10})
    try:
        consumer.assign([CkTopicPartition(topic, p, 0) for p in range(PARTITIONS)])

        def poll() -> int:
            messages = consumer.consume(num_messages=500, timeout=0.2)
            for m in messages:
                assert m.error() is None, m.error()
            return len(messages)

        consume_until(poll, PARTITIONS * PER_PARTITION)
    finally:
        consumer.close()
    check_versions(proxy, "fv-confluent", "confluent-kafka")


async def test_aiokafka(proxied: tuple[BrokerProcess, RecordingProxy], topic: str) -> None:
    _, proxy = proxied
    consumer = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{proxy.port}",
                                client_id="fv-aiokafka", enable_auto_commit=False,
                                fetch_max_wait_ms=50)
    await consumer.start()
    try:
        partitions = [AioTopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        got = 0
        async with asyncio.timeout(DEADLINE_S):
            while got < PARTITIONS * PER_PARTITION:
                batches = await consumer.getmany(timeout_ms=200)
                got += sum(len(records) for records in batches.values())
        assert got == PARTITIONS * PER_PARTITION
    finally:
        await consumer.stop()
    check_versions(proxy, "fv-aiokafka", "aiokafka")


def test_served_ranges() -> None:
    served: Mapping[ApiKey, Any] = served_versions()
    assert (served[ApiKey.FETCH].min_version, served[ApiKey.FETCH].max_version) == (4, 18)
    assert (served[ApiKey.METADATA].min_version, served[ApiKey.METADATA].max_version) == (0, 13)


def test_kafka_python_reads_batches_larger_than_the_fetch_budget_left(
        proxied: tuple[BrokerProcess, RecordingProxy]) -> None:
    """Three partitions of one 20 KB batch each under ``fetch_max_bytes`` = 30 KB: the first
    partition takes its batch whole (KIP-74), the next ones must get nothing rather than part
    of a batch (Kafka's ``readFromLog`` for Fetch v3+), or kafka-python fails on them."""
    _, proxy = proxied
    name = f"fetch-budget-{uuid.uuid4().hex[:8]}"
    bootstrap = f"127.0.0.1:{proxy.port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 3, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "compression.type": "none"})
    for p in range(3):
        for i in range(20):
            producer.produce(name, value=bytes([65 + i]) * 1000, partition=p)
    assert producer.flush(30) == 0
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="fv-budget",
                             enable_auto_commit=False, fetch_max_wait_ms=50,
                             fetch_max_bytes=30_000, request_timeout_ms=30000)
    try:
        consumer.assign([KpTopicPartition(name, p) for p in range(3)])
        consumer.seek_to_beginning()
        seen: list[tuple[int, int]] = []

        def poll() -> int:
            batches = consumer.poll(timeout_ms=200)
            got = [(r.partition, r.offset) for records in batches.values() for r in records]
            seen.extend(got)
            return len(got)

        consume_until(poll, 60)
    finally:
        consumer.close()
    assert sorted(seen) == [(p, o) for p in range(3) for o in range(20)]
