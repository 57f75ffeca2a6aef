"""``strata consume TOPIC``: records to stdout, from a chosen position (kcat's ``-C``).

Reading: confluent-kafka's ``Consumer`` with ``assign()`` on the topic's partitions (all, or
``--partition``, repeatable): no group membership, no commits. librdkafka insists on a
``group.id`` even so; it is never joined. ``isolation.level`` is read_uncommitted, the Java
consumer's default (kafka-console-consumer.sh reads the same records).

``--from`` (``StartPosition``): ``earliest`` / ``beginning``, ``latest`` / ``end`` (only new
records), ``N`` (absolute offset N in every partition read), ``-N`` (the last N records of each
partition, kcat's relative offset) or ``@T`` (the first record with timestamp >= T ms since
the epoch, ListOffsets by timestamp; a partition with none starts at its end). An absolute
offset past a partition's end fails with ``_AUTO_OFFSET_RESET`` (librdkafka's name for
OFFSET_OUT_OF_RANGE under ``auto.offset.reset=error``) rather than jump silently.

Stopping: after ``--count N`` records, or with ``--exit-at-end`` once every partition read is
caught up (librdkafka's partition EOF: the fetch position reached the high watermark), else on
Ctrl-C (exit 130). With ``--exit-at-end`` a consumer that has seen every broker down for
``--timeout`` gives up (exit 1), so it is bounded.

Output (stdout; ``format_value`` / ``format_json`` / ``Template``): ``--format value`` (the
default) writes each value's bytes and a newline; ``--format json`` one object a line with
``topic, partition, offset, timestamp, key, value, headers`` (bytes decoded as UTF-8, invalid
bytes as ``\\xNN`` escapes; headers a list of ``[key, value]`` pairs, in record order);
``--template/-f`` a kcat-like format string (see ``Template``). A summary goes to stderr.
"""

from __future__ import annotations

import enum
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Final

import typer
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from strata.cli.errors import EXIT_INTERRUPTED, reported_errors
from strata.cli.kafka_client import (
    Connection,
    kafka_command,
)
from strata.cli.output import progress
from strata.client.kafka_admin import ConnectionErrors
from strata.client.kafka_errors import KafkaClientError

POLL_S: Final = 0.2
FETCH_WAIT_MAX_MS: Final = 100  # snappier --exit-at-end than librdkafka's 500 ms
GROUP_ID: Final = "strata-cli"  # librdkafka requires one; assign() never joins it


# ------------------------------------------------------------------------------- positions
class StartKind(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    OFFSET = "offset"
    TAIL = "tail"
    TIMESTAMP = "timestamp"


@dataclass(frozen=True, slots=True)
class StartPosition:
    """Where ``--from`` starts each partition; ``value`` is the offset, count or timestamp."""

    kind: StartKind
    value: int = 0


def parse_start(text: str) -> StartPosition:
    """``--from``'s value; ``ValueError`` with the reason when it is none of the forms."""
    word = text.strip().lower()
    if word in ("earliest", "beginning"):
        return StartPosition(StartKind.EARLIEST)
    if word in ("latest", "end"):
        return StartPosition(StartKind.LATEST)
    if word.startswith("@"):
        if not word[1:].isdigit():
            raise ValueError(f"{text!r}: expected @<timestamp in ms since the epoch>")
        return StartPosition(StartKind.TIMESTAMP, int(word[1:]))
    if word.startswith("-") and word[1:].isdigit():
        return StartPosition(StartKind.TAIL, int(word[1:]))
    if word.isdigit():
        return StartPosition(StartKind.OFFSET, int(word))
    raise ValueError(f"{text!r}: expected earliest, latest, an offset, -N or @<timestamp-ms>")


def tail_start(low: int, high: int, count: int) -> int:
    """The offset ``count`` records before ``high``, not before ``low`` (kcat's ``-o -N``)."""
    return max(low, high - count)


# --------------------------------------------------------------------------------- records
@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]

    @classmethod
    def of(cls, message: Message) -> Record:
        _, timestamp = message.timestamp()
        headers = message.headers() or []
        pairs = headers.items() if isinstance(headers, dict) else headers
        return cls(
            topic=message.topic() or "",
            partition=message.partition() or 0,
            offset=message.offset() or 0,
            timestamp=timestamp,
            key=message.key(),
            value=message.value(),
            headers=tuple((k, _as_bytes(v)) for k, v in pairs),
        )


