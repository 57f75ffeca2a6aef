"""Strata at partition and connection scale (issue 23, item 4): ``make bench-scale``.

Two measurements, each on its own 3-broker cluster (``bench/local_broker.py``'s
``local_cluster``, one SQLite metadata store, free loopback ports):

1. Partitions. One topic of ``--partitions`` (10,000) partitions, replication factor 3:
   - time to READY: from the CreateTopics call until Metadata (polled from outside with
     confluent-kafka) shows every partition with a leader and a full ISR;
   - resident memory of each broker (``VmRSS`` of ``/proc/PID/status``) once READY;
   - Metadata latency for all topics: ``--metadata-requests`` requests (20) on one plain
     socket (Metadata v8, ``topics`` null, encoded by ``strata.protocol``), each timed from the
     send to the response's last byte (p50 / p99, nearest rank); the first answer is decoded
     and must list every partition;
   - recovery: once every broker holds all its partitions' logs (READY comes from Metadata,
     which the controller's registrations answer before the brokers have created their logs),
     every broker killed with SIGKILL, all three restarted at once on the same data
     and metadata store, and timed from the kill until Metadata shows every partition ready
     again and one acks=all record to each of ``--sample`` (100) partitions spread over the
     topic has been acknowledged; then each broker's memory again.
2. Connections. ``--producers`` (20) native producers (``build/strata_perf``, 100-byte
   records, acks=all) at once against a topic of ``--producer-partitions`` (6) partitions,
   RF 3: first alone, then with ``--idle-connections`` (2,000) idle client connections open,
   spread over the brokers; each is a plain socket that completed an ApiVersions exchange and
   must still answer one after the producers finish. The cost is the throughput lost.

Printed: Kafka perf-test style lines for each step, the load average before and after, one
table (``bench/results.py``), and issue 23's targets (READY <= 30 s, recovery <= 60 s, <= 1 GiB
resident per broker, idle connections cost <= 10% of throughput) each marked met or not met.
Nothing here asserts a timing: a shared machine moves them all.

Run: ``.venv/bin/python -m bench.scale [--partitions 10000] [--idle-connections 2000]
[--producers 20] [--producer-records 50000] [--skip-partitions] [--skip-connections]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strata.protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    build_request,
    decode_response,
    encode_request,
)

from . import native_perf
from .local_broker import local_cluster
from .native_perf import PerfResult, Produce
from .process_cpu import cpu_seconds
from .results import Latency, Row, Throughput, render_table
from .scale_figures import (
    GIB,
    PartitionState,
    idle_cost,
    percentile,
    rss_bytes,
    sample,
    targets,
    unready,
)

BROKERS = 3
REPLICATION = 3
RECORD_SIZE = 100
CLIENT_ID = "strata-bench-scale"
POLL_S = 0.5
_SIZE = struct.Struct(">i")
DURABILITY = "acks=all: all 3 replicas' logs (page cache)"


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _title(text: str) -> None:
    print(f"\n# {text}", flush=True)


def broker_rss(pids: Sequence[int]) -> dict[str, int]:
    """Resident bytes of each broker process, keyed ``broker-N`` (its data dir's name)."""
    out = {}
    for pid in pids:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        match = re.search(r"(broker-\d+)/broker\.properties", cmdline)
        name = match.group(1) if match else f"pid {pid}"
        out[name] = rss_bytes(Path(f"/proc/{pid}/status").read_text(errors="replace"))
    return dict(sorted(out.items()))


def _print_rss(when: str, rss: dict[str, int]) -> None:
    print(f"resident memory {when}: " + ", ".join(f"{name} {size / 2**20:,.0f} MiB"
                                                  for name, size in rss.items()), flush=True)


class Wire:
    """One plain Kafka connection: blocking requests, one at a time (enough for a benchmark's
    idle connections and its timed Metadata requests)."""

    def __init__(self, address: str, timeout_s: float) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self._correlation_id = 0

    def send(self, api_key: ApiKey, version: int, fields: dict[str, Any]) -> int:
        self._correlation_id += 1
        header = RequestHeader(api_key, version, self._correlation_id, CLIENT_ID)
        self.sock.sendall(encode_request(header, build_request(api_key, version, fields)))
        return self._correlation_id

    def read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._read(4))
        return self._read(size)

    def _read(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(min(n - len(data), 1 << 20))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def request(self, api_key: ApiKey, version: int, fields: dict[str, Any]) -> Any:
        sent = self.send(api_key, version, fields)
        got, body = decode_response(self.read_frame(), api_key, version)
        if got != sent:
            raise ConnectionError(f"correlation id {got}, expected {sent}")
        return body

    def api_versions(self) -> None:
        body = self.request(ApiKey.API_VERSIONS, 3, {"client_software_name": CLIENT_ID,
                                                    "client_software_version": "0"})
        if body.error_code != ErrorCode.none:
            raise ConnectionError(f"ApiVersions answered {body.error_code}")

    def close(self) -> None:
        self.sock.close()


METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}


