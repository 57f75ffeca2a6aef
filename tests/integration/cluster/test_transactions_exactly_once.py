"""Exactly once under kill -9: consume-transform-produce across coordinator, leader and app
crashes (issue 19, "Tests — real clients, real faults", second bullet).

A 3-broker cluster holds an input and an output topic (3 partitions, RF 3,
``min.insync.replicas=2``). ``transform_app.py`` runs as a process of its own: it reads the
input with group ``ctp`` (read_committed) and, one transaction per poll, writes one output
record per input record and sends its offsets to the transaction. While it runs the test
SIGKILLs, at progress points drawn from a seeded random (``STRATA_FUZZ_SEED`` overrides the
seed, which is printed), the transaction coordinator of the app's ``transactional.id``, the
leader of an output partition and the app itself, and restarts each — at least one fault of
each kind. The app commits no further than a budget the test raises right after each kill,
so every fault lands while it runs, whatever the machine's speed. At the end a
read_committed consumer sees every input number exactly once, the group's committed offsets
are the input's end offsets, and a read_uncommitted reader sees at least as many records. A
failure names the numbers lost or duplicated, with the offsets and producer epochs of the
batches that hold them.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Final

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from strata.protocol import ApiKey, ErrorCode
from strata.storage import record_batch as rb

from ..clients.wire import KafkaWire, fetch
from .cluster_processes import ClusterProcesses, cluster_on, read_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INPUT: Final = "ctp-in"
OUTPUT: Final = "ctp-out"
GROUP: Final = "ctp"
TID: Final = "ctp-app"
PARTITIONS: Final = 3
RECORDS: Final = 3000
APP: Final = Path(__file__).with_name("transform_app.py")
APP_TIMEOUT_S: Final = 100.0
BATCH: Final = 25  # records per transaction at most
MAX_APP_STARTS: Final = 12
KINDS: Final = ("coordinator", "leader", "app")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    """SQLite only: the metadata store plays no part in transactions."""
    with cluster_on("sqlite", tmp_path, 3, {"transaction.state.log.num.partitions": "3"}) as c:
        yield c


class App:
    """The transform application's process: started, SIGKILLed (by PID) and restarted."""

    def __init__(self, cluster: ClusterProcesses, ends: list[int], log_path: Path) -> None:
        self.cluster = cluster
        self.ends = ends
        self.log_path = log_path
        self.budget_path = log_path.with_suffix(".budget")
        self.allow(0)
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.exits: list[int] = []

    def start(self) -> None:
        assert self.starts < MAX_APP_STARTS, f"app started {self.starts} times\n{self.log_tail()}"
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"===== start #{self.starts} =====\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [sys.executable, str(APP), self.cluster.bootstrap, INPUT, OUTPUT, GROUP, TID,
                 ",".join(map(str, self.ends)), "--batch", str(BATCH),
                 "--budget", str(self.budget_path),
                 "--timeout", str(APP_TIMEOUT_S)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def allow(self, records: int) -> None:
        """Let the app commit up to about ``records`` input records (replaces the file)."""
        staged = self.budget_path.with_suffix(".staged")
        staged.write_text(str(records), encoding="ascii")
        staged.replace(self.budget_path)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.exits.append(self.process.wait(10))

    def finished(self) -> bool:
        """True once an instance exited 0; a failed instance is replaced (bounded)."""
        assert self.process is not None
        code = self.process.poll()
        if code is None:
            return False
        if code == 0:
            return True
        self.exits.append(code)
        self.start()
        return False

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.kill()


def seed() -> int:
    value = int(os.environ.get("STRATA_FUZZ_SEED", random.randrange(1 << 32)))
    print(f"STRATA_FUZZ_SEED={value}")
    return value


