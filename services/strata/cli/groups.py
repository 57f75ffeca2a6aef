"""``strata groups list|describe|delete|reset-offsets``: consumer groups over the Kafka protocol.

Modelled on Kafka's ``kafka-consumer-groups.sh``; every command is a few admin requests through
confluent-kafka's ``AdminClient`` (the CLI never imports broker internals):

* ``list``: ListGroups — group id, state, type (``consumer``, or ``simple`` for groups that only
  store offsets of ``assign()`` consumers).
* ``describe GROUP...``: DescribeGroups, or ConsumerGroupDescribe for a KIP-848 group
  (state, protocol ``classic`` / ``consumer``, assignor, coordinator, members and their
  partitions — for a consumer group also each member's target assignment, what it is being
  moved to), OffsetFetch (committed offsets) and ListOffsets (log end offsets): one row per
  partition assigned or committed with CURRENT-OFFSET, LOG-END-OFFSET, LAG and the owning
  member, like ``--describe``. A group that does not exist is an error (exit 1).
* ``delete GROUP...``: DeleteGroups; a group with members is refused by the coordinator
  (GROUP_NOT_EMPTY).
* ``configs GROUP [--set K=V]... [--delete K]...``: a group's configs (KIP-848:
  ``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms``) with their source, after
  the changes asked (IncrementalAlterConfigs on the GROUP resource; ``kafka-configs
  --entity-type groups``); a refused value is the broker's INVALID_CONFIG line.
* ``reset-offsets GROUP``: for ``--topic T`` / ``--topic T:0,2`` (repeatable) or
  ``--all-topics`` (the partitions the group has commits for), exactly one of
  ``--to-earliest``, ``--to-latest``, ``--to-offset N``, ``--to-datetime WHEN``, ``--shift-by N``
  (``group_offsets.reset_plan``). It prints the plan and changes nothing unless ``--execute`` is
  given (Kafka's rule). Refused while the group has members: their commits would undo
  the reset (Kafka: "Assignments can only be reset if the group is inactive").

Exit codes: 0 done, 1 a broker refused or could not be reached (one line on stderr), 2 usage.
``--format json`` prints one JSON object per group (describe) or per partition (list, reset).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from confluent_kafka import ConsumerGroupState, ConsumerGroupType
from confluent_kafka.admin import ConsumerGroupDescription

from strata.cli.errors import CliError, kafka_line, reported_errors, usage_error
from strata.cli.kafka_client import (
    Connection,
    connect,
    kafka_command,
)
from strata.cli.output import OutputFormat, print_json_line, print_table
from strata.cli.topic import config_changes
from strata.client.group_offsets import (
    LagRow,
    Owner,
    PartitionOffsets,
    ResetSpec,
    ResetTo,
    lag_rows,
    parse_datetime,
    reset_plan,
)
from strata.client.kafka_admin import KafkaAdmin, check_partitions, config_source_name

app = typer.Typer(
    name="groups",
    help="List, describe and delete consumer groups; reset their committed offsets; show "
         "and change their configs.",
    no_args_is_help=True,
)

TopicPartitionKey = tuple[str, int]
ACTIVE_STATES = frozenset({ConsumerGroupState.PREPARING_REBALANCING,
                           ConsumerGroupState.COMPLETING_REBALANCING, ConsumerGroupState.STABLE})

FormatOption = Annotated[
    OutputFormat, typer.Option("--format", help="text (a table) or json (one object a line).")
]


def _admin(conn: Connection) -> KafkaAdmin:
    return connect(conn)[0]


def _state(state: Any) -> str:
    return state.name if isinstance(state, ConsumerGroupState) else str(state)


def _protocol(description: ConsumerGroupDescription) -> str:
    """``consumer`` for a KIP-848 group, else ``classic``."""
    return "consumer" if description.type == ConsumerGroupType.CONSUMER else "classic"


def _partitions(assignment: Any) -> list[list[Any]]:
    return sorted([tp.topic, tp.partition] for tp in assignment.topic_partitions) \
        if assignment is not None else []


# -------------------------------------------------------------------------------------- list
@app.command("list")
@kafka_command
def list_groups(
    ctx: typer.Context,
    conn: Connection,
    output: FormatOption = OutputFormat.TEXT,
) -> None:
    """List consumer groups with their state (ListGroups)."""
    with reported_errors(ctx):
        result = _admin(conn).list_consumer_groups()
    rows = sorted((g.group_id, _state(g.state),
                   "simple" if g.is_simple_consumer_group else "consumer") for g in result.valid)
    if output is OutputFormat.JSON:
        for group_id, state, kind in rows:
            print_json_line({"group": group_id, "state": state, "type": kind})
    else:
        print_table(("GROUP", "STATE", "TYPE"), rows)


# ---------------------------------------------------------------------------------- describe
@app.command()
@kafka_command
def describe(
    ctx: typer.Context,
    conn: Connection,
    groups: Annotated[list[str], typer.Argument(help="Group ids.", show_default=False)],
    output: FormatOption = OutputFormat.TEXT,
) -> None:
    """Members, assignment, committed offsets, log end offsets and lag of groups."""
    with reported_errors(ctx):
        admin = _admin(conn)
        for group in dict.fromkeys(groups):
            description = admin.describe_consumer_group(group)
            assigned = {
                (tp.topic, tp.partition): Owner(m.member_id, m.client_id, m.host,
                                                m.group_instance_id)
                for m in description.members for tp in m.assignment.topic_partitions
            }
            committed = admin.committed_offsets(group)
            ends = admin.list_offsets(sorted(set(assigned) | set(committed)), "latest")
            _print_description(group, description, lag_rows(assigned, committed, ends), output)


def _print_description(group: str, description: ConsumerGroupDescription, rows: list[LagRow],
                       output: OutputFormat) -> None:
    coordinator = description.coordinator
    if output is OutputFormat.JSON:
        print_json_line({
            "group": group, "state": _state(description.state),
            "protocol": _protocol(description),
            "assignor": description.partition_assignor or None,
            "coordinator": coordinator.id if coordinator is not None else None,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "host": m.host,
                         "partitions": _partitions(m.assignment),
                         "target_partitions": _partitions(m.target_assignment)
                         if m.target_assignment is not None else None}
                        for m in description.members],
            "partitions": [{"topic": r.topic, "partition": r.partition,
                            "committed_offset": r.committed, "log_end_offset": r.log_end_offset,
                            "lag": r.lag, "member_id": r.owner.member_id if r.owner else None}
                           for r in rows],
        })
        return
    where = f"{coordinator.id} ({coordinator.host}:{coordinator.port})" if coordinator else "-"
    typer.echo(f"Group {group}: state {_state(description.state)}, assignor "
               f"{description.partition_assignor or '-'}, coordinator {where}, "
               f"{len(description.members)} members, protocol {_protocol(description)}")
    if _protocol(description) == "consumer" and description.members:
        print_table(("MEMBER-ID", "CLIENT-ID", "ASSIGNED", "TARGET"), [
            (m.member_id, m.client_id, _tp_list(m.assignment), _tp_list(m.target_assignment))
            for m in description.members])
    print_table(
        ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
         "CLIENT-ID"),
        [(r.topic, r.partition, _dash(r.committed), _dash(r.log_end_offset), _dash(r.lag),
          r.owner.member_id if r.owner else "-", r.owner.host if r.owner else "-",
          r.owner.client_id if r.owner else "-") for r in rows],
    )


def _tp_list(assignment: Any) -> str:
    return ",".join(f"{t}:{p}" for t, p in _partitions(assignment)) or "-"


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)


# ------------------------------------------------------------------------------------ delete
@app.command()
@kafka_command
def delete(
    ctx: typer.Context,
    conn: Connection,
    groups: Annotated[list[str], typer.Argument(help="Group ids.", show_default=False)],
) -> None:
    """Delete groups and their committed offsets (DeleteGroups); groups with members refuse."""
    with reported_errors(ctx):
        results = _admin(conn).delete_consumer_groups(list(dict.fromkeys(groups)))
        failures: list[CliError] = []
        for group, error in results.items():
            if error is not None:
                failures.append(kafka_line(error))
                continue
            typer.echo(f"deleted group {group}")
        if failures:
            for failure in failures[:-1]:
                typer.echo(f"{ctx.command_path}: {failure.message}", err=True)
            raise failures[-1]


# ----------------------------------------------------------------------------------- configs
@app.command()
@kafka_command
def configs(
    ctx: typer.Context,
    conn: Connection,
    group: Annotated[str, typer.Argument(help="Group id.", show_default=False)],
    set_: Annotated[
        list[str] | None, typer.Option("--set", "-s", metavar="KEY=VALUE",
                                       help="Set a group config. Repeatable.")
    ] = None,
    delete_: Annotated[
        list[str] | None, typer.Option("--delete", "-d", metavar="KEY",
                                       help="Remove a group config (back to the broker's "
                                            "value). Repeatable.")
    ] = None,
    output: FormatOption = OutputFormat.TEXT,
) -> None:
    """Show a group's configs (KIP-848: its consumer session timeout and heartbeat interval);
    with --set / --delete, change them first (IncrementalAlterConfigs)."""
    to_set, to_delete = config_changes(set_, delete_)
    with reported_errors(ctx):
        admin = _admin(conn)
        if to_set or to_delete:
            admin.alter_group_configs(group, to_set, to_delete)
        entries = sorted(admin.group_configs(group).items())
        if output is OutputFormat.JSON:
            print_json_line({"group": group, "configs": {
                name: {"value": e.value, "source": config_source_name(e.source)}
                for name, e in entries}})
            return
        print_table(("NAME", "VALUE", "SOURCE"),
                    [(name, e.value, config_source_name(e.source)) for name, e in entries])


# ----------------------------------------------------------------------------- reset-offsets
def _parse_topic(value: str) -> tuple[str, list[int] | None]:
    """``T`` (every partition) or ``T:0,2``."""
    topic, sep, rest = value.partition(":")
    if not topic:
        raise typer.BadParameter(f"expected TOPIC or TOPIC:P,P, got {value!r}",
                                 param_hint="--topic")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in rest.split(",") if p.strip()})
    except ValueError:
        raise typer.BadParameter(f"partitions must be numbers, got {rest!r}",
                                 param_hint="--topic") from None


def _reset_spec(to_earliest: bool, to_latest: bool, to_offset: int | None,
                to_datetime: str | None, shift_by: int | None) -> ResetSpec:
    chosen = [name for name, given in (("--to-earliest", to_earliest),
                                       ("--to-latest", to_latest),
                                       ("--to-offset", to_offset is not None),
                                       ("--to-datetime", to_datetime is not None),
                                       ("--shift-by", shift_by is not None)) if given]
    if len(chosen) != 1:
        raise usage_error("give exactly one of --to-earliest, --to-latest, --to-offset, "
                          f"--to-datetime, --shift-by (got {', '.join(chosen) or 'none'})")
    if to_earliest:
        return ResetSpec(ResetTo.EARLIEST)
    if to_latest:
        return ResetSpec(ResetTo.LATEST)
    if to_offset is not None:
        return ResetSpec(ResetTo.OFFSET, to_offset)
    if shift_by is not None:
        return ResetSpec(ResetTo.SHIFT, shift_by)
    assert to_datetime is not None
    try:
        return ResetSpec(ResetTo.DATETIME, parse_datetime(to_datetime))
    except ValueError as exc:
        raise usage_error(f"--to-datetime: {exc}") from None


@app.command("reset-offsets")
@kafka_command
def reset_offsets(
    ctx: typer.Context,
    conn: Connection,
    group: Annotated[str, typer.Argument(help="Group id.", show_default=False)],
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", "-t", metavar="TOPIC[:P,P]",
        help="A topic, or some of its partitions. Repeatable.")] = None,
    all_topics: Annotated[bool, typer.Option(
        "--all-topics", help="Every partition the group has committed offsets for.")] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest")] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset", metavar="N")] = None,
    to_datetime: Annotated[str | None, typer.Option(
        "--to-datetime", metavar="WHEN",
        help="ISO 8601 (no zone = UTC) or epoch ms: the first offset at or after it.")] = None,
    shift_by: Annotated[int | None, typer.Option("--shift-by", metavar="N",
                                                 help="Move the committed offsets by N.")
                        ] = None,
    execute: Annotated[bool, typer.Option(
        "--execute", help="Apply the plan (without it, only print it).")] = False,
    output: FormatOption = OutputFormat.TEXT,
) -> None:
    """Reset a group's committed offsets (refused while the group has active members)."""
    wanted = [_parse_topic(t) for t in topic or []]
    with reported_errors(ctx):
        spec = _reset_spec(to_earliest, to_latest, to_offset, to_datetime, shift_by)
        if bool(topic) == all_topics:
            raise usage_error("give --topic (repeatable) or --all-topics")
        admin = _admin(conn)
        description = admin.describe_consumer_group(group, must_exist=False)
        if description.state in ACTIVE_STATES or description.members:
            raise CliError(
                f"cannot reset offsets of group {group!r}: it has {len(description.members)} "
                f"active members (state {_state(description.state)}); stop its consumers first")
        committed = admin.committed_offsets(group)
        partitions = _reset_partitions(admin, wanted) if wanted else sorted(committed)
        if not partitions:
            raise CliError(f"group {group!r} has no committed offsets to reset")
        starts = admin.list_offsets(partitions, "earliest")
        ends = admin.list_offsets(partitions, "latest")
        at_time = (admin.list_offsets(partitions, spec.value)
                   if spec.to is ResetTo.DATETIME else {})
        plan = reset_plan(spec, {
            tp: PartitionOffsets(starts[tp], ends[tp], committed.get(tp),
                                 at_time[tp] if at_time.get(tp, -1) >= 0 else None)
            for tp in partitions})
        _print_plan(plan, committed, output)
        if not execute:
            typer.echo("dry run: nothing changed (add --execute to apply)", err=True)
            return
        admin.alter_consumer_group_offsets(group, plan)
        typer.echo(f"reset {len(plan)} partitions of group {group}", err=True)


def _reset_partitions(admin: KafkaAdmin, wanted: list[tuple[str, list[int] | None]]
                      ) -> list[TopicPartitionKey]:
    metadata = admin.metadata()
    partitions: list[TopicPartitionKey] = []
    for name, only in wanted:
        found = admin.topic(name, metadata)
        if only is not None:
            check_partitions(found, only)
        partitions += [(name, p) for p in (only if only is not None else sorted(found.partitions))]
    return sorted(dict.fromkeys(partitions))


def _print_plan(plan: dict[TopicPartitionKey, int], committed: dict[TopicPartitionKey, int],
                output: OutputFormat) -> None:
    if output is OutputFormat.JSON:
        for (t, p), offset in plan.items():
            print_json_line({"topic": t, "partition": p, "current_offset": committed.get((t, p)),
                             "new_offset": offset})
        return
    print_table(("TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
                [(t, p, _dash(committed.get((t, p))), offset) for (t, p), offset in plan.items()])
