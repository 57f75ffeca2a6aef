"""Storage-core benchmark: raw ``os.write`` vs ``Log`` append, sequential read, recovery.

Prints one line per measurement in the style of Kafka's perf-test tools, e.g.::

    raw-write 1MiB: 256 batches, 1843.1 batches/sec (1843.10 MB/sec), 0.54 ms avg latency, ...

Measured, on the same disk (a temp dir under --dir):
* raw sequential write of 16 KiB and 1 MiB chunks with plain ``os.write`` (the ceiling);
* ``Log.append_as_leader`` of 16 KiB and 1 MiB record batches (validation, offset assignment,
  index maintenance included), without and with an fsync (``Log.flush``) after every batch;
* sequential read of the whole log through ``Log.read`` slices (pread);
* recovery: reopening the log after an unclean shutdown scans every batch (framing + CRC).

Run: ``.venv/bin/python -m bench.storage [--total-mb 256] [--dir /tmp]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from strata.storage.clock import SystemClock
from strata.storage.log import Log
from strata.storage.log_config import LogConfig
from strata.storage.log_loader import load_log
from strata.storage.records import RecordSpec, build_batch

KIB = 1024
MIB = 1024 * 1024


def make_batch(batch_bytes: int, record_bytes: int = 1000) -> bytes:
    """An uncompressed batch of about ``batch_bytes`` made of ``record_bytes`` values."""
    count = max(1, batch_bytes // (record_bytes + 20))
    value = os.urandom(record_bytes)
    return build_batch([RecordSpec(key=None, value=value, timestamp=int(time.time() * 1000))
                        for _ in range(count)])


def report(name: str, count: int, nbytes: int, elapsed: float, latencies: list[float]) -> None:
    lat = sorted(latencies) or [0.0]

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000

    print(f"{name}: {count} batches, {count / elapsed:.1f} batches/sec "
          f"({nbytes / MIB / elapsed:.2f} MB/sec), "
          f"{statistics.fmean(lat) * 1000:.2f} ms avg latency, {lat[-1] * 1000:.2f} ms max "
          f"latency, {pct(0.5):.2f} ms 50th, {pct(0.95):.2f} ms 95th, {pct(0.99):.2f} ms 99th, "
          f"{pct(0.999):.2f} ms 99.9th.", flush=True)


def timed(n: int, op: Callable[[], object]) -> tuple[float, list[float]]:
    os.sync()  # start each phase without the previous phase's dirty pages (not timed)
    latencies = []
    start = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        op()
        latencies.append(time.perf_counter() - t0)
    return time.perf_counter() - start, latencies


def bench_raw(dir: Path, size: int, total: int) -> float:
    data = os.urandom(size)
    path = dir / f"raw-{size}.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    n = max(1, total // size)

    def write() -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

    elapsed, lat = timed(n, write)
    os.close(fd)
    path.unlink()
    report(f"raw-write {label(size)}", n, n * size, elapsed, lat)
    return n * size / MIB / elapsed


def warm_up(dir: Path, total: int) -> None:
    """Write and delete ``total`` bytes unreported. On a VM the first touch of never-used guest
    memory is several times slower than reusing freed page-cache pages (measured here: 1 MiB
    writes ~300 MB/s on first touch, ~4 GB/s after), which would skew whichever phase ran
    first; warming up as many bytes as all phases keep makes every phase run on reused pages."""
    data = os.urandom(MIB)
    path = dir / "warm-up.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(max(1, total // MIB)):
        os.write(fd, data)
    os.close(fd)
    path.unlink()


def open_log(dir: Path, name: str) -> Log:
    config = LogConfig.from_props({"segment.bytes": str(256 * MIB)})
    return load_log(dir / name, config, SystemClock())


def bench_append(
    dir: Path, size: int, total: int, flush: bool, round_: int = 0
) -> tuple[float, Log]:
    batch = make_batch(size)
    log = open_log(dir, f"append-{size}-{int(flush)}-{round_}-0")
    n = max(1, total // len(batch))

    def append() -> None:
        log.append_as_leader(batch, leader_epoch=0)
        if flush:
            log.flush()

    elapsed, lat = timed(n, append)
    tag = "+fsync" if flush else ""
    report(f"log-append {label(size)}{tag}", n, n * len(batch), elapsed, lat)
    return n * len(batch) / MIB / elapsed, log


def bench_read(log: Log) -> None:
    offset, chunks, nbytes, lat = log.log_start_offset, 0, 0, []
    start = time.perf_counter()
    while offset < log.log_end_offset:
        t0 = time.perf_counter()
        info = log.read(offset, MIB)
        data = info.read_bytes()
        lat.append(time.perf_counter() - t0)
        from strata.storage import record_batch as rb

        pos, last = 0, offset
        while (size := rb.peek_size(data, pos)) is not None and pos + size <= len(data):
            last = rb.parse_header(data, pos).next_offset
            pos += size
        nbytes += pos
        chunks += 1
        offset = last
    report("log-read 1MiB fetches", chunks, nbytes, time.perf_counter() - start, lat)


def bench_recovery(log: Log) -> float:
    dir, size = log.dir, log.size
    log.flush()
    for seg in log.segments:  # an unclean stop: no clean-shutdown marker, no snapshot
        seg.close()
    start = time.perf_counter()
    recovered = load_log(dir, log.config, SystemClock(), recovery_point=0)
    elapsed = time.perf_counter() - start
    assert recovered.log_end_offset == log.log_end_offset
    report("recovery scan", len(recovered.segments), size, elapsed, [elapsed])
    recovered.close()
    return size / MIB / elapsed


def label(size: int) -> str:
    return f"{size // MIB}MiB" if size >= MIB else f"{size // KIB}KiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mb", type=int, default=256, help="bytes per run (MiB)")
    parser.add_argument("--fsync-mb", type=int, default=32, help="bytes per fsync run (MiB)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()
    total, fsync_total = args.total_mb * MIB, args.fsync_mb * MIB
    with tempfile.TemporaryDirectory(prefix="strata-bench-", dir=args.dir) as tmp:
        dir = Path(tmp)
        warm_up(dir, 8 * total + 2 * fsync_total)  # every phase's footprint
        ratios = []
        keep: Log | None = None
        for size in (16 * KIB, MIB):
            # Raw and log alternate twice; the best of each is compared (writeback stalls
            # from earlier phases otherwise land on whichever runs first).
            raws, appends = [], []
            for round_ in range(2):
                raws.append(bench_raw(dir, size, total))
                appended, log = bench_append(dir, size, total, flush=False, round_=round_)
                appends.append(appended)
                if size == MIB and round_ == 1:
                    keep = log
                else:
                    log.close()
            ratios.append((label(size), max(appends) / max(raws)))
            _, flushed = bench_append(dir, size, fsync_total, flush=True)
            flushed.close()
        assert keep is not None
        bench_read(keep)
        recovery = bench_recovery(keep)
        for name, ratio in ratios:
            print(f"summary: append/raw at {name} = {ratio * 100:.0f}% (best of 2 each)")
        print(f"summary: recovery = {recovery:.0f} MB/sec")


if __name__ == "__main__":
    main()