def _as_bytes(data: str | bytes | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def format_value(record: Record) -> bytes:
    return (record.value or b"") + b"\n"


def format_json(record: Record) -> bytes:
    document = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": _text(record.key),
        "value": _text(record.value),
        "headers": [[k, _text(v)] for k, v in record.headers],
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class Template:
    """A kcat-like ``--template``: ``%`` fields and backslash escapes, compiled once.

    Fields: ``%t`` topic, ``%p`` partition, ``%o`` offset, ``%T`` timestamp (ms), ``%k`` key,
    ``%s`` value, ``%K`` key length, ``%S`` value length (-1 when null), ``%h`` headers as
    ``k=v`` joined by ``,``, ``%%`` a percent sign. Escapes: ``\\n``, ``\\t``, ``\\r``,
    ``\\\\``. Keys and values are written as raw bytes. Nothing is appended: end with ``\\n``.
    """

    _FIELDS: Final[dict[str, Callable[[Record], bytes]]] = {
        "t": lambda r: r.topic.encode(),
        "p": lambda r: str(r.partition).encode(),
        "o": lambda r: str(r.offset).encode(),
        "T": lambda r: str(r.timestamp).encode(),
        "k": lambda r: r.key or b"",
        "s": lambda r: r.value or b"",
        "K": lambda r: str(-1 if r.key is None else len(r.key)).encode(),
        "S": lambda r: str(-1 if r.value is None else len(r.value)).encode(),
        "h": lambda r: b",".join(k.encode() + b"=" + (v or b"") for k, v in r.headers),
    }
    _ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}

    def __init__(self, template: str) -> None:
        parts: list[bytes | Callable[[Record], bytes]] = []
        literal: list[str] = []
        chars = iter(template)
        for char in chars:
            if char not in "%\\":
                literal.append(char)
                continue
            following = next(chars, "")
            if char == "\\":
                literal.append(self._ESCAPES.get(following, "\\" + following))
            elif following == "%":
                literal.append("%")
            elif following in self._FIELDS:
                if literal:
                    parts.append("".join(literal).encode())
                    literal = []
                parts.append(self._FIELDS[following])
            else:
                raise ValueError(f"unknown field %{following} (known: %t %p %o %T %k %s %K "
                                 "%S %h %%)")
        if literal:
            parts.append("".join(literal).encode())
        self._parts = parts

    def __call__(self, record: Record) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(record) for p in self._parts)


class ValueFormat(enum.StrEnum):
    """``--format``."""

    VALUE = "value"
    JSON = "json"


# ------------------------------------------------------------------------------- command
@kafka_command
def consume(
    ctx: typer.Context,
    conn: Connection,
    topic: Annotated[str, typer.Argument(help="Topic to read.", show_default=False)],
    start: Annotated[
        str, typer.Option("--from", "-o", metavar="POSITION",
                          help="earliest, latest, an offset N, -N (last N per partition) or "
                               "@<timestamp-ms>.")
    ] = "earliest",
    partition: Annotated[
        list[int] | None, typer.Option("--partition", "-p", min=0,
                                       help="Read only this partition. Repeatable.")
    ] = None,
    count: Annotated[
        int | None, typer.Option("--count", "-n", "-c", min=1,
                                 help="Exit after this many records.")
    ] = None,
    exit_at_end: Annotated[
        bool, typer.Option("--exit-at-end", "-e",
                           help="Exit once every partition read is caught up.")
    ] = False,
    output: Annotated[
        ValueFormat, typer.Option("--format", help="value (raw value per line) or json.")
    ] = ValueFormat.VALUE,
    template: Annotated[
        str | None, typer.Option("--template", "-f",
                                 help="kcat-like format, e.g. '%k\\t%s\\n' (wins over "
                                      "--format).")
    ] = None,
) -> None:
    """Read records from a topic and print them to stdout."""
    try:
        position = parse_start(start)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--from") from None
    formatter: Callable[[Record], bytes]
    if template is not None:
        try:
            formatter = Template(template)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--template") from None
    else:
        formatter = format_json if output is ValueFormat.JSON else format_value
    with reported_errors(ctx):
        consumer, errors = conn.client(Consumer, {
            "group.id": GROUP_ID,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": exit_at_end,
            "auto.offset.reset": "error",
            "isolation.level": "read_uncommitted",
            "fetch.wait.max.ms": FETCH_WAIT_MAX_MS,
        })
        try:
            described = conn.topic(consumer, errors, topic, sorted(set(partition or ())))
            wanted = sorted(set(partition)) if partition else sorted(described.partitions)
            consumer.assign(_start_positions(consumer, conn, topic, wanted, position))
            read = _read(consumer, conn, errors, topic, wanted, formatter, count, exit_at_end)
        finally:
            consumer.close()
        typer.echo(f"{ctx.command_path}: {read.records} records from {topic!r}", err=True)
    if read.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)


