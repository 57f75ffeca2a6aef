"""The figures one benchmark suite run collects, and the one table ``bench/suite.py`` prints.

A ``Throughput`` is records moved in a wall-clock interval (MB/s counts the records' payload
bytes, ``record_size`` each, in MiB like Kafka's perf tools). A ``Row`` is one system/scenario:
its produce and/or consume throughput, each with the CPU time the server process(es) spent
meanwhile (``server_cpu_s``, from ``/proc``: per record, the one figure a shared machine hardly
moves) and, where the benchmark's own client ran in this process, the client's CPU
(``client_cpu``), an optional latency (p50, p99 in ms, with what it measures), and its
durability setting in words. ``render_table`` prints the rows as one Markdown table (readable
in a terminal, pasted as-is into docs/benchmarks.md) in which every row after the first states its
produce and consume figures as a ratio to the first row's — Strata, 1 broker, acks=1 — so each
peer is read against Strata's comparable figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .process_cpu import ClientCpu

MIB = 1024 * 1024


@dataclass(frozen=True)
class Throughput:
    records: int
    seconds: float
    record_size: int
    server_cpu_s: float | None = None  # CPU the server process(es) used meanwhile (/proc)
    client_cpu: ClientCpu | None = None  # CPU this benchmark's own client used meanwhile

    @property
    def records_per_s(self) -> float:
        return self.records / max(self.seconds, 1e-9)

    @property
    def mb_per_s(self) -> float:
        return self.records_per_s * self.record_size / MIB

    @property
    def client_cpu_us_per_record(self) -> float | None:
        if self.client_cpu is None:
            return None
        return (self.client_cpu.python_s + self.client_cpu.native_s) * 1e6 / max(self.records, 1)

    @property
    def server_cpu_us_per_record(self) -> float | None:
        if self.server_cpu_s is None:
            return None
        return self.server_cpu_s * 1e6 / max(self.records, 1)


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p99_ms: float
    what: str  # e.g. "end-to-end at 20,000 records/s"


@dataclass(frozen=True)
class Row:
    system: str
    scenario: str
    durability: str
    produce: Throughput | None = None
    consume: Throughput | None = None
    latency: Latency | None = None


HEADER = ("system / scenario", "produce records/s", "produce MB/s", "consume records/s",
          "consume MB/s", "server CPU us/record produce / consume",
          "client CPU us/record produce / consume", "latency p50 / p99 ms",
          "durability", "vs Strata 1 broker")


def _rate(t: Throughput | None) -> tuple[str, str]:
    if t is None:
        return "-", "-"
    return f"{t.records_per_s:,.0f}", f"{t.mb_per_s:.2f}"


def _server_cpu(row: Row) -> str:
    return _cpu([t.server_cpu_us_per_record if t is not None else None
                 for t in (row.produce, row.consume)])


def _client_cpu(row: Row) -> str:
    return _cpu([t.client_cpu_us_per_record if t is not None else None
                 for t in (row.produce, row.consume)])


def _cpu(figures: list[float | None]) -> str:
    if all(f is None for f in figures):
        return "-"
    return " / ".join("-" if f is None else f"{f:.2f}" for f in figures)


def _ratio(row: Row, base: Row) -> str:
    parts = []
    if row.produce and base.produce:
        parts.append(f"produce {row.produce.records_per_s / base.produce.records_per_s:.2f}x")
    if row.consume and base.consume:
        parts.append(f"consume {row.consume.records_per_s / base.consume.records_per_s:.2f}x")
    return ", ".join(parts) or "-"


def table_cells(rows: Sequence[Row]) -> list[tuple[str, ...]]:
    """One tuple of cells per row, in ``HEADER``'s order."""
    cells: list[tuple[str, ...]] = []
    for i, row in enumerate(rows):
        latency = (f"{row.latency.p50_ms:.1f} / {row.latency.p99_ms:.1f} ({row.latency.what})"
                   if row.latency else "-")
        cells.append((f"{row.system}: {row.scenario}", *_rate(row.produce), *_rate(row.consume),
                      _server_cpu(row), _client_cpu(row), latency, row.durability,
                      "(reference)" if i == 0 else _ratio(row, rows[0])))
    return cells


def render_table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table with padded columns."""
    body = [HEADER, *table_cells(rows)]
    widths = [max(len(line[c]) for line in body) for c in range(len(HEADER))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)) \
            + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(HEADER), rule, *(line(cells) for cells in body[1:])])
