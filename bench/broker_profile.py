"""Sample a running broker with py-spy while a benchmark drives it, and summarise the profile.

``py_spy_record(pid, out)`` runs ``py-spy record --pid PID --format raw`` (collapsed stacks, one
``frame;frame;... count`` line each) for the duration of a ``with`` block and stops it with
SIGINT (py-spy then writes the file), by its PID, bounded in time. ``top_frames(path)`` reads
such a file and returns the frames that were on CPU most — by self samples (the leaf frame) and
by total samples (anywhere on the stack, leaving out the frames on nearly every stack such as
the entry point and the event loop) — which is what to optimise next. py-spy is in the
``bench`` extra; it needs ptrace rights on the broker (root, or ``CAP_SYS_PTRACE``).

Run alone against any process: ``.venv/bin/python -m bench.broker_profile --pid PID --seconds 20
[--out FILE]`` prints the top frames.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

RATE_HZ = 200
STOP_TIMEOUT_S = 30.0
ATTACH_S = 1.0  # py-spy needs a moment to attach before the load starts


def _py_spy() -> str:
    candidate = Path(sys.executable).parent / "py-spy"
    found = str(candidate) if candidate.exists() else shutil.which("py-spy")
    if not found:
        raise RuntimeError("py-spy is not installed: `make install` (the bench extra)")
    return found


@contextlib.contextmanager
def py_spy_record(pid: int, out: Path, seconds: float | None = None) -> Iterator[None]:
    """Record ``pid`` into ``out`` (raw collapsed stacks) while the block runs."""
    argv = [_py_spy(), "record", "--pid", str(pid), "--rate", str(RATE_HZ), "--format", "raw",
            "--output", str(out), "--nonblocking"]
    if seconds is not None:
        argv += ["--duration", str(int(seconds))]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    try:
        time.sleep(ATTACH_S)
        yield
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if not out.exists():
            print(f"py-spy wrote no profile: {err.decode(errors='replace')[-2000:]}",
                  file=sys.stderr)


def top_frames(path: Path, limit: int = 15) -> tuple[int, list[tuple[str, int]],
                                                     list[tuple[str, int]]]:
    """(total samples, top frames by self samples, top frames by total samples)."""
    self_counts: collections.Counter[str] = collections.Counter()
    total_counts: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        samples += count
        self_counts[frames[-1]] += count
        for frame in set(frames):
            total_counts[frame] += count
    # frames on (nearly) every stack — the entry point, the event loop's run — say nothing
    inner = collections.Counter({frame: count for frame, count in total_counts.items()
                                 if count < 0.95 * samples})
    return samples, self_counts.most_common(limit), inner.most_common(limit)


def format_top(path: Path, limit: int = 15) -> str:
    samples, by_self, by_total = top_frames(path, limit)
    if not samples:
        return f"no samples in {path}"
    lines = [f"{samples} samples ({path})", "top frames by self time:"]
    lines += [f"  {count / samples:6.1%}  {frame}" for frame, count in by_self]
    lines.append("top frames by total time (on the stack, below the event loop):")
    lines += [f"  {count / samples:6.1%}  {frame}" for frame, count in by_total]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=Path("py-spy.raw.txt"))
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    with py_spy_record(args.pid, args.out, args.seconds):
        time.sleep(args.seconds + 1)
    print(format_top(args.out, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
