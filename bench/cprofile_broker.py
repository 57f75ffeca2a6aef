"""Run a Strata broker under cProfile with a CPU-time clock, profiling only while asked to.

py-spy (``bench/broker_profile.py``) samples wall time: on a loaded machine a broker waiting for
a core shows up wherever it was preempted. This profiler counts CPU time instead
(``time.process_time``: every thread of the process, so a flush thread's fsync counts too) and
gives exact call counts, which say how much work is per request and how much per record.

``python -m bench.cprofile_broker --out FILE -- --config broker.properties`` runs the broker
(``strata.cli.main.broker_main``) with profiling off; SIGUSR1 turns it on, SIGUSR2 off again, so
the harness profiles exactly its timed step and not the broker's start (imports alone cost
seconds). The stats are written to FILE when the broker exits (SIGTERM stops it cleanly).
``bench/local_broker.py`` starts it this way when given ``cprofile=FILE``; ``bench/produce.py``
and ``bench/consume.py`` take ``--cprofile FILE`` and print ``summary(FILE)``.

``python -m bench.cprofile_broker --summary FILE`` prints the top functions of a stats file.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

PROFILE_ON = signal.SIGUSR1
PROFILE_OFF = signal.SIGUSR2


@contextlib.contextmanager
def profiling(pids: Sequence[int]) -> Iterator[None]:
    """Profile the brokers ``pids`` (started under this runner) while the block runs."""
    for pid in pids:
        os.kill(pid, PROFILE_ON)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, PROFILE_OFF)


def summary(path: Path, limit: int = 25) -> str:
    """The functions with the most CPU of their own, then the most CPU below them, with call
    counts (the broker's code, its C calls such as ``posix.writev``, and the event loop)."""
    out = io.StringIO()
    stats = pstats.Stats(str(path), stream=out)
    out.write(f"cProfile of the broker (CPU time, all threads): {path}\n")
    stats.sort_stats("tottime").print_stats(limit)
    stats.sort_stats("cumtime").print_stats(r"strata|storage|services", limit)
    return out.getvalue()


def run_broker(out: Path, broker_args: Sequence[str]) -> None:
    from strata.cli.main import broker_main

    profiler = cProfile.Profile(time.process_time)

    def on(_signum: int, _frame: FrameType | None) -> None:
        profiler.enable()

    def off(_signum: int, _frame: FrameType | None) -> None:
        profiler.disable()

    signal.signal(PROFILE_ON, on)
    signal.signal(PROFILE_OFF, off)
    sys.argv = ["strata-broker", *broker_args]
    try:
        broker_main()
    finally:
        profiler.disable()
        profiler.dump_stats(str(out))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the stats here when the broker exits")
    parser.add_argument("--summary", type=Path, help="print the top functions of a stats file")
    parser.add_argument("broker_args", nargs="*", help="the broker's own arguments (after --)")
    args = parser.parse_args(argv)
    if args.summary:
        print(summary(args.summary))
        return 0
    if args.out is None:
        parser.error("--out FILE (or --summary FILE) is required")
    run_broker(args.out, args.broker_args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