def write_input(cluster: ClusterProcesses) -> list[int]:
    """RECORDS numbered values, every one acknowledged; returns the partitions' end offsets."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5, "log_level": 0})
    failed: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(error)

    for n in range(RECORDS):
        producer.produce(INPUT, key=b"%d" % n, value=b"%d" % n, partition=n % PARTITIONS,
                         on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed, failed[:3]
    ends = [RECORDS // PARTITIONS + (1 if p < RECORDS % PARTITIONS else 0)
            for p in range(PARTITIONS)]
    reader = group_reader(cluster)
    try:
        marks = [reader.get_watermark_offsets(TopicPartition(INPUT, p), 10)[1]
                 for p in range(PARTITIONS)]
    finally:
        reader.close()
    assert marks == ends, f"input high watermarks {marks}, {ends} records written"
    return ends


def committed_offsets(cluster: ClusterProcesses) -> list[int]:
    """The group's committed input offsets (-1 where none or when no broker answers), read by
    a fresh consumer."""
    consumer = group_reader(cluster)
    try:
        return [max(p.offset, -1) if p.error is None else -1 for p in
                consumer.committed([TopicPartition(INPUT, p) for p in range(PARTITIONS)], 5)]
    except Exception:  # noqa: BLE001 - a broker just died: ask again
        return [-1] * PARTITIONS
    finally:
        with contextlib.suppress(Exception):
            consumer.close()


class Progress:
    """The group's committed input records, polled by one consumer (replaced when it fails);
    ``last`` keeps the last offsets read, for the report of a stall."""

    def __init__(self, cluster: ClusterProcesses) -> None:
        self.cluster = cluster
        self.consumer: Consumer | None = None
        self.last = [-1] * PARTITIONS
        self.failures = 0

    def committed(self) -> int:
        try:
            if self.consumer is None:
                self.consumer = group_reader(self.cluster)
            found = self.consumer.committed(
                [TopicPartition(INPUT, p) for p in range(PARTITIONS)], 5)
            if any(p.error is not None for p in found):
                raise RuntimeError(str([p.error for p in found]))
            self.last = [max(p.offset, -1) for p in found]
        except Exception:  # noqa: BLE001 - a broker just died: a new consumer asks again
            self.failures += 1
            self.close()
        return sum(self.last)

    def close(self) -> None:
        if self.consumer is not None:
            with contextlib.suppress(Exception):
                self.consumer.close()
        self.consumer = None


def group_reader(cluster: ClusterProcesses) -> Consumer:
    """A consumer of the group that never joins it: it only reads the committed offsets."""
    return Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP,
                     "enable.auto.commit": False, "isolation.level": "read_uncommitted",
                     "log_level": 0})


def coordinator_node(cluster: ClusterProcesses) -> int | None:
    """The node FindCoordinator names for the app's transactional.id (asked of a live broker)."""
    for broker in cluster.brokers:
        if not broker.is_running():
            continue
        try:
            with KafkaWire.to(broker.bootstrap) as wire:
                found = wire.request(ApiKey.FIND_COORDINATOR, 3, {"key": TID, "key_type": 1})
        except OSError:
            continue
        if found.error_code == ErrorCode.none:
            return int(found.node_id)
    return None


def leader_of(cluster: ClusterProcesses, partition: int) -> int | None:
    view = cluster.partition(OUTPUT, partition)
    return view.leader if view is not None and view.leader >= 0 else None


def wait_node(cluster: ClusterProcesses, node: Callable[[], int | None], what: str) -> int:
    """The node ``node()`` names, once it names one (node 0 is falsy for ``wait_for``)."""
    found: list[int] = []

    def named() -> bool:
        if (n := node()) is not None:
            found.append(n)
        return bool(found)

    cluster.wait_for(named, what)
    return found[-1]


def crash_broker(cluster: ClusterProcesses, node: int, moved: Callable[[], bool], what: str,
                 rng: random.Random, killed: Callable[[], None]) -> None:
    """SIGKILL ``node`` and start it again: at once (a crash and restart faster than the
    cluster's 3 s lease) or once ``moved()`` says its role went to another broker."""
    failover = rng.random() < 0.5
    print(f"kill -9 broker {node} ({what}), restart {'after failover' if failover else 'at once'}")
    cluster.broker(node).kill()
    killed()
    if failover:
        cluster.wait_for(moved, f"{what} moved off broker {node}")
    cluster.broker(node).start()


def inject(cluster: ClusterProcesses, app: App, kind: str, rng: random.Random,
           killed: Callable[[], None]) -> None:
    """One fault of ``kind``; ``killed`` runs right after the SIGKILL, before any restart."""
    if kind == "app":
        print("kill -9 the application")
        app.kill()
        killed()
        app.start()
    elif kind == "coordinator":
        node = wait_node(cluster, lambda: coordinator_node(cluster), "a transaction coordinator")
        crash_broker(cluster, node, lambda: coordinator_node(cluster) not in (node, None),
                     "the transaction coordinator", rng, killed)
    else:
        index = rng.randrange(PARTITIONS)
        leader = wait_node(cluster, lambda: leader_of(cluster, index), f"{OUTPUT}-{index}")
        crash_broker(cluster, leader,
                     lambda: (p := cluster.partition(OUTPUT, index)) is not None
                     and p.leader not in (leader, -1), f"the leader of {OUTPUT}-{index}", rng,
                     killed)