def _start_positions(
    consumer: Consumer, conn: Connection, topic: str, partitions: Sequence[int],
    position: StartPosition,
) -> list[TopicPartition]:
    subject = f"topic {topic!r}"
    if position.kind is StartKind.EARLIEST:
        return [TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions]
    if position.kind is StartKind.LATEST:
        return [TopicPartition(topic, p, OFFSET_END) for p in partitions]
    if position.kind is StartKind.OFFSET:
        return [TopicPartition(topic, p, position.value) for p in partitions]
    try:
        if position.kind is StartKind.TAIL:
            starts = []
            for p in partitions:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=conn.timeout_s)
                starts.append(TopicPartition(topic, p, tail_start(low, high, position.value)))
            return starts
        found = consumer.offsets_for_times(
            [TopicPartition(topic, p, position.value) for p in partitions],
            timeout=conn.timeout_s,
        )
    except KafkaException as exc:
        raise KafkaClientError.of(exc, subject, "ListOffsets") from None
    for tp in found:
        if tp.error is not None:
            raise KafkaClientError.of(tp.error, subject, "ListOffsets")
    # No record at or after the timestamp: start at the end (what Kafka's consumer does).
    return [TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END)
            for tp in found]


@dataclass
class ReadResult:
    records: int = 0
    interrupted: bool = False


def _read(
    consumer: Consumer,
    conn: Connection,
    errors: ConnectionErrors,
    topic: str,
    partitions: Sequence[int],
    formatter: Callable[[Record], bytes],
    count: int | None,
    exit_at_end: bool,
) -> ReadResult:
    """Poll and write records until ``count``, caught up (``exit_at_end``) or Ctrl-C."""
    result = ReadResult()
    out = sys.stdout.buffer
    at_end: set[int] = set()
    last_event = time.monotonic()
    with progress(bar=count is not None) as bar:
        task = bar.add_task(f"consume {topic}", total=count)
        try:
            while count is None or result.records < count:
                if exit_at_end and at_end.issuperset(partitions):
                    break
                message = consumer.poll(POLL_S)
                if message is None:
                    out.flush()
                    if exit_at_end and errors.all_brokers_down and \
                            time.monotonic() - last_event > conn.timeout_s:
                        raise errors.unreachable(KafkaError(KafkaError._ALL_BROKERS_DOWN),
                                                 conn.bootstrap, conn.timeout_s)
                    continue
                last_event = time.monotonic()
                errors.reset()
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(message.partition() or 0)
                        continue
                    raise KafkaClientError.of(error, f"topic {topic!r}", "Fetch")
                record = Record.of(message)
                at_end.discard(record.partition)
                out.write(formatter(record))
                result.records += 1
                bar.update(task, completed=result.records)
            out.flush()
        except KeyboardInterrupt:
            result.interrupted = True
        except BrokenPipeError:
            # The reader went away (``| head``): stop quietly, and keep Python's exit-time
            # flush of stdout from failing on the closed pipe too.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
    return result
