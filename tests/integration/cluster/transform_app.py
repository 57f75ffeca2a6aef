"""The consume-transform-produce application of the exactly-once fault test, run as a process.

Owns one application instance: a confluent-kafka consumer assigned every input partition
(the group's committed offsets, ``read_committed``, no auto commit; one instance at a time, so
no rebalance to wait for after a kill) and a transactional producer with a fixed
``transactional.id``, so a restarted instance fences the zombie it replaces. Each loop polls up
to ``--batch`` records and, in one transaction, produces one output record per input record
(key = the input number, value ``out-<number>``) and sends the consumer's positions to the
transaction with the group's metadata. Kafka's recommended error handling: a retriable error
retries the call, an abortable one aborts and rewinds the consumer to the group's committed
offsets, anything else (fatal, fenced) exits non-zero for the test to start a new instance. With
``--budget FILE`` it begins no transaction once the input it committed reaches the number the
file holds, so the test's faults land while there is work in flight.

Invariants: ``init_transactions`` completes before the first committed offset is read (a
transaction of the previous instance is then decided, KIP-98's fencing); the process exits 0
only once the group's committed offsets equal the input's end offsets; it never runs longer
than ``--timeout`` seconds (exit 2), and no client call blocks it for more than ``HUNG_S``
(exit 4: librdkafka#5456).

    python transform_app.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID END,END,...
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Final, TypeVar

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

T = TypeVar("T")

CALL_TIMEOUT_S: Final = 10.0
RETRY_BACKOFF_S: Final = 0.1
EXIT_TIMEOUT: Final = 2
EXIT_FATAL: Final = 3
EXIT_HUNG: Final = 4
HUNG_S: Final = 3 * CALL_TIMEOUT_S


class Abort(Exception):
    """The transaction must be aborted and the consumer rewound."""


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} transform-app: {message}", flush=True)


@contextlib.contextmanager
def watchdog(what: str) -> Iterator[None]:
    """Exit (EXIT_HUNG) if the block outlives its call's timeout by far: librdkafka's
    ``send_offsets_to_transaction`` can block past its timeout when the group coordinator
    dies (confluentinc/librdkafka#5456, #5511); a hung process is then replaced, as a
    supervisor would, and the test counts the replacement."""

    def hung() -> None:
        log(f"{what}: still blocked after {HUNG_S:.0f} s, exiting (librdkafka#5456)")
        os._exit(EXIT_HUNG)

    timer = threading.Timer(HUNG_S, hung)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def attempt(call: Callable[[], T], what: str, deadline: float) -> T:
    """``call`` retried while its error is retriable; Abort when the transaction must abort;
    a fatal error (fenced, unknown) propagates as KafkaException."""
    while True:
        try:
            with watchdog(what):
                return call()
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.retriable() and time.monotonic() < deadline:
                log(f"{what}: retriable {error}")
                time.sleep(RETRY_BACKOFF_S)
                continue
            if error.txn_requires_abort():
                raise Abort(f"{what}: {error}") from exc
            raise


def committed(consumer: Consumer, partitions: list[TopicPartition], deadline: float
              ) -> list[TopicPartition]:
    """The group's committed offsets (0 where none yet), retrying while the broker cannot say
    (TimeoutError past ``deadline``)."""
    while True:
        try:
            found = consumer.committed(partitions, CALL_TIMEOUT_S)
        except KafkaException as exc:
            if time.monotonic() > deadline:
                raise TimeoutError("committed offsets") from exc
            log(f"committed offsets: {exc.args[0]}")
            time.sleep(RETRY_BACKOFF_S)
            continue
        return [TopicPartition(p.topic, p.partition, 0 if p.offset == OFFSET_INVALID else p.offset)
                for p in found]


def budget(path: Path) -> int:
    """How many input records the test lets the app commit for now (it replaces the file)."""
    try:
        return int(path.read_text(encoding="ascii"))
    except (OSError, ValueError):
        return 0


def run(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.timeout
    ends = [int(e) for e in args.ends.split(",")]
    partitions = [TopicPartition(args.input, p) for p in range(len(ends))]
    producer = Producer({
        "bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
        "transaction.timeout.ms": 15_000, "linger.ms": 5, "log_level": 0,
        "error_cb": lambda error: log(f"producer: {error}")})
    attempt(lambda: producer.init_transactions(CALL_TIMEOUT_S), "init_transactions", deadline)
    log(f"initialised {args.transactional_id}")
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "log_level": 0,
        "error_cb": lambda error: log(f"consumer: {error}")})
    try:
        start = committed(consumer, partitions, deadline)
        consumer.assign(start)
        log(f"starting at {[p.offset for p in start]} of {ends}")
        positions = {p.partition: p.offset for p in start}
        while list(positions.values()) != ends:
            if time.monotonic() > deadline:
                log("timed out")
                return EXIT_TIMEOUT
            if args.budget is not None and sum(positions.values()) >= budget(args.budget):
                time.sleep(0.05)  # the test holds the input back until its next fault
                continue
            messages = [m for m in consumer.consume(args.batch, 0.5) if m.error() is None]
            if not messages:
                continue
            try:
                attempt(producer.begin_transaction, "begin_transaction", deadline)
                after = dict(positions)
                for message in messages:
                    partition, offset = message.partition() or 0, message.offset() or 0
                    if offset < after[partition]:
                        # Fetched before a rewind: already in this transaction or committed.
                        log(f"skipping {partition}@{offset} below position {after[partition]}")
                        continue
                    number = int(message.value() or b"")
                    attempt(partial(producer.produce, args.output, key=b"%d" % number,
                                    value=b"out-%d" % number), "produce", deadline)
                    after[partition] = offset + 1
                    producer.poll(0)
                offsets = [TopicPartition(args.input, p, o) for p, o in sorted(after.items())]

                def send_offsets(o: list[TopicPartition] = offsets) -> None:
                    producer.send_offsets_to_transaction(
                        o, consumer.consumer_group_metadata(), CALL_TIMEOUT_S)

                attempt(send_offsets, "send_offsets_to_transaction", deadline)
                attempt(lambda: producer.commit_transaction(CALL_TIMEOUT_S),
                        "commit_transaction", deadline)
                positions = after
                log(f"committed {list(positions.values())}")
            except Abort as exc:
                log(f"aborting: {exc}")
                attempt(lambda: producer.abort_transaction(CALL_TIMEOUT_S), "abort_transaction",
                        deadline)
                rewound = committed(consumer, partitions, deadline)
                for rewind in rewound:
                    consumer.seek(rewind)
                positions = {p.partition: p.offset for p in rewound}
        log("every input record committed")
        return 0
    except KafkaException as exc:
        log(f"fatal: {exc.args[0]}")
        return EXIT_FATAL
    except TimeoutError as exc:
        log(f"timed out: {exc}")
        return EXIT_TIMEOUT
    finally:
        consumer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("bootstrap")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("group")
    parser.add_argument("transactional_id")
    parser.add_argument("ends", help="the input's end offsets, comma-separated")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--budget", type=Path, default=None,
                        help="a file holding how many input records may be committed for now")
    parser.add_argument("--timeout", type=float, default=90.0)
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
