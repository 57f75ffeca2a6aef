"""``strata produce TOPIC``: one record per input line, from stdin or ``--file`` (kcat's ``-P``).

Input: bytes split on ``\\n`` (the newline is not part of the record; every line is a record,
an empty line an empty value). With ``--key-separator SEP`` (kcat's ``-K``) each line is
``key SEP value``, split at the first SEP; a line without SEP is a value with a null key.
``--header k=v`` (repeatable; duplicates allowed, as Kafka allows) is set on every record.

Delivery: confluent-kafka's ``Producer`` with ``--acks`` and ``--compression``. Records without
``--partition`` are placed by ``murmur2_random``, the Java client's partitioner, so a key lands on
the same partition whichever client wrote it (null keys: random). ``--rate N`` paces records to
N per second (``RateLimiter``); waiting serves delivery reports instead of sleeping. A record is
failed when its delivery report carries an error or it is not delivered within ``--timeout``.

Exit: 0 when every record was acknowledged (one summary line on stderr: how many were sent),
1 when any failed (one line: how many, and the first error), 130 after Ctrl-C (what was read
is still flushed and counted). The topic must exist: produce never auto-creates one.
"""

from __future__ import annotations

import enum
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated, Any, Final

import typer
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from strata.cli.errors import EXIT_INTERRUPTED, CliError, reported_errors
from strata.cli.kafka_client import (
    Connection,
    kafka_command,
    kafka_error,
)
from strata.cli.output import progress

# Extra seconds the final flush waits beyond --timeout (message.timeout.ms fails what is late).
FLUSH_GRACE_S: Final = 5.0
# How long one wait for queue space (BufferError) serves delivery reports before retrying.
QUEUE_FULL_POLL_S: Final = 0.1

Headers = list[tuple[str, str | bytes | None]]


class Acks(enum.StrEnum):
    """``--acks``: Kafka's producer ``acks`` (``all`` and ``-1`` are the same)."""

    ALL = "all"
    MINUS_ONE = "-1"
    ZERO = "0"
    ONE = "1"


class Compression(enum.StrEnum):
    """``--compression``: Kafka's ``compression.type`` codecs."""

    NONE = "none"
    GZIP = "gzip"
    SNAPPY = "snappy"
    LZ4 = "lz4"
    ZSTD = "zstd"


@dataclass(frozen=True, slots=True)
class InputRecord:
    key: bytes | None
    value: bytes


def split_record(line: bytes, key_separator: bytes | None) -> InputRecord:
    """One input line as a record: ``key SEP value`` split at the first SEP, if a SEP is set."""
    if key_separator:
        key, sep, value = line.partition(key_separator)
        if sep:
            return InputRecord(key, value)
    return InputRecord(None, line)


def read_lines(stream: IO[bytes]) -> Iterator[bytes]:
    """The lines of ``stream`` without their ``\\n`` (a last line without one counts too)."""
    for line in stream:
        yield line[:-1] if line.endswith(b"\n") else line


def parse_headers(values: Sequence[str]) -> Headers:
    """``["k=v", ...]`` as Kafka record headers; ``k=`` is an empty value, ``k`` alone an error."""
    headers: Headers = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--header")
        headers.append((key, value.encode()))
    return headers


