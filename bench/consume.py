"""Consumer benchmark in the style of Kafka's ``kafka-consumer-perf-test``, with confluent-kafka.

Starts a Strata broker (``bench/local_broker.py``) unless ``--bootstrap`` names a running
cluster, fills the topic with ``--num-records`` records of ``--record-size`` bytes (untimed;
skipped with ``--no-fill`` when the topic already holds them, e.g. after ``bench/produce.py
--bootstrap ...``), then reads them back from the beginning and prints Kafka's CSV figures and
a summary line::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    2026-11-22 10:00:00:000, 2026-11-22 10:00:02:100, 95.3674, 45.4130, 1000000, 476190.5, 0,
    2100, 45.4130, 476190.5
    1000000 records consumed, 476190.5 records/sec (45.41 MB/sec)

Before the timer starts, the broker is made to create ``__consumer_offsets`` (librdkafka looks
up the group coordinator as soon as a consumer has a ``group.id``; on a fresh broker that
creates the 50-partition topic, which would otherwise be timed as part of the consume).
The consumer assigns the partitions itself (no group rebalance: ``rebalance.time.ms`` is 0)
and reads with ``consume(num_messages=...)`` batches; the timer starts at the assignment and
stops at the last record, so ``fetch.time.ms`` is the whole consume time. Client settings:
``fetch.queue.backoff.ms=10`` (librdkafka's default 1000 stalls fetching for up to a second
whenever the Python loop drains its queue slower than fetches fill it, with any broker:
measured 0.25 M vs 0.85 M records/s here); override with ``--consumer-props``. The figures
are client-bound: the broker spends ~0.1 s of CPU per 100 MB served (sendfile).

It prints the client's CPU per record, split between the Python thread (confluent-kafka
builds one ``Message`` per record there) and librdkafka's threads, and, when it starts the
broker, the broker's own CPU time per record consumed;
``--cprofile FILE`` profiles the broker's CPU while consuming (``bench/cprofile_broker.py``).

Run: ``.venv/bin/python -m bench.consume [--num-records 1000000] [--record-size 100]
[--partitions 1] [--bootstrap HOST:PORT [--no-fill]] [--consumer-props k=v ...]``.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from .client_bench import add_workload_arguments, run_bench, server_cpu_line
from .cprofile_broker import profiling
from .process_cpu import client_cpu, cpu_seconds
from .produce import create_topic, parse_props, run_producer

MIB = 1024 * 1024


def fill(bootstrap: str, args: argparse.Namespace) -> None:
    produce_args = argparse.Namespace(
        topic=args.topic, num_records=args.num_records, record_size=args.record_size, acks="1",
        producer_props=["linger.ms=20", "batch.size=1000000"],
    )
    stats = run_producer(bootstrap, produce_args)
    if stats.errors:
        raise SystemExit(f"filling the topic failed for {stats.errors} records")


def warm_up_group_coordinator(bootstrap: str, topic: str) -> None:
    """Untimed: make the broker create ``__consumer_offsets`` now, as a cluster in service has.

    librdkafka looks up the group coordinator as soon as a consumer has a ``group.id``; on a
    fresh broker that creates the 50-partition offsets topic, whose set-up would otherwise
    compete with the first fetches being timed. ``committed()`` needs the coordinator, so it
    returns once the topic exists (librdkafka retries COORDINATOR_NOT_AVAILABLE meanwhile).
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "strata-bench-warm-up",
                         "enable.auto.commit": "false"})
    try:
        consumer.committed([TopicPartition(topic, 0)], timeout=60)
    except KafkaException as exc:
        print(f"WARNING: no group coordinator yet ({exc}); the consume figure may include "
              "creating __consumer_offsets", file=sys.stderr)
    finally:
        consumer.close()


def consume(bootstrap: str, args: argparse.Namespace) -> tuple[int, int, float, float]:
    """(records, bytes, start, end) — wall-clock seconds."""
    config = {"bootstrap.servers": bootstrap, "group.id": "strata-bench-consumer",
              "enable.auto.commit": "false", "auto.offset.reset": "earliest",
              "fetch.wait.max.ms": "100", "fetch.queue.backoff.ms": "10",
              **parse_props(args.consumer_props)}
    consumer = Consumer(config)
    partitions = [TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in range(args.partitions)]
    records = nbytes = 0
    idle_deadline = None
    start = time.time()
    consumer.assign(partitions)
    end = start
    try:
        while records < args.num_records:
            batch = consumer.consume(num_messages=10_000, timeout=1.0)
            if not batch:
                idle_deadline = idle_deadline or time.monotonic() + args.timeout_s
                if time.monotonic() > idle_deadline:
                    print(f"WARNING: no records for {args.timeout_s}s; stopping at {records}",
                          file=sys.stderr)
                    break
                continue
            idle_deadline = None
            # counted in C (map): a Python loop over every message costs more than the fetch
            errors = [e for e in map(Message.error, batch) if e is not None]
            for err in errors:
                if err.code() != KafkaError._PARTITION_EOF:
                    raise SystemExit(f"consume failed: {err}")
            records += len(batch) - len(errors)
            nbytes += sum(map(len, batch))
            end = time.time()
    finally:
        consumer.close()
    return records, nbytes, start, end


def stamp(t: float) -> str:
    moment = datetime.datetime.fromtimestamp(t)
    return moment.strftime("%Y-%m-%d %H:%M:%S:") + f"{moment.microsecond // 1000:03d}"


def report(records: int, nbytes: int, start: float, end: float) -> None:
    elapsed = max(end - start, 1e-9)
    mb = nbytes / MIB
    print("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
          "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    print(f"{stamp(start)}, {stamp(end)}, {mb:.4f}, {mb / elapsed:.4f}, {records}, "
          f"{records / elapsed:.4f}, 0, {int(elapsed * 1000)}, {mb / elapsed:.4f}, "
          f"{records / elapsed:.4f}")
    print(f"{records} records consumed, {records / elapsed:.1f} records/sec "
          f"({mb / elapsed:.2f} MB/sec)", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_workload_arguments(parser, topic="strata-bench-consume", partitions=1)
    parser.add_argument("--no-fill", action="store_true",
                        help="the topic already holds the records: only consume")
    parser.add_argument("--timeout-s", type=float, default=10.0,
                        help="give up after this long without a record")
    parser.add_argument("--consumer-props", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--cprofile", type=Path, metavar="FILE",
                        help="cProfile the broker (CPU time) while consuming; stats to FILE")
    args = parser.parse_args(argv)

    pids: list[int] = []

    def bench(bootstrap: str) -> None:
        if not args.no_fill:
            create_topic(bootstrap, args.topic, args.partitions)
            fill(bootstrap, args)
        warm_up_group_coordinator(bootstrap, args.topic)
        cpu_before = cpu_seconds(pids)
        with profiling(pids if args.cprofile else []), client_cpu() as client:
            records, nbytes, start, end = consume(bootstrap, args)
        report(records, nbytes, start, end)
        print(client[0].line(records), flush=True)
        if pids:
            cpu = cpu_seconds(pids) - cpu_before
            print(server_cpu_line("broker", cpu, records), flush=True)

    return run_bench(bench, args.bootstrap, pids=pids, cprofile=args.cprofile)


if __name__ == "__main__":
    raise SystemExit(main())
