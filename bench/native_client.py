"""Strata's benchmark scenarios driven by the native load generator (``bench/native_perf.py``,
``build/strata_perf`` on librdkafka): the broker's cost without a Python client's in front.

Scenarios (issue 23's table; 100-byte records, ``linger.ms=5``, ``batch.size=1000000``,
records without keys, so librdkafka's sticky partitioner fills one partition's batch at a time
as Kafka's perf tool does; ``--partitioner rr`` spreads them record by record), each server
started on free loopback ports (``bench/local_broker.py``) and stopped before the next group
starts:

1. 1 broker, 1 partition: acks=1 produce, then a group-less consume of the same records.
2. 3 brokers on one SQLite metadata store, replication factor 3: acks=1 over 6 partitions;
   acks=all over 1 partition and over 6; acks=all over 6 at half the 6-partition rate
   (``--throughput``: produce-to-ack latency when not saturated, after one second of the
   same load to the new topic, not measured); idempotent acks=all against
   transactional produce (1 transaction per 1,000 records, issue 19), both over 6 partitions;
   last, acks=all over 1,000 partitions (created once, after everything else).
3. Redis 7 XADD with redis-benchmark (``bench/redis_streams.py``), the peer the 1-broker rate
   is read against (``--no-redis`` leaves it out).

For each step: Kafka's perf-test lines (the program's), the brokers' CPU per record (user +
system of every broker process, ``bench/process_cpu.py``) and the client's; then one table
(``bench/results.py``) and the issue's target ratios. ``--transactions`` runs only the
transactional comparison (``make bench-transactions``: with 1 producer and with 6 at once,
``--producers 1,6``); ``--profile DIR`` samples every broker with
py-spy during each step and prints its top frames.

Run: ``.venv/bin/python -m bench.native_client [--single-records 2000000]
[--cluster-records N (default: --single-records)] [--scale-records N] [--latency-seconds 5]
[--transactions] [--producers 1,6] [--no-redis] [--quick] [--profile DIR]``; ``make bench``
builds the program and runs this before the Python-client suite.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import native_perf, redis_streams
from .broker_profile import format_top, py_spy_record
from .client_bench import server_cpu_line
from .local_broker import local_broker, local_cluster
from .native_perf import PerfResult, Produce
from .peer_servers import redis_server
from .process_cpu import ClientCpu, cpu_seconds
from .produce import create_topic
from .results import Latency, Row, Throughput, render_table

RECORD_SIZE = 100
TRANSACTION_RECORDS = 1000
SCALE_PARTITIONS = 1000
DURABILITY_1 = "acks=1: leader's log in the page cache (Kafka's defaults)"
DURABILITY_RF3_ACKS1 = "acks=1: leader's page cache; followers catch up after"
DURABILITY_RF3 = "acks=all: all 3 replicas' logs (page cache)"


@dataclass(frozen=True)
class Step:
    """One measured step: the program's figures and the brokers' CPU seconds meanwhile."""

    label: str
    result: PerfResult
    server_cpu_s: float

    def throughput(self) -> Throughput:
        client = None
        if self.result.client_cpu_s is not None:
            client = ClientCpu(0.0, self.result.client_cpu_s)
        return Throughput(self.result.records, self.result.seconds, RECORD_SIZE,
                          self.server_cpu_s, client)

    def latency(self) -> Latency | None:
        lat = self.result.latency_ms
        return None if lat is None else Latency(lat.p50, lat.p99, "produce->ack")

    def server_us(self) -> float:
        return self.server_cpu_s * 1e6 / max(self.result.records, 1)

    def note(self) -> str:
        """What a row says about a run that did not move every record."""
        r = self.result
        if r.complete:
            return ""
        return (f" [incomplete: {r.records:,} of {r.requested:,} records, {r.failed:,} failed, "
                f"{r.transactions_failed} transactions failed]")


def _title(text: str) -> None:
    print(f"\n# {text}", flush=True)


def measure(label: str, runs: Sequence[Sequence[str]], pids: list[int],
            timeout_s: float, profile: Path | None = None) -> Step:
    """Run the program once per argument list of ``runs``, all at the same time; print the
    CPU lines; warn unless every record made it (the row says so too: the other steps still
    run). With ``profile``, py-spy samples every broker meanwhile
    (``bench/broker_profile.py``) and their top frames are printed."""
    outs: list[Path] = []
    with contextlib.ExitStack() as spies:
        if profile is not None:
            slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
            for i, pid in enumerate(pids):
                outs.append(profile / f"{slug}-broker-{i}.raw.txt")
                spies.enter_context(py_spy_record(pid, outs[-1]))
        before = cpu_seconds(pids)
        result = native_perf.run_many(runs, timeout_s=timeout_s)
        cpu = cpu_seconds(pids) - before
    for out in outs:
        if out.exists():
            print(format_top(out, 10), flush=True)
    print(server_cpu_line("brokers'" if len(pids) > 1 else "broker", cpu, result.records),
          flush=True)
    if result.client_cpu_s is not None:
        print(server_cpu_line("client (strata_perf)", result.client_cpu_s, result.records),
              flush=True)
    step = Step(label, result, cpu)
    if not result.complete:
        print(f"WARNING: {label}:{step.note()}", flush=True)
    return step


def _produce(bootstrap: str, label: str, produce: Produce, partitions: int, replication: int,
             pids: list[int], args: argparse.Namespace, producers: int = 1,
             warmup_records: int = 0) -> Step:
    """One produce step; with ``producers`` > 1 that many programs at once, each sending
    ``produce.records`` (a transactional one with its own ``transactional.id``). With
    ``warmup_records``, one run of that many records to the new topic first, not measured (a
    latency step: the client's first requests of a new topic wait for its metadata and
    leaders, which is start-up, not the steady state the step measures)."""
    produce = dataclasses.replace(produce, partitioner=args.partitioner)
    timeout_s = args.timeout_s
    os.sync()  # the previous steps' dirty pages are written back now, not during this step
    create_topic(bootstrap, produce.topic, partitions, replication)
    if warmup_records:
        warm = dataclasses.replace(produce, records=warmup_records)
        native_perf.run_many([native_perf.produce_args(bootstrap, warm, timeout_s)],
                             timeout_s=timeout_s)
        print(f"(warm-up: {warmup_records:,} records to {produce.topic}, not measured)",
              flush=True)
    _title(f"{label}: {producers * produce.records:,} records of {produce.record_size} bytes")
    each = [produce if producers == 1 or produce.transactional_id is None else
            dataclasses.replace(produce, transactional_id=f"{produce.transactional_id}-{i}")
            for i in range(producers)]
    return measure(label, [native_perf.produce_args(bootstrap, p, timeout_s) for p in each],
                   pids, timeout_s, args.profile)


def single_broker(args: argparse.Namespace) -> dict[str, Step]:
    pids: list[int] = []
    steps: dict[str, Step] = {}
    with local_broker(pids=pids) as bootstrap:
        produce = Produce("native-1", args.single_records, acks="1")
        steps["1"] = _produce(bootstrap, "1 broker, 1 partition, acks=1", produce, 1, 1, pids,
                              args)
        _title("1 broker, consume 1 partition from the start (group-less)")
        steps["1-consume"] = measure(
            "1 broker consume",
            [native_perf.consume_args(bootstrap, produce.topic, args.single_records,
                                      min(args.timeout_s, 60.0))], pids, args.timeout_s,
            args.profile)
    return steps


def transactions(bootstrap: str, args: argparse.Namespace, pids: list[int]
                 ) -> dict[str, Step]:
    """Idempotent acks=all against transactional produce, same cluster, same partitions, for
    each producer count of ``--producers`` (keys ``idempotent``/``transactional`` for 1
    producer, ``idempotent-N``/``transactional-N`` for N)."""
    n, t = args.cluster_records, args
    steps: dict[str, Step] = {}
    for producers in args.producers:
        suffix = "" if producers == 1 else f"-{producers}"
        who = "" if producers == 1 else f", {producers} producers at once"
        each = max(n // producers, TRANSACTION_RECORDS)
        steps["idempotent" + suffix] = _produce(
            bootstrap, f"3 brokers, RF 3, 6 partitions, acks=all, idempotent{who}",
            Produce(f"native-idempotent{suffix}", each, acks="all", idempotence=True), 6, 3,
            pids, t, producers)
        steps["transactional" + suffix] = _produce(
            bootstrap, f"3 brokers, RF 3, 6 partitions, transactional "
                       f"(1 transaction per {TRANSACTION_RECORDS:,} records){who}",
            Produce(f"native-transactional{suffix}", each, acks="all",
                    transactional_id="strata-perf", transaction_records=TRANSACTION_RECORDS),
            6, 3, pids, t, producers)
    return steps


def cluster(args: argparse.Namespace) -> dict[str, Step]:
    pids: list[int] = []
    steps: dict[str, Step] = {}
    n, t = args.cluster_records, args
    with local_cluster(3, pids=pids) as bootstrap:
        if args.transactions:
            return transactions(bootstrap, args, pids)
        steps["rf3-acks1"] = _produce(bootstrap, "3 brokers, RF 3, 6 partitions, acks=1",
                                      Produce("native-rf3-acks1", n, acks="1"), 6, 3, pids, t)
        steps["rf3-p1"] = _produce(bootstrap, "3 brokers, RF 3, 1 partition, acks=all",
                                   Produce("native-rf3-p1", n, acks="all"), 1, 3, pids, t)
        steps["rf3-p6"] = _produce(bootstrap, "3 brokers, RF 3, 6 partitions, acks=all",
                                   Produce("native-rf3-p6", n, acks="all"), 6, 3, pids, t)
        half = max(int(steps["rf3-p6"].result.records_per_s / 2), 1)
        steps["rf3-half"] = _produce(
            bootstrap, f"3 brokers, RF 3, 6 partitions, acks=all at {half:,} records/s "
                       "(half the rate)",
            Produce("native-rf3-half", max(int(half * args.latency_seconds), 1), acks="all",
                    throughput=half), 6, 3, pids, t, warmup_records=half)
        steps.update(transactions(bootstrap, args, pids))
        steps["rf3-p1000"] = _produce(
            bootstrap, f"3 brokers, RF 3, {SCALE_PARTITIONS:,} partitions, acks=all",
            Produce("native-rf3-p1000", args.scale_records, acks="all"), SCALE_PARTITIONS, 3,
            pids, args)
    return steps


def redis_xadd(args: argparse.Namespace) -> Throughput:
    pids: list[int] = []
    with redis_server(False, pids) as (host, port):
        _title(f"Redis Streams (defaults): XADD with redis-benchmark -c {redis_streams.CLIENTS} "
               f"-P {redis_streams.PIPELINE}")
        before = cpu_seconds(pids)
        produced = redis_streams.produce(host, port, args.single_records, RECORD_SIZE,
                                         args.timeout_s)
        cpu = cpu_seconds(pids) - before
        print(f"{produced.records} records sent, {produced.records_per_s:.1f} records/sec "
              f"({produced.mb_per_s:.2f} MB/sec)", flush=True)
        print(server_cpu_line("server", cpu, produced.records), flush=True)
    return Throughput(produced.records, produced.seconds, RECORD_SIZE, cpu)


def rows(steps: dict[str, Step], redis: Throughput | None) -> list[Row]:
    out = []
    if "1" in steps:
        note = steps["1"].note() + steps["1-consume"].note()
        out.append(Row("Strata", f"1 broker, 1 partition, acks=1 (native){note}", DURABILITY_1,
                       produce=steps["1"].throughput(),
                       consume=steps["1-consume"].throughput(), latency=steps["1"].latency()))
    for key, what, durability in (
            ("rf3-acks1", "3 brokers, RF 3, 6 partitions, acks=1", DURABILITY_RF3_ACKS1),
            ("rf3-p1", "3 brokers, RF 3, 1 partition, acks=all", DURABILITY_RF3),
            ("rf3-p6", "3 brokers, RF 3, 6 partitions, acks=all", DURABILITY_RF3),
            ("rf3-half", "3 brokers, RF 3, 6 partitions, acks=all at half rate", DURABILITY_RF3),
            ("idempotent", "3 brokers, RF 3, 6 partitions, acks=all idempotent", DURABILITY_RF3),
            ("transactional", f"3 brokers, RF 3, 6 partitions, transactional "
                              f"({TRANSACTION_RECORDS:,} records/transaction)", DURABILITY_RF3),
            ("rf3-p1000", f"3 brokers, RF 3, {SCALE_PARTITIONS:,} partitions, acks=all",
             DURABILITY_RF3)):
        if key in steps:
            out.append(Row("Strata", f"{what} (native){steps[key].note()}", durability,
                           produce=steps[key].throughput(), latency=steps[key].latency()))
    for key in sorted(k for k in steps if k.startswith(("idempotent-", "transactional-"))):
        kind, producers = key.split("-")
        what = ("acks=all idempotent" if kind == "idempotent" else
                f"transactional ({TRANSACTION_RECORDS:,} records/transaction)")
        out.append(Row("Strata", f"3 brokers, RF 3, 6 partitions, {what}, {producers} "
                                 f"producers (native){steps[key].note()}", DURABILITY_RF3,
                       produce=steps[key].throughput(), latency=steps[key].latency()))
    if redis is not None:
        out.append(Row("Redis Streams", "defaults (no AOF); redis-benchmark XADD",
                       "memory only; RDB snapshots; no AOF", produce=redis))
    return out


def target_lines(steps: dict[str, Step], redis: Throughput | None) -> list[str]:
    """The issues' targets, each as ``measured (target)``, for the figures this run has."""
    def rate(key: str) -> float:
        return steps[key].result.records_per_s

    lines = []
    if "1" in steps and "rf3-p6" in steps:
        lines.append(f"3 brokers RF 3 acks=all, 6 partitions: {rate('rf3-p6') / rate('1'):.0%} "
                     f"of 1 broker acks=1 (target >= 50%); brokers' CPU "
                     f"{steps['rf3-p6'].server_us():.2f} us/record (target <= 0.8)")
    if "1" in steps and "rf3-acks1" in steps:
        lines.append(f"3 brokers RF 3 acks=1: {rate('rf3-acks1') / rate('1'):.0%} of 1 broker "
                     "(target >= 70%)")
    if "rf3-p1000" in steps and "rf3-p6" in steps:
        lines.append(f"{SCALE_PARTITIONS:,} partitions acks=all: "
                     f"{rate('rf3-p1000') / rate('rf3-p6'):.0%} of the 6-partition rate "
                     "(target >= 70%)")
    if "1" in steps and redis is not None:
        lines.append(f"1 broker acks=1: {rate('1') / redis.records_per_s:.2f}x Redis XADD "
                     "(target >= 2.5x)")
    if "rf3-half" in steps and steps["rf3-half"].result.latency_ms is not None:
        lines.append(f"acks=all at half the maximum rate: produce->ack p99 "
                     f"{steps['rf3-half'].result.latency_ms.p99:.1f} ms (target <= 10 ms "
                     "end to end)")
    for key in sorted(k for k in steps if k.startswith("transactional")):
        suffix = key[len("transactional"):]
        if "idempotent" + suffix not in steps:
            continue
        producers = suffix[1:] or "1"
        commit = steps[key].result.commit_ms
        idempotent = rate("idempotent" + suffix)
        lines.append(
            f"transactional, {producers} producer(s): {rate(key):,.0f} records/s against "
            f"idempotent acks=all {idempotent:,.0f}: {rate(key) / idempotent:.0%}"
            " (target >= 70%)"
            + (f"; commit latency p50 {commit.p50:.1f} ms, p99 {commit.p99:.1f} ms"
               if commit else "")
            + f"; brokers' CPU {steps[key].server_us():.2f} against "
              f"{steps['idempotent' + suffix].server_us():.2f} us/record")
    return lines