def metadata_latency(address: str, requests: int, partitions: int, timeout_s: float
                     ) -> list[float]:
    """Milliseconds of ``requests`` Metadata v8 requests for all topics on one connection; the
    first answer is decoded and must hold every one of ``partitions`` (the rest are read whole,
    not decoded: the broker's latency, not this client's decoding)."""
    wire = Wire(address, timeout_s)
    try:
        body = wire.request(ApiKey.METADATA, 8, METADATA_ALL)
        listed = sum(len(t.partitions) for t in body.topics)
        if listed < partitions:
            raise RuntimeError(f"Metadata for all topics lists {listed} partitions, "
                               f"fewer than {partitions}")
        out = []
        for _ in range(requests):
            started = time.perf_counter()
            wire.send(ApiKey.METADATA, 8, METADATA_ALL)
            wire.read_frame()
            out.append((time.perf_counter() - started) * 1e3)
        return out
    finally:
        wire.close()


def partition_states(admin: AdminClient, topic: str) -> list[PartitionState]:
    found = admin.list_topics(topic, timeout=30).topics.get(topic)
    if found is None or found.error is not None:
        return []
    return [PartitionState(p.id, p.leader, tuple(p.replicas), tuple(p.isrs),
                           0 if p.error is None else p.error.code())
            for p in found.partitions.values()]


def wait_ready(bootstrap: str, topic: str, partitions: int, deadline: float) -> int:
    """Poll Metadata until all ``partitions`` are ready; return how many are not (0: ready)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    missing = partitions
    while True:
        states = partition_states(admin, topic)
        missing = partitions - len(states) + len(unready(states, REPLICATION))
        if missing == 0 or time.monotonic() > deadline:
            return missing
        time.sleep(POLL_S)


def wait_logs_created(root: Path, topic: str, partitions: int, deadline: float) -> int:
    """Poll every broker's log directory until it holds a log of each of ``partitions``
    (RF 3 on 3 brokers: every broker hosts every partition); how many are missing (0: all)."""
    while True:
        missing = sum(partitions - sum(1 for _ in (data / "data").glob(f"{topic}-*"))
                      for data in root.glob("broker-*"))
        if missing <= 0 or time.monotonic() >= deadline:
            return max(missing, 0)
        time.sleep(0.2)


def produce_sample(bootstrap: str, topic: str, partitions: Sequence[int], deadline: float
                   ) -> list[int]:
    """One acks=all record to each partition, retried until acknowledged or the deadline;
    returns the partitions never acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 10_000, "enable.idempotence": False})
    acked: set[int] = set()

    def report(err: KafkaError | None, msg: Message) -> None:
        partition = msg.partition()
        if err is None and partition is not None:
            acked.add(partition)

    while not acked.issuperset(partitions) and time.monotonic() < deadline:
        for partition in sorted(set(partitions) - acked):
            producer.produce(topic, b"x" * RECORD_SIZE, partition=partition, on_delivery=report)
        producer.flush(min(max(deadline - time.monotonic(), 1.0), 15.0))
    producer.flush(1.0)
    return sorted(set(partitions) - acked)


