"""CPU time a benchmark's server processes (read from ``/proc``, Linux) and its own client
used: the figures a shared machine does not distort.

Wall-clock throughput on a loaded machine moves with everyone else's work; the CPU seconds the
server itself spent per record moved do not (much). ``cpu_seconds(pids)`` is the user + system
time of those processes — every thread, not their children — in seconds, with the kernel's
clock-tick resolution (``SC_CLK_TCK``, usually 10 ms): take it before and after a step and
divide by the records. A process that is gone counts as 0.

``client_cpu()`` measures the other side: the CPU the benchmark's own client (this process)
spent in a step, split between the Python thread and librdkafka's threads.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: Iterable[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / _TICK


@dataclass(frozen=True)
class ClientCpu:
    """CPU seconds a benchmark's own client spent in one step, split between the calling
    (Python) thread and every other thread of this process (librdkafka's, for confluent-kafka):
    the figures that show when a throughput is bound by the client, not the server."""

    python_s: float
    native_s: float

    def per_record(self, records: int) -> tuple[float, float]:
        """(Python, other threads) in microseconds per record."""
        n = max(records, 1)
        return self.python_s * 1e6 / n, self.native_s * 1e6 / n

    def line(self, records: int) -> str:
        python_us, native_us = self.per_record(records)
        return (f"client CPU: {self.python_s + self.native_s:.2f} s; {python_us:.2f} us/record "
                f"in the Python thread, {native_us:.2f} us/record in librdkafka's threads")


@contextmanager
def client_cpu() -> Iterator[list[ClientCpu]]:
    """Measure the client's CPU over a ``with`` block run by the thread that drives the
    client: yields a list that holds one :class:`ClientCpu` once the block ends. The process
    total (``process_time``) keeps the time of threads that have already exited, such as a
    closed consumer's, so "other threads" is that total minus this thread's own."""
    result: list[ClientCpu] = []
    thread_before, process_before = time.thread_time(), time.process_time()
    try:
        yield result
    finally:
        python_s = time.thread_time() - thread_before
        result.append(ClientCpu(python_s, max(time.process_time() - process_before - python_s,
                                              0.0)))
