"""Redis Streams as a peer in ``bench/suite.py``: XADD driven by ``redis-benchmark``, XREAD
through redis-py (with the hiredis parser).

Produce: ``redis-benchmark -c 50 -P 64 -n N XADD bench '*' f <record>`` — 50 connections, 64
commands pipelined on each, redis-benchmark's own C client: the fastest way to drive XADD on
this machine. Its reported requests/s is the produce figure (redis-benchmark rounds ``-n`` up to
whole pipelines, so ``XLEN`` may exceed N by a few dozen).

Consume: one redis-py connection reads the whole stream from the start with ``XREAD COUNT
10000 STREAMS bench <last id>`` in a loop, each reply a batch of entries, timed from the first
request to the last entry — the equivalent of a consumer reading from the beginning. Bounded by
the stream's length and by ``timeout_s``.
"""

from __future__ import annotations

import csv
import io
import subprocess
import time
from typing import Any

import redis

from .peer_servers import find_binary
from .results import Throughput

STREAM = "bench"
FIELD = "f"
CLIENTS = 50
PIPELINE = 64
READ_COUNT = 10_000


def produce(host: str, port: int, num_records: int, record_size: int,
            timeout_s: float) -> Throughput:
    """XADD ``num_records`` entries of one ``record_size``-byte field with redis-benchmark."""
    value = "x" * record_size
    argv = [find_binary("redis-benchmark"), "-h", host, "-p", str(port), "-c", str(CLIENTS),
            "-P", str(PIPELINE), "-n", str(num_records), "--csv",
            "XADD", STREAM, "*", FIELD, value]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=True)
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    if not rows or float(rows[-1]["rps"]) <= 0:
        raise RuntimeError(f"redis-benchmark printed no rate:\n{done.stdout}\n{done.stderr}")
    rps = float(rows[-1]["rps"])  # excludes redis-benchmark's connection set-up
    return Throughput(num_records, num_records / rps, record_size)


def stream_length(host: str, port: int) -> int:
    client = redis.Redis(host=host, port=port)
    try:
        return int(client.xlen(STREAM))
    finally:
        client.close()


def consume(host: str, port: int, num_records: int, record_size: int,
            timeout_s: float) -> Throughput:
    """Read ``num_records`` entries from the start of the stream in XREAD batches."""
    client = redis.Redis(host=host, port=port, protocol=2)
    records = 0
    last_id: bytes | str = "0-0"
    try:
        started = time.perf_counter()
        deadline = started + timeout_s
        ended = started
        while records < num_records and time.perf_counter() < deadline:
            reply: Any = client.xread({STREAM: last_id}, count=READ_COUNT)
            if not reply:
                break
            entries = reply[0][1]  # RESP2: [[stream, [(id, {field: value}), ...]]]
            records += len(entries)
            last_id = entries[-1][0]
            ended = time.perf_counter()
    finally:
        client.close()
    if records < num_records:
        raise RuntimeError(f"XREAD returned {records} of {num_records} entries")
    return Throughput(records, ended - started, record_size)
