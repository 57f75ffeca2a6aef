"""The benchmark suite: Strata against Redis Streams and NATS JetStream, in one run on
this machine, with the same record size (100 bytes) and record count for every system.

In order, each server started on free 127.0.0.1 ports in its own temp dir and stopped (by PID)
before the next starts, so no two compete for the CPU:

1. Strata, 1 broker (``bench/local_broker.py``): produce with confluent-kafka at acks=1
   (``bench/produce.py``'s loop and its ``kafka-producer-perf-test`` line), consume the same
   topic from the start (``bench/consume.py``; ``__consumer_offsets`` is created before, untimed),
   then end-to-end latency at a fixed rate on a
   second topic (``bench/latency.py``: 20,000 records/s for 10 s by default).
2. Strata, 3 brokers on one SQLite metadata store, replication factor 3, acks=all produce.
3. Redis Streams at its defaults (no AOF) and with ``appendonly yes`` + ``appendfsync
   everysec`` (``bench/redis_streams.py``: redis-benchmark XADD, redis-py XREAD).
4. NATS JetStream, file storage (``bench/jetstream.py``: acknowledged publish, pull consumer).

Then prints one table (``bench/results.py``) with each figure as a ratio to Strata's 1-broker
figure, each server's own CPU time per record moved (``bench/process_cpu.py``: user + system
seconds of its process(es) from ``/proc``, which a loaded machine hardly distorts, unlike the
wall-clock rates), for Strata's rows the client's own CPU per record (confluent-kafka's Python
thread + librdkafka's threads: what bounds those rates on 2 shared cores), and the load
average before and after (the machine may be shared).
``--profile DIR`` also samples the 1-broker broker with py-spy during its produce and consume
and prints the top frames (``bench/broker_profile.py``).

Run: ``.venv/bin/python -m bench.suite [--num-records 1000000 | --quick] [--latency-rate 20000]
[--latency-seconds 10] [--profile DIR]``; ``make bench`` installs the servers and runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from . import consume as strata_consume
from . import jetstream, latency, redis_streams
from .broker_profile import format_top, py_spy_record
from .client_bench import server_cpu_line
from .local_broker import local_broker, local_cluster
from .peer_servers import nats_server, redis_server
from .process_cpu import ClientCpu, client_cpu, cpu_seconds
from .produce import Stats, create_topic, run_producer
from .results import Latency, Row, Throughput, render_table

QUICK_RECORDS = 100_000

DURABILITY = {
    "strata-1": "acks=1: leader's log in the page cache; no fsync per write (Kafka's defaults)",
    "strata-3": "acks=all: all 3 replicas' logs (page cache), min.insync.replicas=1",
    "redis": "memory only; RDB snapshots by Redis's default save rules; no AOF",
    "redis-aof": "AOF appended per write, fsync once a second (appendfsync everysec)",
    "nats": "file storage, acked once written (page cache); fsync left to the server's "
            "periodic sync",
}


def _step(title: str) -> None:
    print(f"\n# {title}", flush=True)


def _print_server_cpu(what: str, seconds: float, records: int) -> None:
    print(server_cpu_line(what, seconds, records), flush=True)


def _with_cpu(figure: Throughput, seconds: float) -> Throughput:
    _print_server_cpu("server", seconds, figure.records)
    return dataclasses.replace(figure, server_cpu_s=seconds)


@contextlib.contextmanager
def _maybe_profile(profile_dir: Path | None, pids: list[int], name: str) -> Iterator[None]:
    if profile_dir is None or not pids:
        yield
        return
    out = profile_dir / f"{name}.raw.txt"
    with py_spy_record(pids[0], out):
        yield
    if out.exists():
        print(format_top(out), flush=True)


def _strata_produce(
    bootstrap: str, args: argparse.Namespace, topic: str, acks: str, pids: list[int],
    server: str, label: str, profile: contextlib.AbstractContextManager[None],
) -> tuple[Stats, float, float, ClientCpu]:
    """One timed confluent-kafka produce of the suite's records; prints its lines and returns
    (stats, seconds, the servers' CPU seconds, the client's CPU). Raises if records failed."""
    run = argparse.Namespace(acks=acks, topic=topic, num_records=args.num_records,
                             record_size=args.record_size, producer_props=[],
                             timeout_s=args.timeout_s)
    cpu_before = cpu_seconds(pids)
    with profile, client_cpu() as producer:
        stats = run_producer(bootstrap, run)
        produce_s = time.perf_counter() - stats.start
    produce_cpu = cpu_seconds(pids) - cpu_before
    stats.print_total()
    _print_server_cpu(server, produce_cpu, stats.count)
    print(producer[0].line(stats.count), flush=True)
    if stats.errors or stats.count < args.num_records:
        raise RuntimeError(f"{label}: {stats.errors} records failed")
    return stats, produce_s, produce_cpu, producer[0]


def strata_single(args: argparse.Namespace) -> list[Row]:
    """1 broker: acks=1 produce, consume from the start, end-to-end latency."""
    pids: list[int] = []
    with local_broker(pids=pids) as bootstrap:
        topic = "bench-produce"
        create_topic(bootstrap, topic, 1, 1)
        strata_consume.warm_up_group_coordinator(bootstrap, topic)
        _step(f"Strata, 1 broker, acks=1 produce: {args.num_records} records of "
              f"{args.record_size} bytes")
        stats, produce_s, produce_cpu, producer = _strata_produce(
            bootstrap, args, topic, "1", pids, "broker", "Strata produce",
            _maybe_profile(args.profile, pids, "strata-produce"))
        lat = sorted(stats.latencies)

        _step("Strata, 1 broker, consume from the start (confluent-kafka)")
        consume_args = argparse.Namespace(topic=topic, num_records=args.num_records,
                                          partitions=1, consumer_props=[], timeout_s=30.0)
        cpu_before = cpu_seconds(pids)
        with _maybe_profile(args.profile, pids, "strata-consume"), client_cpu() as consumer:
            records, nbytes, start, end = strata_consume.consume(bootstrap, consume_args)
        consume_cpu = cpu_seconds(pids) - cpu_before
        strata_consume.report(records, nbytes, start, end)
        _print_server_cpu("broker", consume_cpu, records)
        print(consumer[0].line(records), flush=True)
        if records < args.num_records:
            raise RuntimeError(f"Strata consume: {records} of {args.num_records} records")

        _step(f"Strata, 1 broker, end-to-end latency at {args.latency_rate:,} records/s for "
              f"{args.latency_seconds:g} s (acks=1, linger.ms=1)")
        latency_topic = "bench-latency"
        create_topic(bootstrap, latency_topic, 1, 1)
        e2e = latency.measure(bootstrap, latency_topic, args.latency_rate,
                              args.latency_seconds, args.record_size)
        print(f"{e2e.count} records, end-to-end latency {e2e.p50_ms:.2f} ms 50th, "
              f"{e2e.p99_ms:.2f} ms 99th, {e2e.max_ms:.2f} ms max.", flush=True)
    return [
        Row("Strata", "1 broker, acks=1 (confluent-kafka)", DURABILITY["strata-1"],
            produce=Throughput(stats.count, produce_s, args.record_size, produce_cpu,
                               producer),
            consume=Throughput(records, end - start, args.record_size, consume_cpu,
                               consumer[0]),
            latency=Latency(lat[len(lat) // 2], lat[min(len(lat) - 1, int(0.99 * len(lat)))],
                            "produce->ack")),
        Row("Strata", f"1 broker, end-to-end at {args.latency_rate:,} records/s",
            DURABILITY["strata-1"],
            latency=Latency(e2e.p50_ms, e2e.p99_ms, "produce->consume")),
    ]


def strata_cluster(args: argparse.Namespace) -> Row:
    """3 brokers, replication factor 3, acks=all produce."""
    pids: list[int] = []
    with local_cluster(3, pids=pids) as bootstrap:
        topic = "bench-replicated"
        create_topic(bootstrap, topic, 1, 3)
        _step("Strata, 3 brokers, replication factor 3, acks=all produce")
        stats, produce_s, produce_cpu, producer = _strata_produce(
            bootstrap, args, topic, "all", pids, "3 brokers'", "Strata acks=all produce",
            contextlib.nullcontext())
    lat = sorted(stats.latencies)
    return Row("Strata", "3 brokers, RF 3, acks=all (confluent-kafka)", DURABILITY["strata-3"],
               produce=Throughput(stats.count, produce_s, args.record_size, produce_cpu,
                                  producer),
               latency=Latency(lat[len(lat) // 2], lat[min(len(lat) - 1, int(0.99 * len(lat)))],
                               "produce->ack"))


def redis(args: argparse.Namespace, appendonly: bool) -> Row:
    label = "AOF everysec" if appendonly else "defaults"
    pids: list[int] = []
    with redis_server(appendonly, pids) as (host, port):
        _step(f"Redis Streams ({label}): XADD with redis-benchmark "
              f"-c {redis_streams.CLIENTS} -P {redis_streams.PIPELINE}")
        cpu_before = cpu_seconds(pids)
        produced = redis_streams.produce(host, port, args.num_records, args.record_size,
                                         args.timeout_s)
        produced = _with_cpu(produced, cpu_seconds(pids) - cpu_before)
        print(f"{produced.records} records sent, {produced.records_per_s:.1f} records/sec "
              f"({produced.mb_per_s:.2f} MB/sec); XLEN {redis_streams.stream_length(host, port)}",
              flush=True)
        _step(f"Redis Streams ({label}): XREAD COUNT {redis_streams.READ_COUNT} (redis-py)")
        cpu_before = cpu_seconds(pids)
        consumed = redis_streams.consume(host, port, args.num_records, args.record_size,
                                         args.timeout_s)
        consumed = _with_cpu(consumed, cpu_seconds(pids) - cpu_before)
        print(f"{consumed.records} records consumed, {consumed.records_per_s:.1f} records/sec "
              f"({consumed.mb_per_s:.2f} MB/sec)", flush=True)
    scenario = ("appendonly yes, appendfsync everysec" if appendonly else "defaults (no AOF)")
    return Row("Redis Streams", f"{scenario}; redis-benchmark XADD, redis-py XREAD",
               DURABILITY["redis-aof" if appendonly else "redis"],
               produce=produced, consume=consumed)


def nats(args: argparse.Namespace) -> Row:
    pids: list[int] = []
    with nats_server(pids) as url:
        _step("NATS JetStream, file storage: acknowledged publish (nats-py)")
        cpu_before = cpu_seconds(pids)
        produced = jetstream.produce(url, args.num_records, args.record_size, args.timeout_s)
        produced = _with_cpu(produced, cpu_seconds(pids) - cpu_before)
        print(f"{produced.records} records sent, {produced.records_per_s:.1f} records/sec "
              f"({produced.mb_per_s:.2f} MB/sec)", flush=True)
        _step(f"NATS JetStream: pull consumer, batches of {jetstream.FETCH_BATCH} (nats-py)")
        cpu_before = cpu_seconds(pids)
        consumed = jetstream.consume(url, args.num_records, args.record_size, args.timeout_s)
        consumed = _with_cpu(consumed, cpu_seconds(pids) - cpu_before)
        print(f"{consumed.records} records consumed, {consumed.records_per_s:.1f} records/sec "
              f"({consumed.mb_per_s:.2f} MB/sec)", flush=True)
    return Row("NATS JetStream", "file storage; nats-py acked publish, pull consumer",
               DURABILITY["nats"], produce=produced, consume=consumed)


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-records", type=int, default=None,
                        help="records per system (default 1,000,000; --quick: 100,000)")
    parser.add_argument("--quick", action="store_true", help="100,000 records, for smoke use")
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--latency-rate", type=int, default=20_000)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--timeout-s", type=float, default=600.0,
                        help="give up on any one step after this long")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="py-spy the 1-broker Strata during produce and consume")
    args = parser.parse_args(argv)
    if args.num_records is None:
        args.num_records = QUICK_RECORDS if args.quick else 1_000_000
    if args.record_size < latency.STAMP.size:
        parser.error(f"--record-size must be at least {latency.STAMP.size}")
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    # SIGTERM unwinds like Ctrl-C, so every server is stopped by the context managers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    load_before = _load()
    started = time.monotonic()
    print(f"# Strata benchmark suite: {args.num_records:,} records of {args.record_size} bytes "
          f"per system; load average {load_before}", flush=True)
    rows = strata_single(args)
    rows.insert(1, strata_cluster(args))
    rows.append(redis(args, appendonly=False))
    rows.append(redis(args, appendonly=True))
    rows.append(nats(args))
    print(f"\n# Results: {args.num_records:,} records of {args.record_size} bytes per system, "
          f"{os.cpu_count()} cores; load average before {load_before}, after {_load()}; "
          f"{time.monotonic() - started:.0f} s\n", flush=True)
    print(render_table(rows), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