def batch_headers(cluster: ClusterProcesses, partition: int) -> list[rb.BatchHeader]:
    """Every batch header of an output partition, read from its leader up to the high mark."""
    leader = wait_node(cluster, lambda: leader_of(cluster, partition), "an output leader")
    headers: list[rb.BatchHeader] = []
    with KafkaWire.to(cluster.broker(leader).bootstrap) as wire:
        offset = 0
        while True:
            found = fetch(wire, OUTPUT, partition, offset)
            batch = [h for _, h in rb.iter_headers(bytes(found.records or b""))]
            headers.extend(batch)
            if not batch or (offset := batch[-1].base_offset + batch[-1].last_offset_delta + 1
                              ) >= found.high_watermark:
                return headers


def evidence(cluster: ClusterProcesses, numbers: list[int],
             where: dict[int, list[tuple[int, int]]]) -> str:
    """Each number's (partition, offset) copies with the producer id/epoch of their batches."""
    headers = {p: batch_headers(cluster, p) for p in range(PARTITIONS)}
    lines = []
    for n in numbers[:20]:
        copies = []
        for partition, offset in where.get(n, []):
            batch = next((h for h in headers[partition]
                          if h.base_offset <= offset <= h.base_offset + h.last_offset_delta), None)
            copies.append(f"{partition}@{offset} pid={batch and batch.producer_id} "
                          f"epoch={batch and batch.producer_epoch}")
        lines.append(f"  {n}: {copies or 'nowhere'}")
    return "\n".join(lines)


def test_consume_transform_produce_is_exactly_once_under_kill_9(
        cluster: ClusterProcesses, tmp_path: Path) -> None:
    rng = random.Random(seed())
    started = time.monotonic()
    for topic in (INPUT, OUTPUT):
        cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    ends = write_input(cluster)
    faults = [*KINDS, rng.choice(KINDS)]
    rng.shuffle(faults)
    # Each fault once the committed input moved on by a random step from the previous fault's;
    # the app may run a random slack past it, so the kill finds transactions in flight, and
    # waits there (a budget the test raises) so that no fault comes after the end.
    plan = [(rng.randrange(50, 400), rng.randrange(25, 200), kind) for kind in faults]
    print(f"fault plan (records between faults, slack, kind): {plan}")

    app = App(cluster, ends, tmp_path / "transform_app.log")
    progress = Progress(cluster)
    target = 0
    try:
        app.allow(plan[0][0] + plan[0][1])
        app.start()
        for i, (step, _slack, kind) in enumerate(plan):
            target += step
            cluster.wait_for(
                lambda: not app.finished()
                and progress.committed() >= target,  # noqa: B023 - called now
                f"{target} records committed before the {kind} fault", 60)
            print(f"at {progress.committed()}/{RECORDS} committed: {kind}")
            following = plan[i + 1] if i + 1 < len(plan) else None
            inject(cluster, app, kind, rng, partial(
                app.allow, target + following[0] + following[1] if following else RECORDS))
        cluster.wait_for(app.finished, "the application to finish", 90)
    finally:
        app.stop()
        progress.close()
        print(f"committed offsets last read {progress.last} ({progress.failures} failed reads)")
        print(f"app exits {app.exits}, {app.starts} starts\n{app.log_tail()}")

    committed = read_all(cluster.live_bootstrap(), OUTPUT, PARTITIONS, RECORDS)
    where: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in committed.items():
        for offset, value in records:
            where[int(value.removeprefix(b"out-"))].append((partition, offset))
    missing = [n for n in range(RECORDS) if n not in where]
    duplicated = [n for n, copies in where.items() if len(copies) > 1]
    assert not missing and not duplicated and len(where) == RECORDS, (
        f"{len(missing)} missing, {len(duplicated)} duplicated:\n"
        f"{evidence(cluster, missing + duplicated, where)}")
    # EndTxn answers once the commit is decided; the markers follow: poll for the offsets.
    deadline = time.monotonic() + 30
    while (offsets := committed_offsets(cluster)) != ends and time.monotonic() < deadline:
        time.sleep(0.1)
    assert offsets == ends, f"group {GROUP} committed {offsets}, input ends at {ends}"
    uncommitted = sum(h.records_count for p in range(PARTITIONS)
                      for h in batch_headers(cluster, p) if not h.is_control)
    assert uncommitted >= RECORDS
    print(f"{RECORDS} records exactly once; {uncommitted - RECORDS} aborted records; "
          f"{time.monotonic() - started:.0f} s")
