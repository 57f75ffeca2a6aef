"""``strata transactions list|describe|describe-producers|find-hanging|abort``: Kafka's
``kafka-transactions.sh``.

Over the Kafka protocol (librdkafka has no call for these APIs; ``strata.client.transactions``
sends them to the brokers Kafka's admin client would):

* ``list``: ListTransactions on every broker: transactional id, coordinator, producer id,
  state; filtered by ``--state`` (Kafka's state names, repeatable), ``--producer-id``
  (repeatable) and ``--duration-filter MS`` (only transactions open longer than that; < 0: all).
* ``describe --transactional-id ID``: the id's coordinator, producer id and epoch, state,
  timeout, the current transaction's start time and duration, and its partitions.
* ``describe-producers --topic T --partition P [--broker-id N]``: the partition's active
  producers (DescribeProducers), with each current transaction's start offset.
* ``find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MIN]``:
  open transactions older than the timeout (15 minutes by default) that no coordinator will
  close (Kafka's rule: ``strata.client.transactions.hanging``).
* ``abort --topic T --partition P --start-offset O``: the producer whose transaction starts at
  O, aborted with a WriteTxnMarkers ABORT to the partition's leader (administrative: needs
  ClusterAction); or with ``--producer-id``, ``--producer-epoch`` and ``--coordinator-epoch``
  given explicitly (Kafka's form for brokers before 3.0).

Exit codes: 0 done, 1 a broker refused or could not be reached (one line on stderr naming the
problem), 2 usage. ``--format json`` prints one JSON object per row.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Annotated, Any, Final

import typer

from strata.cli import protocol_client
from strata.cli.errors import reported_errors, usage_error
from strata.cli.kafka_client import CLIENT_ID, Connection, kafka_command
from strata.cli.output import OutputFormat, RowsFormatOption, print_rows, print_table
from strata.client import transactions as txn
from strata.client.client_quotas import QuotaTarget

app = typer.Typer(name="transactions", no_args_is_help=True,
                  help="Transactions: list, describe, find hanging ones and abort them.")

MINUTE_MS: Final = 60_000
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN: Final = 15

TopicOption = Annotated[str, typer.Option("--topic", help="Topic name.")]
MAX_INT16: Final = 2**15 - 1
MAX_INT32: Final = 2**31 - 1
MAX_INT64: Final = 2**63 - 1
PartitionOption = Annotated[int, typer.Option("--partition", min=0, max=MAX_INT32,
                                              help="Partition number.")]

LIST_HEADERS: Final = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS: Final = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                           "TransactionState", "TransactionTimeoutMs",
                           "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                           "TopicPartitions")
PRODUCER_HEADERS: Final = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
                           "LastSequence", "LastTimestamp", "CurrentTransactionStartOffset")
HANGING_HEADERS: Final = ("Topic", "Partition", "ProducerId", "ProducerEpoch",
                          "CoordinatorEpoch", "StartOffset", "LastTimestamp", "Duration(min)")


def _target(conn: Connection) -> QuotaTarget:
    return QuotaTarget(conn.bootstrap, protocol_client.client_security(conn.properties),
                       conn.timeout_s, CLIENT_ID)


def _print(output: OutputFormat, headers: Sequence[str], rows: list[dict[str, Any]]) -> None:
    """JSON lines with the rows' snake_case keys, or a table under Kafka's tool's headers
    (printed even when there are no rows, as ``kafka-transactions.sh`` does)."""
    if output is OutputFormat.JSON:
        print_rows(output, rows)
        return
    print_table(headers, [[_cell(v) for v in row.values()] for row in rows])


def _cell(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


# ------------------------------------------------------------------------------ row builders
def listing_rows(listed: Sequence[txn.TransactionListing]) -> list[dict[str, Any]]:
    return [{"transactional_id": t.transactional_id, "coordinator": t.coordinator_id,
             "producer_id": t.producer_id, "transaction_state": t.state} for t in listed]


def description_row(found: txn.TransactionDescription, now_ms: int) -> dict[str, Any]:
    start = found.transaction_start_time_ms
    return {
        "coordinator_id": found.coordinator_id, "transactional_id": found.transactional_id,
        "producer_id": found.producer_id, "producer_epoch": found.producer_epoch,
        "transaction_state": found.state,
        "transaction_timeout_ms": found.transaction_timeout_ms,
        "current_transaction_start_time_ms": start,
        "transaction_duration_ms": None if start is None else now_ms - start,
        "topic_partitions": [f"{t}-{p}" for t, p in found.topic_partitions],
    }


def producer_rows(producers: Sequence[txn.ProducerState]) -> list[dict[str, Any]]:
    return [{"producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
             "latest_coordinator_epoch": p.coordinator_epoch,
             "last_sequence": p.last_sequence, "last_timestamp": p.last_timestamp,
             "current_transaction_start_offset": (None if p.current_txn_start_offset < 0
                                                  else p.current_txn_start_offset)}
            for p in producers]


def hanging_rows(found: Sequence[txn.OpenTransaction], now_ms: int) -> list[dict[str, Any]]:
    return [{"topic": t.topic, "partition": t.partition,
             "producer_id": t.producer.producer_id,
             "producer_epoch": t.producer.producer_epoch,
             "coordinator_epoch": t.producer.coordinator_epoch,
             "start_offset": t.producer.current_txn_start_offset,
             "last_timestamp": t.producer.last_timestamp,
             "duration_min": (now_ms - t.producer.last_timestamp) // MINUTE_MS}
            for t in found]


def abort_spec_of(topic: str, partition: int, start_offset: int | None,
                  producer_id: int | None, producer_epoch: int | None,
                  coordinator_epoch: int | None) -> txn.AbortSpec | None:
    """The explicit ``AbortSpec`` of the options, None when ``--start-offset`` names the
    transaction; a usage error for a missing or mixed set (Kafka's tool's messages)."""
    if start_offset is not None and producer_id is not None:
        raise usage_error("give either --start-offset or --producer-id, not both")
    if start_offset is None and producer_id is None:
        raise usage_error("the transaction to abort must be identified either with "
                          "--start-offset or with --producer-id, --producer-epoch and "
                          "--coordinator-epoch")
    if start_offset is not None:
        return None
    assert producer_id is not None
    if producer_epoch is None:
        raise usage_error("missing required argument --producer-epoch")
    if coordinator_epoch is None:
        raise usage_error("missing required argument --coordinator-epoch")
    # A producer that never had a marker reports -1: 0 is <= any coordinator epoch (Kafka).
    return txn.AbortSpec(topic, partition, producer_id, producer_epoch,
                         max(coordinator_epoch, 0))


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------------- commands
@kafka_command
def list_transactions(
    ctx: typer.Context,
    conn: Connection,
    state: Annotated[list[str] | None, typer.Option(
        "--state", help="Only transactions in this state (Ongoing, PrepareCommit, "
                        "PrepareAbort, CompleteCommit, CompleteAbort, Empty, Dead, "
                        "PrepareEpochFence); repeatable.")] = None,
    producer_id: Annotated[list[int] | None, typer.Option(
        "--producer-id", min=0, max=MAX_INT64, help="Only this producer id; repeatable.")
    ] = None,
    duration_filter: Annotated[int, typer.Option(
        "--duration-filter", metavar="MS", max=MAX_INT64,
        help="Only transactions open longer than this many milliseconds (< 0: all).")] = -1,
    output: RowsFormatOption = OutputFormat.TEXT,
) -> None:
    """List transactions (ListTransactions on every broker)."""
    with reported_errors(ctx):
        listed = asyncio.run(txn.list_transactions(
            _target(conn), states=state or [], producer_ids=producer_id or [],
            duration_ms=max(duration_filter, -1)))
    _print(output, LIST_HEADERS, listing_rows(listed))


@kafka_command
def describe(
    ctx: typer.Context,
    conn: Connection,
    transactional_id: Annotated[str, typer.Option("--transactional-id",
                                                  help="Transactional id.")],
    output: RowsFormatOption = OutputFormat.TEXT,
) -> None:
    """Describe the state of one transactional id (DescribeTransactions at its coordinator)."""
    with reported_errors(ctx):
        found = asyncio.run(txn.describe_transaction(_target(conn), transactional_id))
    _print(output, DESCRIBE_HEADERS, [description_row(found, _now_ms())])


@kafka_command
def describe_producers(
    ctx: typer.Context,
    conn: Connection,
    topic: TopicOption,
    partition: PartitionOption,
    broker_id: Annotated[int | None, typer.Option(
        "--broker-id", help="Ask this replica instead of the leader.")] = None,
    output: RowsFormatOption = OutputFormat.TEXT,
) -> None:
    """The active producers of a partition (DescribeProducers)."""
    with reported_errors(ctx):
        producers = asyncio.run(txn.describe_producers(_target(conn), topic, partition,
                                                       broker_id))
    _print(output, PRODUCER_HEADERS, producer_rows(producers))


@kafka_command
def find_hanging(
    ctx: typer.Context,
    conn: Connection,
    broker_id: Annotated[int | None, typer.Option(
        "--broker-id", help="Search the partitions with a replica on this broker.")] = None,
    topic: Annotated[str | None, typer.Option(
        "--topic", help="Search this topic (required with --partition).")] = None,
    partition: Annotated[int | None, typer.Option(
        "--partition", min=0, help="Search this partition of --topic.")] = None,
    max_transaction_timeout: Annotated[int, typer.Option(
        "--max-transaction-timeout", min=0, metavar="MINUTES",
        help="Only transactions open longer than this (the largest transaction.timeout.ms "
             "of the producers, in minutes).")] = DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
    output: RowsFormatOption = OutputFormat.TEXT,
) -> None:
    """Find hanging transactions: open on a partition, and no coordinator will close them."""
    with reported_errors(ctx):
        if topic is None and broker_id is None:
            raise usage_error("find-hanging requires either --topic or --broker-id to limit "
                              "the scope of the search")
        if partition is not None and topic is None:
            raise usage_error("--partition requires --topic")
        now = _now_ms()
        found = asyncio.run(txn.find_hanging(
            _target(conn), broker_id=broker_id, topic=topic, partition=partition,
            max_transaction_timeout_ms=max_transaction_timeout * MINUTE_MS, now_ms=now))
    _print(output, HANGING_HEADERS, hanging_rows(found, now))


@kafka_command
def abort(
    ctx: typer.Context,
    conn: Connection,
    topic: TopicOption,
    partition: PartitionOption,
    start_offset: Annotated[int | None, typer.Option(
        "--start-offset", min=0, max=MAX_INT64,
        help="Start offset of the transaction to abort.")] = None,
    producer_id: Annotated[int | None, typer.Option(
        "--producer-id", min=0, max=MAX_INT64, help="Producer id (with --producer-epoch and "
                                     "--coordinator-epoch).")] = None,
    producer_epoch: Annotated[int | None, typer.Option(
        "--producer-epoch", min=0, max=MAX_INT16, help="Producer epoch.")] = None,
    coordinator_epoch: Annotated[int | None, typer.Option(
        "--coordinator-epoch", min=-1, max=MAX_INT32, help="Coordinator epoch.")] = None,
) -> None:
    """Abort a hanging transaction on one partition (WriteTxnMarkers ABORT; needs
    ClusterAction)."""
    with reported_errors(ctx):
        spec = abort_spec_of(topic, partition, start_offset, producer_id, producer_epoch,
                             coordinator_epoch)
        target = _target(conn)
        if spec is None:
            assert start_offset is not None
            spec = asyncio.run(txn.abort_spec(target, topic, partition, start_offset))
        asyncio.run(txn.abort_transaction(target, spec))
    typer.echo(f"aborted the transaction of producer {spec.producer_id} (epoch "
               f"{spec.producer_epoch}) on {topic}-{partition}", err=True)


app.command("list")(list_transactions)
app.command("describe")(describe)
app.command("describe-producers")(describe_producers)
app.command("find-hanging")(find_hanging)
app.command("abort")(abort)
