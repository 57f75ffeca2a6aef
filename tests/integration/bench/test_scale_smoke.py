"""``bench.scale`` end to end with tiny numbers against real 3-broker clusters: 30 partitions
(READY, Metadata latency, kill -9 of every broker and recovery), then 2 native producers alone
and beside 20 idle connections. Each half runs as its own test (``--skip-...``).

Asserts only that the harness works and says what it measured: it exits 0, prints the Kafka
perf-test style lines, every idle connection survived, and the table and the targets carry
every figure (never a timing: the machine may be loaded, so a target may read NOT MET).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(150)]

ROOT = Path(__file__).resolve().parents[3]  # bench is a package: run from the root
VERDICT = r"\((target <= [\d.]+ \w+|target <= [\d.]+ %)\): (met|NOT MET)"


@pytest.fixture(scope="module")
def native_perf_built() -> None:
    done = subprocess.run(["make", "-s", "native-perf"], cwd=ROOT, capture_output=True,
                          text=True, timeout=140, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _scale(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "bench.scale", "--timeout-s", "90", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=140, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _table_row(out: str, prefix: str) -> list[str]:
    rows = [line for line in out.splitlines() if line.startswith(f"| Strata: {prefix}")]
    assert len(rows) == 1, f"{prefix!r} rows in\n{out}"
    return [cell.strip() for cell in rows[0].strip("|").split("|")]


def test_partitions_ready_metadata_and_recovery_after_kill_9() -> None:
    out = _scale("--partitions", "30", "--sample", "5", "--skip-connections")
    assert re.search(r"30 partitions READY in [\d.]+ s", out), out
    assert re.search(r"20 Metadata requests, [\d.]+ ms avg latency, .* ms 50th, .* ms 99th", out)
    assert re.search(r"recovered in [\d.]+ s after the kill: .* 5 acks=all records to 5 "
                     r"partitions acknowledged", out), out
    assert len(re.findall(r"resident memory after (READY|recovery): broker-0 \d+ MiB, "
                          r"broker-1 \d+ MiB, broker-2 \d+ MiB", out)) == 2
    cells = _table_row(out, "Metadata, all topics, 30 partitions")
    assert float(cells[7].split(" / ")[0]) > 0  # latency p50
    for target in ("time to READY", "recovery after kill -9 of every broker",
                   "resident memory of the largest broker"):
        assert re.search(rf"- {target}: [\d.,]+ \w+ {VERDICT}", out), target
    assert "throughput lost to the idle connections: not measured" in out


@pytest.mark.usefixtures("native_perf_built")
def test_producers_alone_and_beside_idle_connections() -> None:
    out = _scale("--skip-partitions", "--idle-connections", "20", "--producers", "2",
                 "--producer-records", "2000")
    assert len(re.findall(r"^4000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), .*; "
                          r"0 failed", out, re.MULTILINE)) == 3  # warm-up, alone, with idle
    assert "20 of 20 idle connections still open and answering ApiVersions" in out
    for prefix in ("3 brokers, RF 3, 6 partitions, acks=all, 2 producers alone",
                   "3 brokers, RF 3, 6 partitions, acks=all, 2 producers beside 20 idle"):
        cells = _table_row(out, prefix)
        assert float(cells[1].replace(",", "")) > 0  # produce records/s
    assert re.search(rf"- throughput lost to the idle connections: -?[\d.,]+ % {VERDICT}", out)
    assert "time to READY: not measured" in out