def partitions_scale(args: argparse.Namespace) -> dict[str, Any]:
    """Measurement 1; returns its figures (``None`` where a step did not complete)."""
    figures: dict[str, Any] = {"ready_s": None, "recovery_s": None, "rss": {}}
    topic = "scale"
    with tempfile.TemporaryDirectory(prefix="strata-scale-") as root_dir:
        root = Path(root_dir)
        pids: list[int] = []
        with local_cluster(BROKERS, pids=pids, root=root) as bootstrap:
            _title(f"{args.partitions:,} partitions, {BROKERS} brokers, RF {REPLICATION}: "
                   "time to READY")
            started = time.monotonic()
            admin = AdminClient({"bootstrap.servers": bootstrap})
            future = admin.create_topics([NewTopic(topic, args.partitions, REPLICATION)],
                                         operation_timeout=args.timeout_s)[topic]
            try:
                future.result(args.timeout_s)
            except KafkaException as exc:  # e.g. POLICY_VIOLATION: beyond the fd capacity
                print(f"NOT CREATED: CreateTopics of {args.partitions:,} partitions: "
                      f"{exc.args[0]}", flush=True)
                return figures
            del admin, future  # a lingering client would log the stopped brokers' ports
            created = time.monotonic() - started
            missing = wait_ready(bootstrap, topic, args.partitions, started + args.timeout_s)
            ready_s = time.monotonic() - started
            if missing:
                print(f"NOT READY: {missing:,} of {args.partitions:,} partitions still without "
                      f"a leader or a full ISR after {ready_s:.1f} s", flush=True)
            else:
                figures["ready_s"] = ready_s
                print(f"{args.partitions:,} partitions READY in {ready_s:.2f} s (CreateTopics "
                      f"answered in {created:.2f} s)", flush=True)
            figures["rss"]["after READY"] = rss = broker_rss(pids)
            _print_rss("after READY", rss)

            _title(f"Metadata for all topics: {args.metadata_requests} requests, one connection")
            address = bootstrap.split(",")[0]
            lat = metadata_latency(address, args.metadata_requests, args.partitions,
                                   args.timeout_s)
            figures["metadata_ms"] = lat
            print(f"{len(lat)} Metadata requests, {statistics.fmean(lat):.2f} ms avg latency, "
                  f"{max(lat):.2f} ms max latency, {percentile(lat, 50):.2f} ms 50th, "
                  f"{percentile(lat, 99):.2f} ms 99th.", flush=True)

            # READY is what Metadata says; each broker may still be creating its logs. Kill
            # a cluster that has them all, so recovery is the restart of a running cluster.
            missing = wait_logs_created(root, topic, args.partitions,
                                        started + args.timeout_s)
            held_s = time.monotonic() - started
            print(f"every broker holds its {args.partitions:,} logs {held_s:.2f} s after "
                  "CreateTopics" if not missing else
                  f"NOT ALL LOGS CREATED: {missing:,} missing at the deadline", flush=True)
            _title(f"kill -9 of all {BROKERS} brokers, restart on the same data")
            killed = time.monotonic()
            for pid in list(pids):
                os.kill(pid, signal.SIGKILL)
        try:
            recover(args, root, topic, killed, figures)
        except RuntimeError as exc:  # a broker that did not restart within local_broker's bound
            print(f"NOT RECOVERED: {exc}", flush=True)
        finally:
            if args.keep_logs is not None:  # the restarted brokers' logs: the evidence
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                for log in sorted(root.glob("broker-*/broker.log")):
                    shutil.copy(log, args.keep_logs / f"{log.parent.name}.log")
                print(f"the restarted brokers' logs are in {args.keep_logs}", flush=True)
    return figures


def recover(args: argparse.Namespace, root: Path, topic: str, killed: float,
            figures: dict[str, Any]) -> None:
    """Restart every broker at once on ``root``; time recovery from ``killed``."""
    pids: list[int] = []
    with local_cluster(BROKERS, pids=pids, root=root, parallel=True) as bootstrap:
        started_s = time.monotonic() - killed
        print(f"{BROKERS} brokers restarted and registered {started_s:.2f} s after the "
              "kill", flush=True)
        deadline = killed + args.timeout_s
        missing = wait_ready(bootstrap, topic, args.partitions, deadline)
        leaders_s = time.monotonic() - killed
        chosen = sample(args.partitions, args.sample)
        failed = produce_sample(bootstrap, topic, chosen, deadline) if not missing \
            else chosen
        recovery_s = time.monotonic() - killed
        if missing or failed:
            print(f"NOT RECOVERED after {recovery_s:.1f} s: {missing:,} partitions not "
                  f"ready, {len(failed)} of {len(chosen)} sampled produces not "
                  "acknowledged", flush=True)
        else:
            figures["recovery_s"] = recovery_s
            print(f"recovered in {recovery_s:.2f} s after the kill: every partition led "
                  f"with a full ISR at {leaders_s:.2f} s; {len(chosen)} acks=all records "
                  f"to {len(chosen)} partitions acknowledged", flush=True)
        figures["rss"]["after recovery"] = rss = broker_rss(pids)
        _print_rss("after recovery", rss)


