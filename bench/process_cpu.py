"""CPU time a server process used, read from ``/proc`` (Linux): the figure a shared machine
does not distort.

Wall-clock throughput on a loaded machine moves with everyone else's work; the CPU seconds the
server itself spent per record moved do not (much). ``cpu_seconds(pids)`` is the user + system
time of those processes — every thread, not their children — in seconds, with the kernel's
clock-tick resolution (``SC_CLK_TCK``, usually 10 ms): take it before and after a step and
divide by the records. A process that is gone counts as 0.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

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