def _producer_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of producer counts: {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"producer counts must be >= 1: {text!r}")
    return counts


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--single-records", type=int, default=2_000_000,
                        help="records for the 1-broker produce and consume (and Redis)")
    parser.add_argument("--cluster-records", type=int, default=None,
                        help="records per 3-broker step (default: --single-records, so each "
                             "ratio compares the same workload; a 500,000-record step was "
                             "mostly the client's pipeline filling and draining)")
    parser.add_argument("--scale-records", type=int, default=None,
                        help=f"records for the {SCALE_PARTITIONS:,}-partition step "
                             "(default: --cluster-records)")
    parser.add_argument("--latency-seconds", type=float, default=5.0,
                        help="length of the half-rate latency step")
    parser.add_argument("--transactions", action="store_true",
                        help="only transactional against idempotent acks=all (issue 19)")
    parser.add_argument("--producers", type=_producer_counts, default=(1,), metavar="N[,N...]",
                        help="producer counts of the transactional comparison, each run "
                             "idempotent then transactional with that many producers at once "
                             "(the records split among them); default 1")
    parser.add_argument("--partitioner", choices=("sticky", "rr", "key"), default="sticky",
                        help="sticky (no key: Kafka's perf tool), rr (record i to partition "
                             "i mod P) or key (each record keyed)")
    parser.add_argument("--no-redis", action="store_true", help="leave out Redis XADD")
    parser.add_argument("--quick", action="store_true",
                        help="100,000 / 20,000 records, 1 s latency step: smoke use")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="py-spy every broker during each step; print their top frames")
    args = parser.parse_args(argv)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    if args.quick:
        args.single_records, args.cluster_records, args.latency_seconds = 100_000, 20_000, 1.0
    if args.cluster_records is None:
        args.cluster_records = args.single_records
    if args.scale_records is None:
        args.scale_records = args.cluster_records
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: stop every server

    load_before, started = _load(), time.monotonic()
    print(f"# Strata with the native load generator ({native_perf.BINARY.name}); "
          f"{os.cpu_count()} cores; load average {load_before}", flush=True)
    steps: dict[str, Step] = {}
    redis = None
    if not args.transactions:
        steps.update(single_broker(args))
    steps.update(cluster(args))
    if not args.transactions and not args.no_redis:
        redis = redis_xadd(args)
    print(f"\n# Results (native client): load average before {load_before}, after {_load()}; "
          f"{time.monotonic() - started:.0f} s\n", flush=True)
    print(render_table(rows(steps, redis)), flush=True)
    print("\n# Targets (issues 19 and 23)", flush=True)
    for line in target_lines(steps, redis):
        print(f"- {line}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