@contextlib.contextmanager
def idle_connections(bootstrap: str, count: int, timeout_s: float) -> Iterator[list[Wire]]:
    """``count`` connections spread over the brokers, each past ApiVersions, then idle; on
    leaving, each must still answer ApiVersions (raises otherwise) and is closed."""
    addresses = bootstrap.split(",")
    wires: list[Wire] = []
    try:
        for i in range(count):
            wire = Wire(addresses[i % len(addresses)], timeout_s)
            wires.append(wire)
            wire.api_versions()
        yield wires
        alive = 0
        for wire in wires:
            with contextlib.suppress(OSError):
                wire.api_versions()
                alive += 1
        print(f"{alive:,} of {count:,} idle connections still open and answering ApiVersions "
              "after the run", flush=True)
        if alive != count:
            raise RuntimeError(f"{count - alive} idle connections were lost")
    finally:
        for wire in wires:
            wire.close()


def producers(bootstrap: str, topic: str, args: argparse.Namespace, pids: list[int],
              label: str) -> tuple[Throughput, Latency]:
    """``args.producers`` native producers at once; their records over the longest run."""
    produce = Produce(topic, args.producer_records, acks="all")
    before = cpu_seconds(pids)
    with ThreadPoolExecutor(args.producers) as pool:
        results: list[PerfResult] = list(pool.map(
            lambda _: native_perf.run(native_perf.produce_args(bootstrap, produce,
                                                               args.timeout_s),
                                      timeout_s=args.timeout_s, echo=False),
            range(args.producers)))
    cpu = cpu_seconds(pids) - before
    records = sum(r.records for r in results)
    seconds = max(r.seconds for r in results)
    failed = sum(r.failed for r in results)
    p50 = statistics.median(r.latency_ms.p50 for r in results if r.latency_ms)
    p99 = max(r.latency_ms.p99 for r in results if r.latency_ms)
    print(f"{records} records sent, {records / seconds:.1f} records/sec "
          f"({records * RECORD_SIZE / seconds / 2**20:.2f} MB/sec), {p50:.0f} ms 50th "
          f"(median of the producers), {p99:.0f} ms 99th (the worst producer's); {failed} "
          f"failed ({label})", flush=True)
    print(f"brokers' CPU: {cpu:.2f} s, {cpu * 1e6 / max(records, 1):.2f} us/record",
          flush=True)
    return Throughput(records, seconds, RECORD_SIZE, cpu), Latency(p50, p99, "produce->ack")


def connections_scale(args: argparse.Namespace) -> dict[str, Any]:
    """Measurement 2: the producers alone, then beside the idle connections."""
    topic = "scale-producers"
    pids: list[int] = []
    with local_cluster(BROKERS, pids=pids) as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, args.producer_partitions, REPLICATION)],
                            operation_timeout=60)[topic].result(60)
        del admin
        wait_ready(bootstrap, topic, args.producer_partitions, time.monotonic() + 60)
        _title(f"warm-up (not counted): {args.producers} producers")
        producers(bootstrap, topic, args, pids, "warm-up")
        _title(f"{args.producers} producers alone: {args.producer_records:,} records of "
               f"{RECORD_SIZE} bytes each, acks=all, {args.producer_partitions} partitions")
        alone = producers(bootstrap, topic, args, pids, "alone")
        _title(f"{args.producers} producers beside {args.idle_connections:,} idle connections")
        with idle_connections(bootstrap, args.idle_connections, args.timeout_s):
            print(f"{args.idle_connections:,} idle connections open (ApiVersions done)",
                  flush=True)
            rss = broker_rss(pids)
            _print_rss(f"with {args.idle_connections:,} idle connections", rss)
            with_idle = producers(bootstrap, topic, args, pids,
                                  f"with {args.idle_connections:,} idle connections")
    return {"alone": alone, "with_idle": with_idle, "rss": rss}


