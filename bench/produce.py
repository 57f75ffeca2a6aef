"""Producer benchmark in the style of Kafka's ``kafka-producer-perf-test``, with confluent-kafka.

Starts a Strata broker (``bench/local_broker.py``: a subprocess on free ports, its own temp log
dir) unless ``--bootstrap`` names a running cluster (any Kafka-compatible one: the same script
measures Apache Kafka for comparison), creates the topic, and sends ``--num-records`` records
of ``--record-size`` bytes as fast as the client goes (``acks=1`` by default). Prints Kafka's
lines: a progress line every 5 s and the final one::

    1000000 records sent, 180668.2 records/sec (17.23 MB/sec), 45.10 ms avg latency,
    310.00 ms max latency, 41 ms 50th, 95 ms 95th, 160 ms 99th, 290 ms 99.9th.

Latency is per record, from ``produce()`` to its delivery report (librdkafka's
``Message.latency()``), so it includes client batching (``linger.ms``), like Kafka's tool. The
delivery report callback is the producer's (``on_delivery`` in its config), not one per
``produce()`` call, and only appends the latency: Python work per record is the ``produce()``
call and that append.

Run: ``.venv/bin/python -m bench.produce [--num-records 1000000] [--record-size 100]
[--acks 1] [--partitions 1] [--bootstrap HOST:PORT] [--producer-props k=v ...]``.
It prints the client's CPU per record (the Python thread, librdkafka's threads) and, when it
starts the broker, the broker's own CPU time per record (``bench/process_cpu.py``);
``--cprofile FILE`` profiles the broker's CPU while the records are sent and prints the top
functions (``bench/cprofile_broker.py``).
``--replication`` runs, in one go: one broker at acks=1, then a 3-broker cluster
(one SQLite metadata store) with replication factor 3 at acks=1 and at acks=all, and prints
each figure as a share of the first.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .client_bench import add_workload_arguments, run_bench, server_cpu_line
from .cprofile_broker import profiling
from .local_broker import local_broker, local_cluster
from .process_cpu import client_cpu, cpu_seconds

MIB = 1024 * 1024
REPORT_INTERVAL_S = 5.0
DEFAULT_TIMEOUT_S = 3600.0  # a run that takes longer than this has hung: give up


class Stats:
    """Kafka's ``ProducerPerformance.Stats``: totals, a window for progress lines, and every
    latency for the percentiles.

    Per record the delivery callback only appends librdkafka's latency (seconds) to
    ``raw_latencies`` (one C-level list append): everything else — counts, sums, maxima, the
    5 s windows — is computed from that list when a line is printed, so the bookkeeping does
    not cost the Python thread as much as the ``produce()`` call itself.
    """

    def __init__(self, record_size: int) -> None:
        self.record_size = record_size
        self.start = time.perf_counter()
        # seconds, in delivery order (None where librdkafka has no timestamps: left out)
        self.raw_latencies: list[float | None] = []
        self.errors = 0
        self.window_start = self.start
        self.window_index = 0  # first raw latency of the current window

    @property
    def count(self) -> int:
        return len(self.raw_latencies)

    @property
    def latencies(self) -> list[float]:
        """Every record's latency in ms, in delivery order."""
        return [x * 1000.0 for x in self.raw_latencies if x is not None]

    def record(self, latency_ms: float) -> None:
        self.raw_latencies.append(latency_ms / 1000.0)

    def maybe_print_window(self) -> None:
        now = time.perf_counter()
        if now - self.window_start < REPORT_INTERVAL_S:
            return
        elapsed = now - self.window_start
        window = [x for x in self.raw_latencies[self.window_index:] if x is not None]
        n = len(self.raw_latencies) - self.window_index
        print(f"{n} records sent, {n / elapsed:.1f} records/sec "
              f"({n * self.record_size / MIB / elapsed:.2f} MB/sec), "
              f"{sum(window) * 1000 / max(len(window), 1):.1f} ms avg latency, "
              f"{max(window, default=0.0) * 1000:.1f} ms max latency.", flush=True)
        self.window_start, self.window_index = now, len(self.raw_latencies)

    def print_total(self) -> None:
        elapsed = time.perf_counter() - self.start
        measured = sorted(self.latencies)
        lat = measured or [0.0]

        def pct(p: float) -> int:
            return int(lat[min(len(lat) - 1, int(p * len(lat)))])

        n = self.count
        print(f"{n} records sent, {n / elapsed:.1f} records/sec "
              f"({n * self.record_size / MIB / elapsed:.2f} MB/sec), "
              f"{sum(measured) / max(len(measured), 1):.2f} ms avg latency, "
              f"{lat[-1]:.2f} ms max latency, {pct(0.5)} ms 50th, {pct(0.95)} ms 95th, "
              f"{pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th.", flush=True)
        if self.errors:
            print(f"{self.errors} records failed", flush=True)


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1
                 ) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor)],
                                  operation_timeout=30)
    for future in futures.values():
        try:
            future.result(30)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise


def parse_props(items: Sequence[str]) -> dict[str, str]:
    props = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--producer-props expects key=value, got {item!r}")
        props[key] = value
    return props


def run_producer(bootstrap: str, args: argparse.Namespace) -> Stats:
    stats = Stats(args.record_size)
    append = stats.raw_latencies.append

    def on_delivery(err: object, msg: Message) -> None:
        if err is None:
            append(msg.latency())
        else:
            stats.errors += 1

    # The delivery callback is set once for the producer (librdkafka's dr_msg_cb), not passed
    # to every produce(): every record still gets its report, without a callback reference
    # held per message (measured: ~0.5 us less Python per record).
    config = {"bootstrap.servers": bootstrap, "acks": str(args.acks), "linger.ms": "5",
              **parse_props(args.producer_props), "on_delivery": on_delivery}
    producer = Producer(config)
    value = os.urandom(args.record_size)

    produce, poll, topic = producer.produce, producer.poll, args.topic
    stats.start = stats.window_start = time.perf_counter()
    deadline = stats.start + getattr(args, "timeout_s", DEFAULT_TIMEOUT_S)
    for i in range(args.num_records):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.005)
                if time.perf_counter() > deadline:
                    raise TimeoutError(f"{i} of {args.num_records} records queued by the "
                                       "deadline") from None
        if i & 1023 == 0:
            poll(0)
            stats.maybe_print_window()
    while producer.flush(1.0):
        stats.maybe_print_window()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{len(producer)} records undelivered by the deadline")
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_workload_arguments(parser, topic="strata-bench", partitions=1)
    parser.add_argument("--acks", default="1", choices=["0", "1", "-1", "all"])
    parser.add_argument("--producer-props", nargs="*", default=[], metavar="KEY=VALUE",
                        help="librdkafka producer settings, e.g. linger.ms=0 batch.size=16384")
    parser.add_argument("--cprofile", type=Path, metavar="FILE",
                        help="cProfile the broker (CPU time) while producing; stats to FILE")
    parser.add_argument("--replication", action="store_true",
                        help="the replication suite: 1 broker acks=1, then 3 brokers with "
                             "replication factor 3 at acks=1 and acks=all, in one run")
    args = parser.parse_args(argv)
    if args.replication:
        return replication_suite(args)

    pids: list[int] = []

    def bench(bootstrap: str) -> None:
        create_topic(bootstrap, args.topic, args.partitions)
        cpu_before = cpu_seconds(pids)
        with profiling(pids if args.cprofile else []), client_cpu() as client:
            stats = run_producer(bootstrap, args)
        stats.print_total()
        print(client[0].line(stats.count), flush=True)
        if pids:
            cpu = cpu_seconds(pids) - cpu_before
            print(server_cpu_line("broker", cpu, stats.count), flush=True)

    return run_bench(bench, args.bootstrap, pids=pids, cprofile=args.cprofile)


def replication_suite(args: argparse.Namespace) -> int:
    """The replication benchmark: acks=all on 3 replicas as a share of 1 broker acks=1."""
    figures: dict[str, float] = {}

    def one(label: str, bootstrap: str, acks: str, replication_factor: int) -> None:
        run = argparse.Namespace(**{**vars(args), "acks": acks,
                                    "topic": f"{args.topic}-{label}"})
        create_topic(bootstrap, run.topic, args.partitions, replication_factor)
        print(f"# {label}: acks={acks}, replication factor {replication_factor}", flush=True)
        stats = run_producer(bootstrap, run)
        stats.print_total()
        figures[label] = stats.count / (time.perf_counter() - stats.start)

    with local_broker() as bootstrap:
        one("1-broker", bootstrap, "1", 1)
    with local_cluster(3) as bootstrap:
        one("3-brokers-acks1", bootstrap, "1", 3)
        one("3-brokers-acksall", bootstrap, "all", 3)
    base = figures["1-broker"]
    for label, value in figures.items():
        print(f"{label}: {value:,.0f} records/sec ({value / base:.0%} of 1 broker acks=1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
