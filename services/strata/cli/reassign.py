"""``strata cluster reassign`` and ``strata cluster reassignments``: moving partitions (KIP-455).

``reassign`` is ``kafka-reassign-partitions.sh --execute`` / ``--cancel``:
AlterPartitionReassignments for one partition (``--topic``, ``--partition``, ``--replicas
1,2,3``) or for every partition of Kafka's reassignment JSON (``--reassignment-json-file``,
``{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}``). The move is
asynchronous: the new replicas catch up, then the controller drops the old ones;
``reassignments`` (ListPartitionReassignments) shows what is still moving.

Exit codes: 0 when every partition was accepted, 1 when a broker refused one (its Kafka error
on that partition's line), 2 for bad options or a bad JSON file (named).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from strata.cli import protocol_client
from strata.cli.errors import EXIT_USAGE, CliError, reported_errors
from strata.cli.kafka_client import (
    Connection,
    kafka_command,
)
from strata.cli.output import OutputFormat, RowsFormatOption, print_rows
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import kafka_error_name

Move = tuple[str, int, list[int] | None]  # topic, partition, target replicas (None: cancel)


def moves_from_json(text: str) -> list[Move]:
    """The moves of Kafka's reassignment JSON; ``CliError`` naming what is wrong."""
    try:
        document = json.loads(text)
        entries = document["partitions"]
        moves: list[Move] = [(str(e["topic"]), int(e["partition"]),
                  [int(r) for r in e["replicas"]]) for e in entries]
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError('expected {"version": 1, "partitions": [{"topic": ..., "partition": '
                       f'..., "replicas": [...]}}]}} ({type(exc).__name__}: {exc})',
                       exit_code=EXIT_USAGE) from None
    if not moves:
        raise CliError("the reassignment JSON lists no partitions", exit_code=EXIT_USAGE)
    return moves


def _replica_list(text: str) -> list[int]:
    try:
        replicas = [int(r) for r in text.split(",") if r.strip()]
    except ValueError:
        raise CliError(f"--replicas {text!r}: expected broker ids like 1,2,3",
                       exit_code=EXIT_USAGE) from None
    if not replicas:
        raise CliError("--replicas: give at least one broker id", exit_code=EXIT_USAGE)
    return replicas


def _moves(json_file: Path | None, topic: str | None, partition: int | None,
           replicas: str | None, cancel: bool) -> list[Move]:
    if json_file is not None:
        if topic is not None or partition is not None or replicas is not None:
            raise CliError("--reassignment-json-file replaces --topic/--partition/--replicas",
                           exit_code=EXIT_USAGE)
        try:
            text = json_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot read {json_file}: {exc.strerror or exc}",
                           exit_code=EXIT_USAGE) from None
        moves = moves_from_json(text)
        return [(t, p, None) for t, p, _ in moves] if cancel else moves
    if topic is None or partition is None:
        raise CliError("give --topic and --partition (or --reassignment-json-file)",
                       exit_code=EXIT_USAGE)
    if cancel == (replicas is not None):
        raise CliError("give either --replicas or --cancel", exit_code=EXIT_USAGE)
    return [(topic, partition, None if cancel else _replica_list(replicas or ""))]


@kafka_command
def reassign(
    ctx: typer.Context,
    conn: Connection,
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="The topic.")] = None,
    partition: Annotated[int | None, typer.Option(
        "--partition", "-p", min=0, help="The partition of --topic.")] = None,
    replicas: Annotated[str | None, typer.Option(
        "--replicas", metavar="ID,ID,...", help="The target replicas, preferred leader "
                                                "first.")] = None,
    json_file: Annotated[Path | None, typer.Option(
        "--reassignment-json-file", dir_okay=False,
        help="Kafka's reassignment JSON: every partition in it.")] = None,
    cancel: Annotated[bool, typer.Option(
        "--cancel", help="Cancel the reassignments in progress instead.")] = False,
    output: RowsFormatOption = OutputFormat.TEXT,
) -> None:
    """Move partitions to other brokers (AlterPartitionReassignments), or cancel a move."""
    with reported_errors(ctx):
        moves = _moves(json_file, topic, partition, replicas, cancel)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for name, index, target in moves:
            by_topic.setdefault(name, []).append(
                {"partition_index": index, "replicas": target})
        response = protocol_client.request(conn, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {
            "timeout_ms": conn.timeout_ms,
            "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()]})
        if int(response.error_code):
            raise CliError(f"{kafka_error_name(int(response.error_code))}: "
                           f"{response.error_message or 'the reassignment was refused'}")
    targets = {(t, p): r for t, p, r in moves}
    rows = []
    for t in response.responses:
        for p in t.partitions:
            code = int(p.error_code)
            rows.append({"topic": t.name, "partition": int(p.partition_index),
                         "replicas": targets.get((t.name, int(p.partition_index))),
                         "result": ("cancelled" if cancel else "started") if not code
                         else kafka_error_name(code), "message": p.error_message or ""})
    print_rows(output, rows)
    if any(r["result"] not in ("started", "cancelled") for r in rows):
        raise typer.Exit(1)


@kafka_command
def reassignments(
    ctx: typer.Context,
    conn: Connection,
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", "-t", help="Only this topic. Repeatable.")] = None,
    output: RowsFormatOption = OutputFormat.TEXT,
) -> None:
    """The reassignments in progress (ListPartitionReassignments)."""
    with reported_errors(ctx):
        response = protocol_client.request(conn, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {
            "timeout_ms": conn.timeout_ms, "topics": None})
        if int(response.error_code):
            raise CliError(f"{kafka_error_name(int(response.error_code))}: "
                           f"{response.error_message or 'cannot list reassignments'}")
    rows = [{"topic": t.name, "partition": int(p.partition_index),
             "replicas": [int(r) for r in p.replicas],
             "adding": [int(r) for r in p.adding_replicas],
             "removing": [int(r) for r in p.removing_replicas]}
            for t in response.topics if not topic or t.name in topic for p in t.partitions]
    rows.sort(key=lambda r: (r["topic"], r["partition"]))
    print_rows(output, rows)
