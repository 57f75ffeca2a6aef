"""Batch-read benchmark of the ``strata`` Spark data source, beside ``spark.range``.

Starts a Strata broker (``bench/local_broker.py``) unless ``--bootstrap`` names a running
cluster, fills a topic of ``--partitions`` partitions with ``--num-records`` records of
``--record-size`` bytes (untimed; null keys spread evenly, one random partition per record,
so the Spark partitions are as even as the others'; ``--no-fill`` when the topic already holds
them), then, in one local SparkSession, times three full scans written to Spark's ``noop``
sink (every column is materialised, nothing is stored):

- the baseline: ``spark.range(N)`` projected to the Kafka source's columns (a null key, a value
  of ``--record-size`` bytes, topic, partition, offset, timestamp, timestampType), generated in
  the JVM (the value is a literal Spark folds to a constant: the JVM at its fastest);
- the ceiling of PySpark's Python Data Source API itself: a source (``constant_source``)
  whose ``read()`` yields prebuilt Arrow batches of the same schema, touching no broker;
- ``spark.read.format("strata")`` over the topic (``minPartitions`` = the cores).

All three have as many input partitions as the strata scan. A warm-up round (JIT, Python
workers, numba's cache) is not counted, then ``--runs`` rounds (default 5) each run the three
scans in turn, so a burst of load on a shared machine hits all of them; the best of each is
printed in consumer-perf-test's summary format, then the ratios, then each scan's median CPU
seconds (the JVM, Spark's Python workers and a broker started here, from /proc: a figure load
disturbs far less than wall time). On 2 shared cores (load average 2.41 -> 2.77)::

    # action: df.write.format('noop') of all 7 columns; master local[*] (2 cores); ...
    spark.range: 1000000 rows, 2941275.3 rows/sec (280.50 MB/sec), best of 5
    python data source ceiling: 1000000 rows, 1103607.8 rows/sec (105.25 MB/sec), best of 5
    strata:      1000000 records consumed, 1021190.2 records/sec (97.39 MB/sec), best of 5
    strata / spark.range = 34.7%, strata / python data source ceiling = 92.5%
    # CPU seconds per scan (median; JVM + Python workers + broker): spark.range 0.83, ...

Run: ``.venv/bin/python -m bench.spark_read [--num-records 1000000] [--record-size 100]
[--partitions 4] [--bootstrap HOST:PORT [--no-fill]] [--master local[*]] [--runs 5]
[--min-partitions N] [--verbose]`` (``make bench-spark``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from .client_bench import add_workload_arguments, run_bench
from .produce import create_topic, run_producer

MIB = 1024 * 1024
BATCH_ROWS = 10_000


def constant_source(rows: int, partitions: int, record_size: int,  # type: ignore[no-untyped-def]
                    topic: str):
    """A Python data source ``bench-constant`` yielding ``rows`` rows of the Kafka schema from
    prebuilt Arrow batches: what PySpark's Python Data Source path costs with no reading. The
    rows are as wide as the strata scan's (the same topic name, value size and null key)."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from strata.spark.schema import arrow_schema, spark_schema

    class Reader(DataSourceReader):
        def partitions(self):  # type: ignore[no-untyped-def]
            share = -(-rows // partitions)
            return [InputPartition(min(share, rows - i * share)) for i in range(partitions)]

        def read(self, partition):  # type: ignore[no-untyped-def]
            schema = arrow_schema(False)
            n = min(BATCH_ROWS, partition.value)
            value = pa.Array.from_buffers(pa.binary(), n, [
                None, pa.py_buffer(np.arange(0, (n + 1) * record_size, record_size,
                                             dtype=np.int32)),
                pa.py_buffer(b"x" * (n * record_size))])
            batch = pa.RecordBatch.from_arrays([
                pa.nulls(n, pa.binary()), value, pa.repeat(pa.scalar(topic), n),
                pa.repeat(pa.scalar(0, pa.int32()), n), pa.array(np.arange(n, dtype=np.int64)),
                pa.array(np.full(n, 1_700_000_000_000_000, dtype=np.int64))
                .cast(schema.field("timestamp").type),
                pa.repeat(pa.scalar(0, pa.int32()), n)], schema=schema)
            left = partition.value
            while left > 0:
                yield batch if left >= n else batch.slice(0, left)
                left -= n

    class Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-constant"

        def schema(self):  # type: ignore[no-untyped-def]
            return spark_schema(False)

        def reader(self, schema):  # type: ignore[no-untyped-def]
            return Reader()

    return Source


def fill(bootstrap: str, args: argparse.Namespace) -> None:
    produce_args = argparse.Namespace(
        topic=args.topic, num_records=args.num_records, record_size=args.record_size, acks="1",
        # No sticky partitioning: each null-key record goes to a random partition, so the
        # partitions end up even (the sticky partitioner leaves them 20% apart).
        producer_props=["linger.ms=20", "batch.size=1000000", "sticky.partitioning.linger.ms=0"],
    )
    stats = run_producer(bootstrap, produce_args)
    if stats.errors:
        raise SystemExit(f"filling the topic failed for {stats.errors} records")


def tree_cpu_s(root: int) -> float:
    """CPU seconds used so far by ``root`` and every process below it (the JVM, Spark's Python
    workers, a broker this script started), read from /proc; 0 where /proc is missing."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        used[pid] = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    total = 0
    for pid in used:
        walk = pid
        while walk > 1 and walk != root:
            walk = parents.get(walk, 0)
        if walk == root:
            total += used[pid]
    return total / tick


def timed(action: Callable[[], None]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process tree) of ``action``."""
    cpu = tree_cpu_s(os.getpid())
    start = time.perf_counter()
    action()
    return time.perf_counter() - start, tree_cpu_s(os.getpid()) - cpu


def bench(bootstrap: str, args: argparse.Namespace) -> None:
    from pyspark.sql import functions as F

    from strata.spark.session import get_session

    spark = get_session("strata-bench-spark-read", master=args.master)
    spark.sparkContext.setLogLevel("ERROR")
    cores = spark.sparkContext.defaultParallelism
    n = args.num_records

    strata = (spark.read.format("strata").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", args.topic)
              .option("minPartitions", str(args.min_partitions or cores)).load())
    counted = strata.count()
    if counted != n:
        raise SystemExit(f"the topic holds {counted} records, expected {n} (use --no-fill "
                         "only when it holds exactly --num-records)")
    partitions = strata.rdd.getNumPartitions()
    # The same columns and as many input partitions as the strata scan; value is a literal
    # that Spark folds to a constant, so the baseline is JVM generation at its fastest.
    baseline = spark.range(0, n, numPartitions=partitions).select(
        F.lit(None).cast("binary").alias("key"),
        F.expr(f"unhex(repeat('ab', {args.record_size}))").alias("value"),
        F.lit(args.topic).alias("topic"),
        (F.col("id") % args.partitions).cast("int").alias("partition"),
        F.col("id").alias("offset"),
        F.current_timestamp().alias("timestamp"),
        F.lit(0).alias("timestampType"),
    )
    spark.dataSource.register(constant_source(n, partitions, args.record_size, args.topic))
    ceiling = spark.read.format("bench-constant").load()
    frames = {"spark.range": baseline, "python data source ceiling": ceiling, "strata": strata}

    def scan(df):  # type: ignore[no-untyped-def]
        return lambda: df.write.format("noop").mode("overwrite").save()

    load_before = os.getloadavg()[0]
    times: dict[str, list[float]] = {name: [] for name in frames}
    cpus: dict[str, list[float]] = {name: [] for name in frames}
    # Rounds interleave the three scans, so a burst of load on the shared machine hits all
    # of them; warm-up rounds (JIT, Python workers, numba's cache) are not counted.
    for round_ in range(args.warmup + args.runs):
        for name, df in frames.items():
            elapsed, cpu = timed(scan(df))
            if round_ >= args.warmup:
                times[name].append(elapsed)
                cpus[name].append(cpu)
    load_after = os.getloadavg()[0]
    base_s, ceiling_s, strata_s = (min(times[name]) for name in frames)
    mb = n * args.record_size / MIB
    print(f"# action: df.write.format('noop') of all 7 columns; master {args.master} "
          f"({cores} cores); {partitions} input partitions each; best of {args.runs} "
          f"interleaved rounds after {args.warmup} warm-up; load average "
          f"{load_before:.2f} -> {load_after:.2f}")
    print(f"spark.range: {n} rows, {n / base_s:.1f} rows/sec ({mb / base_s:.2f} MB/sec), "
          f"best of {args.runs}")
    print(f"python data source ceiling: {n} rows, {n / ceiling_s:.1f} rows/sec "
          f"({mb / ceiling_s:.2f} MB/sec), best of {args.runs}")
    print(f"strata:      {n} records consumed, {n / strata_s:.1f} records/sec "
          f"({mb / strata_s:.2f} MB/sec), best of {args.runs}")
    print(f"strata / spark.range = {100 * base_s / strata_s:.1f}%, strata / python data source "
          f"ceiling = {100 * ceiling_s / strata_s:.1f}%", flush=True)
    print("# CPU seconds per scan (median; JVM + Python workers"
          + ("" if args.bootstrap else " + broker") + "): "
          + ", ".join(f"{name} {statistics.median(cpus[name]):.2f}" for name in frames))
    if args.verbose:
        for name, values in times.items():
            print(f"# {name} rows/sec per round: "
                  + " ".join(f"{n / t:.0f}" for t in values))
    spark.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_workload_arguments(parser, topic="strata-bench-spark-read", partitions=4)
    parser.add_argument("--no-fill", action="store_true",
                        help="the topic already holds the records: only read")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--min-partitions", type=int,
                        help="the strata scan's minPartitions (default: the cores)")
    parser.add_argument("--verbose", action="store_true", help="print every round's figure")
    args = parser.parse_args(argv)

    def run(bootstrap: str) -> None:
        if not args.no_fill:
            create_topic(bootstrap, args.topic, args.partitions)
            fill(bootstrap, args)
        bench(bootstrap, args)

    return run_bench(run, args.bootstrap, extra_config={"num.partitions": str(args.partitions)})


if __name__ == "__main__":
    raise SystemExit(main())
