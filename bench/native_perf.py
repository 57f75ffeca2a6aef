"""The native load generator's interface: ``build/strata_perf`` (``bench/native/strata_perf.c``,
built by ``make native-perf``), how it is invoked, and the figures its output carries.

``strata_perf`` prints Kafka's perf-test lines and, last, one line holding a JSON object with
every figure; ``parse_output`` turns that output into a ``PerfResult`` (pure: the last line that
is a JSON object with a ``mode`` wins; anything else is ignored). ``produce_args`` and
``consume_args`` spell the command line; ``run`` starts the program, echoes each output line as
it comes (so a long run shows its 5 s progress lines) and returns the parsed figures with the
program's own CPU time (user + system, from ``wait4``: the client's cost per record, which
native is a fraction of the broker's). ``run_many`` runs several at once (one producer each) and
``combine`` (pure) sums their figures into one.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BINARY = ROOT / "build" / "strata_perf"


class PerfError(RuntimeError):
    """The program failed, or printed no figures."""


@dataclass(frozen=True)
class LatencyMs:
    avg: float
    max: float
    p50: float
    p95: float
    p99: float
    p999: float


@dataclass(frozen=True)
class CommitMs:
    p50: float
    p99: float
    max: float


@dataclass(frozen=True)
class PerfResult:
    """One run's figures: records moved (delivered or consumed), those that failed, the count
    asked for, the elapsed seconds and rates; produce adds per-record latency and, when
    transactional, the committed transactions and commit latency. ``client_cpu_s`` is the
    program's CPU time, filled in by ``run``."""

    mode: str
    records: int
    failed: int
    requested: int
    seconds: float
    records_per_s: float
    mb_per_s: float
    latency_ms: LatencyMs | None = None
    transactions: int = 0
    transactions_failed: int = 0
    commit_ms: CommitMs | None = None
    client_cpu_s: float | None = None

    @property
    def complete(self) -> bool:
        return self.failed == 0 and self.transactions_failed == 0 \
            and self.records >= self.requested


