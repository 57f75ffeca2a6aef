"""NATS JetStream as a peer in ``bench/suite.py``, through nats-py on uvloop — the fastest NATS
client installable here (the Go ``nats bench`` tool and Go itself are on no reachable registry).

Set-up: one stream ``BENCH`` on subject ``bench``, file storage, one replica, no limits.

nats-py's JetStream helpers cost more per message than the protocol needs, so both loops speak
the JetStream protocol over nats-py's core connection (measured here, 100,000 records:
``js.publish_async`` ~7k/s against ~65-90k/s below; ``PullSubscription.fetch`` ~28k/s against
~110k/s below):

Produce — acknowledged publish: every record is published to ``bench`` with its own reply
subject under one inbox; the server answers each with a PubAck once the message is stored. One
wildcard subscription counts the acks (a PubAck carrying ``"error"`` fails the run); at most
``MAX_PENDING`` records are unacknowledged at a time. Timed until the last ack.

Consume — a durable pull consumer (``AckPolicy.NONE``: JetStream's cheapest delivery, like a
Kafka consumer that commits nothing) from the start of the stream: pull requests
(``$JS.API.CONSUMER.MSG.NEXT``) for ``FETCH_BATCH`` messages each, two outstanding, the next sent
whenever a batch has fully arrived. Status messages (request expired, no messages) carry headers
and are skipped.

Both loops are bounded by the record count and by ``timeout_s``. nats-py swallows a
cancellation that lands inside its publish path, which would lose Ctrl-C (asyncio's runner turns
SIGINT into cancelling the main task): the loops check for a pending cancellation themselves.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import nats
import uvloop
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType

from .results import Throughput

STREAM = "BENCH"
SUBJECT = "bench"
DURABLE = "bench"
MAX_PENDING = 20_000
FETCH_BATCH = 5_000
PULL_EXPIRES_NS = 5_000_000_000


def _raise_if_cancelled() -> None:
    """Re-raise a cancellation (Ctrl-C) that nats-py caught and dropped."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def _produce(url: str, num_records: int, record_size: int, timeout_s: float) -> Throughput:
    nc = await nats.connect(url, connect_timeout=10, max_reconnect_attempts=0)
    try:
        await nc.jetstream().add_stream(name=STREAM, subjects=[SUBJECT],
                                        storage=StorageType.FILE, num_replicas=1)
        acked = 0
        errors: list[bytes] = []
        all_acked = asyncio.Event()

        async def on_ack(msg: Msg) -> None:
            nonlocal acked
            if b'"error"' in msg.data:
                errors.append(msg.data)
            acked += 1
            if acked >= num_records:
                all_acked.set()

        inbox = nc.new_inbox()
        await nc.subscribe(inbox + ".*", cb=on_ack, pending_msgs_limit=MAX_PENDING * 2)
        payload = os.urandom(record_size)
        publish = nc.publish
        started = time.perf_counter()
        deadline = started + timeout_s
        for i in range(num_records):
            await publish(SUBJECT, payload, reply=f"{inbox}.{i}")
            if i & 1023 == 0:
                _raise_if_cancelled()
            while i - acked >= MAX_PENDING:
                if time.perf_counter() > deadline:
                    raise TimeoutError(f"JetStream: {acked} of {num_records} acks in "
                                       f"{timeout_s} s")
                await asyncio.sleep(0.0005)
        await asyncio.wait_for(all_acked.wait(), max(deadline - time.perf_counter(), 1.0))
        _raise_if_cancelled()
        elapsed = time.perf_counter() - started
        if errors:
            raise RuntimeError(f"{len(errors)} JetStream publishes failed: {errors[0]!r}")
        return Throughput(num_records, elapsed, record_size)
    finally:
        await nc.close()


async def _consume(url: str, num_records: int, record_size: int, timeout_s: float) -> Throughput:
    nc = await nats.connect(url, connect_timeout=10, max_reconnect_attempts=0)
    try:
        await nc.jetstream().add_consumer(STREAM, ConsumerConfig(
            durable_name=DURABLE, ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL))
        inbox = nc.new_inbox()
        received = requested = 0
        done = asyncio.Event()
        ended = 0.0
        request = json.dumps({"batch": FETCH_BATCH, "expires": PULL_EXPIRES_NS}).encode()

        async def pull() -> None:
            nonlocal requested
            requested += FETCH_BATCH
            await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{DURABLE}", request,
                             reply=inbox)

        async def on_msg(msg: Msg) -> None:
            nonlocal received, ended
            if msg.headers:  # a status message: 404 no messages, 408 request expired
                return
            received += 1
            if received >= num_records:
                ended = time.perf_counter()
                done.set()
            elif received % FETCH_BATCH == 0 and requested < num_records:
                await pull()

        await nc.subscribe(inbox, cb=on_msg, pending_msgs_limit=FETCH_BATCH * 4)
        started = time.perf_counter()
        await pull()
        await pull()
        try:
            await asyncio.wait_for(done.wait(), timeout_s)
        except TimeoutError:
            raise RuntimeError(f"the pull consumer got {received} of {num_records} messages in "
                               f"{timeout_s} s") from None
        _raise_if_cancelled()
        return Throughput(received, ended - started, record_size)
    finally:
        await nc.close()


def produce(url: str, num_records: int, record_size: int, timeout_s: float) -> Throughput:
    return uvloop.run(_produce(url, num_records, record_size, timeout_s))


def consume(url: str, num_records: int, record_size: int, timeout_s: float) -> Throughput:
    return uvloop.run(_consume(url, num_records, record_size, timeout_s))
