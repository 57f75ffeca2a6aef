"""What the client benchmarks (``produce``, ``consume``, ``spark_read``) share around their
timed step: the workload options, the choice between ``--bootstrap`` and a broker of their own,
and the server CPU line.

* ``add_workload_arguments``: ``--num-records``, ``--record-size``, ``--topic``,
  ``--partitions`` (each script its own defaults) and ``--bootstrap``;
* ``run_bench``: runs a script's step against ``--bootstrap`` when given, else against a broker
  started for it (``bench/local_broker.py``, its PID appended to ``pids``), and prints the
  broker's cProfile summary afterwards when ``cprofile`` names a stats file;
* ``server_cpu_line``: ``<what> CPU: S s, U us/record``, the server's CPU per record moved
  (``bench/process_cpu.py``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from .cprofile_broker import summary
from .local_broker import local_broker


def add_workload_arguments(parser: argparse.ArgumentParser, *, topic: str,
                           partitions: int) -> None:
    parser.add_argument("--num-records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--topic", default=topic)
    parser.add_argument("--partitions", type=int, default=partitions)
    parser.add_argument("--bootstrap", help="use this cluster instead of starting a broker")


def run_bench(bench: Callable[[str], None], bootstrap: str | None, *,
              pids: list[int] | None = None, cprofile: Path | None = None,
              extra_config: dict[str, str] | None = None) -> int:
    """``bench(bootstrap)`` against ``bootstrap`` or a local broker; the exit code (0)."""
    if bootstrap:
        bench(bootstrap)
    else:
        with local_broker(extra_config, pids=pids, cprofile=cprofile) as local:
            bench(local)
    if cprofile:
        print(summary(cprofile))
    return 0


def server_cpu_line(what: str, seconds: float, records: int) -> str:
    return f"{what} CPU: {seconds:.2f} s, {seconds * 1e6 / max(records, 1):.2f} us/record"
