"""End-to-end latency at a fixed rate, with confluent-kafka, in the spirit of Kafka's
``EndToEndLatency`` tool but under steady load.

A consumer runs in its own process (so neither side's Python waits on the other's GIL),
assigned to the topic's partition 0 from the beginning. The producer (acks=1, ``linger.ms=1``)
first sends warm-up records (send stamp 0) every 10 ms until the consumer reports one arrived —
so connection set-up and metadata are out of the measurement — then sends ``rate`` records/s
for ``duration_s`` seconds, paced in small bursts against the clock. Each record's first 8 bytes
are ``time.time_ns()`` at ``produce()``; the consumer takes receive - send per record on the
same host's clock; it polls for one record and then drains what has already arrived, never
waiting for a batch to fill (``consume(1000, timeout)`` would add up to the timeout). It
returns p50/p99/max over every timed record, or fails when not all arrived within
``duration_s + RECEIVE_GRACE_S``.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import queue
import struct
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

STAMP = struct.Struct(">q")
RECEIVE_GRACE_S = 20.0
READY_TIMEOUT_S = 30.0
PRODUCER_CONFIG = {"acks": "1", "linger.ms": "1"}


@dataclass(frozen=True)
class LatencyResult:
    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float


def _percentile(sorted_ms: list[float], p: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(p * len(sorted_ms)))]


def _consumer_main(bootstrap: str, topic: str, expected: int, budget_s: float,
                   ready: multiprocessing.synchronize.Event,
                   results: multiprocessing.Queue[list[float]]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "strata-bench-latency",
                         "enable.auto.commit": "false", "fetch.wait.max.ms": "100",
                         "fetch.queue.backoff.ms": "0"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    latencies: list[float] = []
    deadline = time.monotonic() + READY_TIMEOUT_S + budget_s
    unpack, now_ns = STAMP.unpack_from, time.time_ns
    try:
        while len(latencies) < expected and time.monotonic() < deadline:
            # consume(n, timeout) would hold records back until n arrived or the timeout ran
            # out: wait for one, then drain whatever else is already here without waiting.
            first = consumer.poll(0.1)
            if first is None:
                continue
            for msg in [first, *consumer.consume(num_messages=1000, timeout=0)]:
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"consume failed: {err}")
                    continue
                received = now_ns()
                (sent,) = unpack(msg.value())  # type: ignore[arg-type]
                if sent == 0:
                    ready.set()
                else:
                    latencies.append((received - sent) / 1e6)
    finally:
        consumer.close()
    results.put(latencies)


def _collect(results: multiprocessing.Queue[list[float]],
             consumer: multiprocessing.process.BaseProcess, timeout_s: float) -> list[float]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            latencies: list[float] = results.get(timeout=0.5)
            return latencies
        except queue.Empty:
            if not consumer.is_alive():
                break
    raise RuntimeError(f"the latency consumer reported nothing (exit code {consumer.exitcode})")


def measure(bootstrap: str, topic: str, rate: int, duration_s: float, record_size: int
            ) -> LatencyResult:
    """Send ``rate`` records/s for ``duration_s`` s; the latency of every one, summarised."""
    expected = int(rate * duration_s)
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    results: multiprocessing.Queue[list[float]] = ctx.Queue()
    consumer = ctx.Process(target=_consumer_main, daemon=True,
                           args=(bootstrap, topic, expected, duration_s + RECEIVE_GRACE_S,
                                 ready, results))
    consumer.start()
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
    padding = bytes(record_size - STAMP.size)
    try:
        warmup_deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready.is_set():
            if time.monotonic() > warmup_deadline or not consumer.is_alive():
                raise RuntimeError("the latency consumer did not receive a warm-up record")
            producer.produce(topic, STAMP.pack(0) + padding)
            producer.poll(0.01)
        produce, poll, pack, now_ns = producer.produce, producer.poll, STAMP.pack, time.time_ns
        sent = 0
        started = time.perf_counter()
        stop_at = started + duration_s * 2
        while sent < expected and time.perf_counter() < stop_at:
            due = min(expected, int((time.perf_counter() - started) * rate) + 1)
            while sent < due:
                produce(topic, pack(now_ns()) + padding)
                sent += 1
            poll(0)
            time.sleep(0.0002)
        producer.flush(10)
        latencies = _collect(results, consumer, duration_s + RECEIVE_GRACE_S)
    finally:
        consumer.join(5)
        if consumer.is_alive():
            consumer.terminate()
            consumer.join(5)
    if len(latencies) < expected:
        raise RuntimeError(f"only {len(latencies)} of {expected} timed records arrived")
    latencies.sort()
    return LatencyResult(len(latencies), _percentile(latencies, 0.5),
                         _percentile(latencies, 0.99), latencies[-1])
