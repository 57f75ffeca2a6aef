"""A real Strata cluster for fault tests: N broker processes on one metadata store.

Owns the brokers' shared settings (short timeouts so faults play out in seconds: a 3 s
registration lease, ``replica.lag.time.max.ms`` 2 s, 100 ms follower long polls), the metadata
store behind them (a SQLite file, or a real etcd of the test's own) and polling helpers that
read the cluster as a client sees it (confluent-kafka's Metadata). Every wait polls a condition
against a deadline and fails with every broker's log tail attached; nothing sleeps to settle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strata.client.broker_client import BrokerClient, BrokerUnavailableError
from strata.protocol.api_keys import ApiKey

from ..broker_process import BrokerProcess
from ..metadata.etcd_process import EtcdProcess

T = TypeVar("T")

CLUSTER_CONFIG: Mapping[str, str] = {
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "200",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "auto.leader.rebalance.enable": "false",
}


@dataclass(frozen=True)
class PartitionView:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class ClusterProcesses:
    def __init__(self, workdir: Path, store_url: str, brokers: int = 3,
                 overrides: Mapping[str, str] | None = None) -> None:
        self.workdir = workdir
        self.store_url = store_url
        self.brokers = [
            BrokerProcess(workdir / f"broker-{i}", {**CLUSTER_CONFIG, "node.id": str(i),
                                                    "metadata.store": store_url,
                                                    **(overrides or {})})
            for i in range(brokers)]
        self._admin: tuple[str, AdminClient] | None = None

    def add_broker(self, node_id: int) -> BrokerProcess:
        first = self.brokers[0].config
        broker = BrokerProcess(self.workdir / f"broker-{node_id}",
                               {k: v for k, v in first.items()
                                if k not in ("listeners", "advertised.listeners", "log.dirs",
                                             "http.port")} | {"node.id": str(node_id)})
        self.brokers.append(broker)
        broker.start()
        return broker

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self) -> None:
        with concurrent.futures.ThreadPoolExecutor(len(self.brokers)) as pool:
            for started in [pool.submit(b.start) for b in self.brokers]:
                started.result()
        self.wait_for(lambda: len(self.metadata().brokers) == len(self.brokers)
                      and self.metadata().controller_id >= 0, "every broker registered")

    def stop(self) -> None:
        for broker in self.brokers:
            if broker.is_running():
                broker.stop()

    def broker(self, node_id: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.config["node.id"] == str(node_id))

    def live_bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.is_running())

    # ---------------------------------------------------------------- reading the cluster
    def admin(self) -> AdminClient:
        """A client of the running brokers (kept while they are the same ones: a future of a
        client that was collected fails with _DESTROY)."""
        bootstrap = self.live_bootstrap()
        if self._admin is None or self._admin[0] != bootstrap:
            self._admin = (bootstrap, AdminClient({"bootstrap.servers": bootstrap,
                                                   "log_level": 0}))
        return self._admin[1]

    def metadata(self) -> Any:
        return self.admin().list_topics(timeout=5)

    def partition(self, topic: str, index: int = 0, *, via: int | None = None
                  ) -> PartitionView | None:
        """The partition as Metadata reports it (from broker ``via`` only, if given: when
        another broker is stopped, a client might be stuck asking it)."""
        if via is not None:
            return asyncio.run(self._partition_from(self.broker(via), topic, index))
        try:
            topics = self.metadata().topics
        except Exception:  # noqa: BLE001 - a broker just died: ask again
            return None
        meta = topics.get(topic)
        if meta is None or meta.error is not None or index not in meta.partitions:
            return None
        p = meta.partitions[index]
        return PartitionView(p.leader, tuple(p.replicas), tuple(p.isrs))

    @staticmethod
    async def _partition_from(broker: BrokerProcess, topic: str, index: int
                              ) -> PartitionView | None:
        client = BrokerClient("127.0.0.1", broker.port, client_id="strata-test",
                              request_timeout_s=5)
        try:
            response = await client.request(ApiKey.METADATA, 8, {
                "topics": [{"name": topic}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False})
        except BrokerUnavailableError:
            return None
        finally:
            await client.close()
        for t in response.topics:
            for p in t.partitions:
                if t.name == topic and p.partition_index == index:
                    return PartitionView(int(p.leader_id), tuple(int(r) for r in p.replica_nodes),
                                         tuple(int(r) for r in p.isr_nodes))
        return None

    def controller(self) -> int:
        try:
            return int(self.metadata().controller_id)
        except Exception:  # noqa: BLE001
            return -1

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     config: Mapping[str, str] | None = None,
                     assignment: list[list[int]] | None = None) -> None:
        new = (NewTopic(name, len(assignment), replica_assignment=assignment,
                        config=dict(config or {}))
               if assignment else NewTopic(name, partitions, replication_factor,
                                           config=dict(config or {})))
        self.admin().create_topics([new])[name].result(timeout=30)
        # Every running broker's metadata cache must show the leaders, not just the one a
        # client happened to ask: brokers learn the image independently (as in Kafka).
        live = [int(b.config["node.id"]) for b in self.brokers if b.is_running()]
        self.wait_for(lambda: all(
            (p := self.partition(name, i, via=node)) is not None and p.leader >= 0
            for i in range(len(assignment) if assignment else partitions) for node in live),
            f"{name} has leaders on every running broker")

    def wait_for(self, condition: Callable[[], T], what: str, timeout: float = 30.0) -> T:
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- broker {b.config['node.id']} ---\n{b.log_tail(40)}"
                                 for b in self.brokers)
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n"
                                     f"{logs}")
            time.sleep(0.05)


# ------------------------------------------------------------------------ clients
@dataclass
class Acked:
    """What a producer saw acknowledged: (partition, offset) -> value, and its errors."""

    records: dict[tuple[int, int], bytes] = field(default_factory=dict)
    errors: list[KafkaError] = field(default_factory=list)
    sent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        with self.lock:
            return len(self.records)


class BackgroundProducer:
    """confluent-kafka producing numbered values in a thread until stopped."""

    def __init__(self, bootstrap: str, topic: str, config: Mapping[str, Any]) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2,
                                  "log_level": 0, **config})
        self.acked = Acked()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, error: KafkaError | None, message: Any) -> None:
        with self.acked.lock:
            if error is not None:
                self.acked.errors.append(error)
            else:
                self.acked.records[(message.partition(), message.offset())] = message.value()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, value=b"value-%08d" % i,
                                      on_delivery=self._on_delivery)
                i += 1
                self.acked.sent = i
            except BufferError:
                self.producer.poll(0.05)
                continue
            self.producer.poll(0)
            if i % 200 == 0:
                time.sleep(0.005)  # a steady stream, not a flood the test cannot outpace
        self.producer.flush(60)

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def stop(self) -> Acked:
        self._stop.set()
        self._thread.join(90)
        assert not self._thread.is_alive(), "producer did not finish flushing"
        return self.acked

    def __exit__(self, *exc: object) -> None:
        if self._thread.is_alive():
            self.stop()


def read_all(bootstrap: str, topic: str, partitions: int, expected: int,
             timeout: float = 60.0) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of ``topic`` from the start, by partition, until ``expected`` were read and
    the end of every partition was reached (or the deadline)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "strata-test-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "log_level": 0})
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            total = sum(len(v) for v in out.values())
            if total >= expected and len(at_end) == partitions:
                break
            for message in consumer.consume(1000, 0.5):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(message.partition())
                    continue
                at_end.discard(message.partition())
                out[message.partition()].append((message.offset(), message.value()))
    finally:
        with contextlib.suppress(Exception):
            consumer.close()
    return out


@contextlib.contextmanager
def cluster_on(backend: str, workdir: Path, brokers: int = 3,
               overrides: Mapping[str, str] | None = None,
               log_dir_names: Sequence[str] = ()) -> Iterator[ClusterProcesses]:
    """A started cluster on ``backend`` (``sqlite`` or ``etcd``), stopped afterwards. With
    ``log_dir_names``, each broker's ``log.dirs`` are those directories of its data dir
    (JBOD)."""
    etcd: EtcdProcess | None = None
    if backend == "etcd":
        etcd = EtcdProcess(workdir / "etcd")
        etcd.workdir.mkdir(parents=True, exist_ok=True)
        etcd.start()
        url = etcd.url
    else:
        url = f"sqlite:///{workdir / 'meta.db'}"
    cluster = ClusterProcesses(workdir, url, brokers, overrides)
    if log_dir_names:
        for broker in cluster.brokers:
            broker.config["log.dirs"] = ",".join(f"{broker.data_dir}/{n}" for n in log_dir_names)
    try:
        cluster.start()
        yield cluster
    finally:
        for broker in cluster.brokers:
            if broker.is_running():
                broker.kill()
        if etcd is not None:
            etcd.kill()