def parse_output(text: str) -> PerfResult:
    """The figures of ``strata_perf``'s output: its last JSON object line with a ``mode``."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and data.get("mode") in ("produce", "consume"):
            return _result(data)
    raise PerfError("strata_perf printed no result line:\n" + text[-2000:])


def _result(data: dict[str, object]) -> PerfResult:
    def number(key: str, source: dict[str, object] = data) -> float:
        value = source.get(key, 0)
        if not isinstance(value, int | float):
            raise PerfError(f"strata_perf result: {key} is not a number: {value!r}")
        return float(value)

    latency = data.get("latency_ms")
    commit = data.get("commit_ms")
    transactions = int(number("transactions"))
    return PerfResult(
        mode=str(data["mode"]), records=int(number("records")), failed=int(number("failed")),
        requested=int(number("requested")), seconds=number("seconds"),
        records_per_s=number("records_per_s"), mb_per_s=number("mb_per_s"),
        latency_ms=LatencyMs(*(number(k, latency) for k in ("avg", "max", "p50", "p95", "p99",
                                                              "p999")))
        if isinstance(latency, dict) else None,
        transactions=transactions, transactions_failed=int(number("transactions_failed")),
        commit_ms=CommitMs(*(number(k, commit) for k in ("p50", "p99", "max")))
        if isinstance(commit, dict) and transactions else None)


@dataclass(frozen=True)
class Produce:
    """A produce run's settings (the issue's defaults: 100-byte records, ``linger.ms=5``,
    ``batch.size=1000000``)."""

    topic: str
    records: int
    acks: str = "1"
    record_size: int = 100
    linger_ms: int = 5
    batch_size: int = 1_000_000
    idempotence: bool = False
    # "sticky": no key, librdkafka's sticky partitioner (Kafka's perf tool's behaviour);
    # "rr": record i to partition i mod P; "key": the record's index as key, murmur2
    partitioner: str = "sticky"
    throughput: int = -1  # records/s cap; -1: as fast as it goes
    transactional_id: str | None = None
    transaction_records: int = 1000


def produce_args(bootstrap: str, p: Produce, timeout_s: float) -> list[str]:
    args = ["produce", "--bootstrap", bootstrap, "--topic", p.topic, "--records", str(p.records),
            "--record-size", str(p.record_size), "--acks", p.acks, "--linger-ms",
            str(p.linger_ms), "--batch-size", str(p.batch_size), "--partitioner", p.partitioner,
            "--throughput", str(p.throughput), "--timeout-s", f"{timeout_s:g}"]
    if p.idempotence:
        args.append("--idempotence")
    if p.transactional_id is not None:
        args += ["--transactional-id", p.transactional_id, "--transaction-records",
                 str(p.transaction_records)]
    return args


def consume_args(bootstrap: str, topic: str, records: int, timeout_s: float,
                 isolation_level: str = "read_uncommitted") -> list[str]:
    return ["consume", "--bootstrap", bootstrap, "--topic", topic, "--records", str(records),
            "--isolation-level", isolation_level, "--timeout-s", f"{timeout_s:g}"]


def run(args: Sequence[str], *, binary: Path = BINARY, timeout_s: float = 600.0,
        echo: bool = True) -> PerfResult:
    """Run ``strata_perf`` with ``args``; echo its lines; return its figures with its CPU time.
    Raises ``PerfError`` if it is missing, exits non-zero, or runs past ``timeout_s`` (plus a
    margin: the program bounds itself by ``--timeout-s``)."""
    if not binary.exists():
        raise PerfError(f"{binary} is missing: run `make native-perf` (builds it on Debian's "
                        "librdkafka-dev)")
    proc = subprocess.Popen([str(binary), *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s + 60.0
    try:
        for line in proc.stdout:
            lines.append(line)
            if echo and not line.startswith("{"):
                sys.stdout.write(line)
                sys.stdout.flush()
            if time.monotonic() > deadline:
                break
    finally:
        if time.monotonic() > deadline and proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)  # the exit status and the program's CPU
        proc.returncode = os.waitstatus_to_exitcode(status)
    output = "".join(lines)
    code = proc.returncode
    if code not in (0, 1):  # 1: it ran but not every record made it (the result says which)
        raise PerfError(f"strata_perf exited with {code}:\n{output[-2000:]}")
    result = parse_output(output)
    return dataclasses.replace(result, client_cpu_s=usage.ru_utime + usage.ru_stime)


def run_many(arg_lists: Sequence[Sequence[str]], *, binary: Path = BINARY,
             timeout_s: float = 600.0) -> PerfResult:
    """Run one ``strata_perf`` per argument list, all at once (each its own producer, as the
    tasks of a stream processor are); their figures combined by ``combine`` over the wall
    time from the first start to the last exit."""
    if len(arg_lists) == 1:
        return run(arg_lists[0], binary=binary, timeout_s=timeout_s)
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(len(arg_lists)) as pool:
        results = list(pool.map(lambda args: run(args, binary=binary, timeout_s=timeout_s,
                                                 echo=False), arg_lists))
    return combine(results, time.monotonic() - started)


def combine(results: Sequence[PerfResult], seconds: float) -> PerfResult:
    """Several concurrent runs as one: records and CPU summed, the rate over ``seconds`` (the
    wall time they ran together). Percentiles cannot be merged from percentiles: p50 is the
    median of the runs' p50s, p95/p99/p99.9 and max the largest (the slowest producer's),
    avg the mean."""
    if not results:
        raise ValueError("no results to combine")
    records = sum(r.records for r in results)

    def latency(values: list[LatencyMs]) -> LatencyMs | None:
        if len(values) != len(results):
            return None
        return LatencyMs(statistics.fmean(v.avg for v in values), max(v.max for v in values),
                         statistics.median(v.p50 for v in values),
                         max(v.p95 for v in values), max(v.p99 for v in values),
                         max(v.p999 for v in values))

    commits = [r.commit_ms for r in results if r.commit_ms is not None]
    cpu = [r.client_cpu_s for r in results if r.client_cpu_s is not None]
    return PerfResult(
        mode=results[0].mode, records=records, failed=sum(r.failed for r in results),
        requested=sum(r.requested for r in results), seconds=seconds,
        records_per_s=records / seconds if seconds > 0 else 0.0,
        mb_per_s=sum(r.mb_per_s * r.seconds for r in results) / seconds if seconds > 0 else 0.0,
        latency_ms=latency([r.latency_ms for r in results if r.latency_ms is not None]),
        transactions=sum(r.transactions for r in results),
        transactions_failed=sum(r.transactions_failed for r in results),
        commit_ms=CommitMs(statistics.median(c.p50 for c in commits),
                           max(c.p99 for c in commits), max(c.max for c in commits))
        if commits else None,
        client_cpu_s=sum(cpu) if len(cpu) == len(results) else None)
