"""``bench.suite`` end to end with a tiny record count against real servers: a 1-broker and
a 3-broker Strata, redis-server (twice) and nats-server -js, all started and stopped by the suite.

Asserts only that the harness works: it exits 0, prints the Kafka perf-test lines for Strata,
and its table has every row with a positive figure in each cell that row measures (and a
server CPU figure beside each throughput, and the client's CPU beside Strata's). No timing
assertions: the machine may be loaded. Needs Debian's redis-server, redis-tools and nats-server
(``make test`` installs them; this test installs nothing).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(150)]

ROOT = Path(__file__).resolve().parents[3]  # bench is a package: run from the root
EXPECTED_ROWS = {
    "Strata: 1 broker, acks=1": ("produce", "consume", "latency"),
    "Strata: 3 brokers, RF 3, acks=all": ("produce", "latency"),
    "Strata: 1 broker, end-to-end": ("latency",),
    "Redis Streams: defaults": ("produce", "consume"),
    "Redis Streams: appendonly yes": ("produce", "consume"),
    "NATS JetStream": ("produce", "consume"),
}


def _number(cell: str) -> float:
    match = re.match(r"[\d,.]+", cell.strip())
    assert match, f"no number in {cell!r}"
    return float(match.group(0).replace(",", ""))


def test_suite_prints_every_row_with_positive_figures() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.suite", "--num-records", "3000", "--latency-rate", "1000",
         "--latency-seconds", "1", "--timeout-s", "60"],
        cwd=ROOT, capture_output=True, text=True, timeout=140, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), .* 99th", out)
    assert re.search(r"3000 records consumed, [\d.]+ records/sec", out)

    lines = [line for line in out.splitlines() if line.startswith("| ")]
    header, rows = lines[0], lines[1:]
    columns = [c.strip() for c in header.strip("|").split("|")]
    by_name = {}
    for line in rows:
        cells = dict(zip(columns, (c.strip() for c in line.strip("|").split("|")), strict=True))
        by_name[cells["system / scenario"]] = cells
    for prefix, measured in EXPECTED_ROWS.items():
        names = [name for name in by_name if name.startswith(prefix)]
        assert len(names) == 1, f"{prefix!r} rows: {names} in\n{out}"
        cells = by_name[names[0]]
        cpu = cells["server CPU us/record produce / consume"].split(" / ")
        client = cells["client CPU us/record produce / consume"].split(" / ")
        # The client's CPU is measured where it runs in the suite's process: confluent-kafka.
        ours = prefix.startswith("Strata") and bool({"produce", "consume"} & set(measured))
        if ours:
            if "produce" in measured:
                assert _number(client[0]) > 0
            if "consume" in measured:
                assert _number(client[1]) > 0
        else:
            assert client == ["-"]
        if "produce" in measured:
            assert _number(cells["produce records/s"]) > 0
            assert _number(cells["produce MB/s"]) > 0
            assert _number(cpu[0]) >= 0  # clock ticks: a tiny run may measure 0.00
        if "consume" in measured:
            assert _number(cells["consume records/s"]) > 0
            assert _number(cells["consume MB/s"]) > 0
            assert _number(cpu[1]) >= 0
        if not {"produce", "consume"} & set(measured):
            assert cpu == ["-"]
        if "latency" in measured:
            assert _number(cells["latency p50 / p99 ms"]) > 0
        assert cells["durability"] not in ("", "-")
    assert len(rows) == len(EXPECTED_ROWS)