def _raise_fd_limit(needed: int) -> int:
    """Raise this process's open file limit to ``needed`` where it is lower — the hard limit
    too when allowed (root) — and return the soft limit. The brokers inherit it: each needs
    one descriptor per partition replica plus a pool of 256 for older segments (it refuses
    creations beyond its capacity) and one per connection; Kafka's own guidance is 100,000 or
    more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, max(hard, needed)))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--sample", type=int, default=100,
                        help="partitions produced to (acks=all) to call the recovery done")
    parser.add_argument("--metadata-requests", type=int, default=20)
    parser.add_argument("--idle-connections", type=int, default=2000)
    parser.add_argument("--producers", type=int, default=20)
    parser.add_argument("--producer-records", type=int, default=50_000,
                        help="records per producer, each run")
    parser.add_argument("--producer-partitions", type=int, default=6)
    parser.add_argument("--skip-partitions", action="store_true")
    parser.add_argument("--skip-connections", action="store_true")
    parser.add_argument("--keep-logs", type=Path, metavar="DIR",
                        help="copy the restarted brokers' logs there")
    parser.add_argument("--timeout-s", type=float, default=300.0,
                        help="bound of each wait (READY, recovery, a producer run)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: stop every broker
    limit = _raise_fd_limit(max(args.idle_connections, 2 * args.partitions) + 8192)

    load_before, started = _load(), time.monotonic()
    print(f"# Strata at scale; {os.cpu_count()} cores; load average {load_before}; open file "
          f"limit {limit:,}", flush=True)
    parts = None if args.skip_partitions else partitions_scale(args)
    conns = None if args.skip_connections else connections_scale(args)
    print(f"\n# Results (scale): load average before {load_before}, after {_load()}; "
          f"{time.monotonic() - started:.0f} s\n", flush=True)
    print(render_table(rows(args, parts, conns)), flush=True)
    print("\n# Targets (issue 23)", flush=True)
    for target in targets_of(parts, conns):
        print(f"- {target}", flush=True)
    return 0


def rows(args: argparse.Namespace, parts: dict[str, Any] | None,
         conns: dict[str, Any] | None) -> list[Row]:
    out = []
    if conns is not None:
        for key, what in (("alone", f"{args.producers} producers alone"),
                          ("with_idle", f"{args.producers} producers beside "
                                        f"{args.idle_connections:,} idle connections")):
            throughput, latency = conns[key]
            out.append(Row("Strata", f"3 brokers, RF 3, {args.producer_partitions} partitions, "
                                     f"acks=all, {what} (native)", DURABILITY,
                           produce=throughput, latency=latency))
    if parts is not None and "metadata_ms" in parts:
        lat = parts["metadata_ms"]
        out.append(Row("Strata", f"Metadata, all topics, {args.partitions:,} partitions RF 3",
                       "-", latency=Latency(percentile(lat, 50), percentile(lat, 99),
                                            f"{len(lat)} requests, plain socket")))
    return out


def targets_of(parts: dict[str, Any] | None, conns: dict[str, Any] | None) -> list[str]:
    rss_max = None
    lines = []
    if parts is not None:
        sizes = [size for when in parts["rss"].values() for size in when.values()]
        rss_max = max(sizes) if sizes else None
        for when, per_broker in parts["rss"].items():
            lines.append(f"resident memory {when}: " + ", ".join(
                f"{name} {size / GIB:.2f} GiB" for name, size in per_broker.items()))
    cost = None
    if conns is not None:
        cost = idle_cost(conns["alone"][0].records_per_s, conns["with_idle"][0].records_per_s)
    verdicts = targets(None if parts is None else parts["ready_s"],
                       None if parts is None else parts["recovery_s"], rss_max, cost)
    return [t.line() for t in verdicts] + lines


if __name__ == "__main__":
    raise SystemExit(main())