class RateLimiter:
    """Paces records to ``rate`` per second: record i is due at ``start + i / rate``.

    The schedule is absolute, so a late record does not shift the later ones (the average
    rate holds). The clock is injected so the pacing is testable without waiting.
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self._interval = 1.0 / rate
        self._clock = clock
        self._start: float | None = None
        self._taken = 0

    def wait_time(self) -> float:
        """Seconds until the next record is due (0 when it is due now)."""
        if self._start is None:
            return 0.0
        due = self._start + self._taken * self._interval
        return max(0.0, due - self._clock())

    def take(self) -> None:
        """Count one record as sent (the first one starts the schedule)."""
        if self._start is None:
            self._start = self._clock()
        self._taken += 1


@dataclass
class Deliveries:
    """Delivery reports counted (the producer's callback, run inside ``poll``/``flush``)."""

    topic: str
    sent: int = 0
    failed: int = 0
    first_error: CliError | None = None
    on_report: Callable[[], None] = field(default=lambda: None)

    def report(self, error: KafkaError | None, _message: Message) -> None:
        if error is None:
            self.sent += 1
        else:
            self.fail(kafka_error(error, f"topic {self.topic!r}"))
        self.on_report()

    def fail(self, error: CliError, count: int = 1) -> None:
        self.failed += count
        if self.first_error is None:
            self.first_error = error


@kafka_command
def produce(
    ctx: typer.Context,
    conn: Connection,
    topic: Annotated[str, typer.Argument(help="Topic to write to.", show_default=False)],
    file: Annotated[
        Path | None, typer.Option("--file", exists=True, dir_okay=False, readable=True,
                                  help="Read records from this file instead of stdin.")
    ] = None,
    key_separator: Annotated[
        str | None, typer.Option("--key-separator", "-K", metavar="SEP",
                                 help="Split each line into key SEP value (kcat's -K).")
    ] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", "-H", metavar="KEY=VALUE",
                                       help="A header on every record. Repeatable.")
    ] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", min=0,
                                 help="Write every record to this partition.")
    ] = None,
    compression: Annotated[
        Compression, typer.Option("--compression", "-z", help="Batch compression codec.")
    ] = Compression.NONE,
    acks: Annotated[
        Acks, typer.Option("--acks", help="Acknowledgements to wait for: 0, 1 or all.")
    ] = Acks.ALL,
    rate: Annotated[
        float | None, typer.Option("--rate", metavar="RECORDS/S",
                                   help="Send at most this many records per second.")
    ] = None,
) -> None:
    """Write records read line by line from stdin (or --file) to a topic."""
    headers = parse_headers(header or [])
    if rate is not None and rate <= 0:
        raise typer.BadParameter("must be more than 0", param_hint="--rate")
    if key_separator == "":
        raise typer.BadParameter("cannot be empty", param_hint="--key-separator")
    separator = key_separator.encode() if key_separator is not None else None
    with reported_errors(ctx):
        producer, errors = conn.client(Producer, {
            "acks": "all" if acks is Acks.MINUS_ONE else acks.value,
            "compression.type": compression.value,
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "message.timeout.ms": conn.timeout_ms,
            "request.timeout.ms": conn.timeout_ms,
        })
        conn.topic(producer, errors, topic, [partition] if partition is not None else ())
        deliveries = Deliveries(topic)
        limiter = RateLimiter(rate) if rate is not None else None
        interrupted = False
        with progress(bar=False) as bar:
            task = bar.add_task(f"produce {topic}", total=None)
            deliveries.on_report = lambda: bar.update(task, completed=deliveries.sent)
            stream: IO[bytes] = file.open("rb") if file is not None else sys.stdin.buffer
            try:
                for line in read_lines(stream):
                    record = split_record(line, separator)
                    if limiter is not None:
                        while (wait := limiter.wait_time()) > 0:
                            producer.poll(wait)
                        limiter.take()
                    _send(producer, topic, record, headers, partition, deliveries)
                    producer.poll(0)
            except KeyboardInterrupt:
                interrupted = True  # stop reading; what was read is still flushed below
            finally:
                if file is not None:
                    stream.close()
            undelivered = producer.flush(conn.timeout_s + FLUSH_GRACE_S)
        if undelivered:
            deliveries.fail(CliError(f"not delivered within {conn.timeout_s:g}s"), undelivered)
        total = deliveries.sent + deliveries.failed
        if deliveries.failed:
            first = deliveries.first_error.message if deliveries.first_error else "unknown"
            raise CliError(
                f"{deliveries.failed} of {total} records failed ({deliveries.sent} sent to "
                f"{topic!r}); first error: {first}"
            )
        typer.echo(f"{ctx.command_path}: {deliveries.sent} records sent to {topic!r}", err=True)
    if interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)


def _send(
    producer: Producer,
    topic: str,
    record: InputRecord,
    headers: Headers,
    partition: int | None,
    deliveries: Deliveries,
) -> None:
    """Queue one record, waiting for queue space (serving delivery reports) when it is full."""
    kwargs: dict[str, Any] = {"partition": partition} if partition is not None else {}
    while True:
        try:
            producer.produce(topic, value=record.value, key=record.key,
                             headers=headers or None, on_delivery=deliveries.report, **kwargs)
            return
        except BufferError:
            producer.poll(QUEUE_FULL_POLL_S)
        except KafkaException as exc:  # refused before queueing: e.g. _MSG_SIZE_TOO_LARGE
            deliveries.fail(kafka_error(exc, f"topic {topic!r}"))
            return

