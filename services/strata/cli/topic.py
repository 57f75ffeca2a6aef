"""``strata topic create|list|describe|alter|delete``: topic administration over the Kafka protocol.

Each command is one or two admin requests through confluent-kafka's ``AdminClient``:

* ``create``: CreateTopics. ``--partitions`` / ``--replication-factor`` of -1 (the default)
  take the broker's ``num.partitions`` / ``default.replication.factor`` (KIP-464);
  ``--config key=value`` (repeatable) sets topic configs. ``--if-not-exists`` makes
  TOPIC_ALREADY_EXISTS a success (Kafka's ``kafka-topics.sh`` flag).
* ``list``: Metadata for every topic: name, partition count, replication factor.
* ``describe``: Metadata (leader, replicas, isr per partition), ListOffsets (``log_start_offset``
  and ``high_watermark`` per partition) and DescribeConfigs. Like ``kafka-topics.sh
  --describe`` only configs that are not Kafka's defaults are shown unless ``--all-configs``.
* ``alter``: IncrementalAlterConfigs (``--set key=value``, ``--delete key``: back to the
  default), then CreatePartitions (``--partitions N``: the new total).
* ``delete``: DeleteTopics; ``--if-exists`` makes UNKNOWN_TOPIC_OR_PARTITION a success.

Commands naming several topics do each, print one error line per failure and exit 1 if any
failed. ``--format json`` prints one JSON object per topic, shaped like the admin REST API's
(docs/admin-api.md): ``{name, partitions: [{partition, leader, replicas, isr,
log_start_offset, high_watermark}], configs}``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from confluent_kafka.admin import ClusterMetadata, ConfigSource, NewTopic, TopicMetadata

from strata.cli.errors import EXIT_KAFKA, kafka_line, one_line, reported_errors, usage_error
from strata.cli.kafka_client import (
    Connection,
    connect,
    kafka_command,
)
from strata.cli.output import OutputFormat, print_json_line, print_table
from strata.client.kafka_admin import KafkaAdmin, config_source_name
from strata.client.kafka_errors import KafkaClientError

app = typer.Typer(
    name="topic",
    help="Create, list, describe, alter and delete topics.",
    no_args_is_help=True,
)

INTERNAL_TOPIC_PREFIX = "__"  # Kafka's internal topics: __consumer_offsets, __transaction_state

TopicsArgument = Annotated[list[str], typer.Argument(help="Topic names.", show_default=False)]
FormatOption = Annotated[
    OutputFormat, typer.Option("--format", help="text (a table) or json (one object a line).")
]


def parse_pairs(values: Sequence[str], option: str) -> dict[str, str]:
    """``["k=v", ...]`` as a dict; a value may contain ``=``, a key may not be empty or repeated.

    Raises ``typer.BadParameter`` (exit 2, one line) naming ``option``.
    """
    pairs: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        if key in pairs:
            raise typer.BadParameter(f"{key!r} given twice", param_hint=option)
        pairs[key] = value
    return pairs


def config_changes(set_: Sequence[str] | None, delete_: Sequence[str] | None
                   ) -> tuple[dict[str, str], list[str]]:
    """The ``--set KEY=VALUE`` and ``--delete KEY`` options of a config change, checked: no
    empty key, none both set and deleted (``typer.BadParameter`` otherwise)."""
    to_set = parse_pairs(set_ or [], "--set")
    to_delete = list(dict.fromkeys(k.strip() for k in delete_ or []))
    if any(not key for key in to_delete):
        raise typer.BadParameter("a config name cannot be empty", param_hint="--delete")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise typer.BadParameter(f"{both[0]!r} is also given to --set", param_hint="--delete")
    return to_set, to_delete


@contextmanager
def _each_topic(ctx: typer.Context, conn: Connection
                ) -> Iterator[tuple[KafkaAdmin, ClusterMetadata, list[KafkaClientError]]]:
    """Around a command on several topics: the admin client, the metadata and a list to put
    each topic's failure in; after the body, one line per failed topic, and exit 1 if any."""
    failures: list[KafkaClientError] = []
    with reported_errors(ctx):
        yield (*connect(conn), failures)
    for failure in failures:
        typer.echo(f"{ctx.command_path}: {one_line(kafka_line(failure).message)}", err=True)
    if failures:
        raise typer.Exit(EXIT_KAFKA)


def _done(results: Mapping[str, KafkaClientError | None], verb: str, forgiven: str | None,
          failures: list[KafkaClientError]) -> None:
    """Print ``<verb> topic NAME`` per success; collect the failures except ``forgiven``
    (an error name ``--if-not-exists`` / ``--if-exists`` makes a success without the line)."""
    for name, error in results.items():
        if error is None:
            typer.echo(f"{verb} topic {name}")
        elif error.name != forgiven:
            failures.append(error)


# ------------------------------------------------------------------------------------ create
@app.command()
@kafka_command
def create(
    ctx: typer.Context,
    conn: Connection,
    topics: TopicsArgument,
    partitions: Annotated[
        int, typer.Option("--partitions", "-p", help="Partition count; -1 = num.partitions.")
    ] = -1,
    replication_factor: Annotated[
        int, typer.Option("--replication-factor", "-r",
                          help="Replicas per partition; -1 = default.replication.factor.")
    ] = -1,
    config: Annotated[
        list[str] | None, typer.Option("--config", "-c", metavar="KEY=VALUE",
                                       help="A topic config, e.g. retention.ms=60000. "
                                            "Repeatable.")
    ] = None,
    if_not_exists: Annotated[
        bool, typer.Option("--if-not-exists", help="An existing topic is not an error.")
    ] = False,
) -> None:
    """Create topics (CreateTopics)."""
    configs = parse_pairs(config or [], "--config")
    if partitions == 0 or partitions < -1:
        raise typer.BadParameter("must be -1 (the broker's default) or at least 1",
                                 param_hint="--partitions")
    if replication_factor == 0 or replication_factor < -1:
        raise typer.BadParameter("must be -1 (the broker's default) or at least 1",
                                 param_hint="--replication-factor")
    with _each_topic(ctx, conn) as (admin, _, failures):
        results = admin.create_topics(
            [NewTopic(t, num_partitions=partitions, replication_factor=replication_factor,
                      config=configs) for t in dict.fromkeys(topics)]
        )
        _done(results, "created", "TOPIC_ALREADY_EXISTS" if if_not_exists else None, failures)


# -------------------------------------------------------------------------------------- list
@app.command("list")
@kafka_command
def list_topics(
    ctx: typer.Context,
    conn: Connection,
    exclude_internal: Annotated[
        bool, typer.Option("--exclude-internal", help="Leave out internal topics (__*).")
    ] = False,
    output: FormatOption = OutputFormat.TEXT,
) -> None:
    """List topics with their partition count and replication factor (Metadata)."""
    with reported_errors(ctx):
        _, metadata = connect(conn)
    rows = []
    for name in sorted(metadata.topics):
        if exclude_internal and name.startswith(INTERNAL_TOPIC_PREFIX):
            continue
        topic = metadata.topics[name]
        rows.append((name, len(topic.partitions), _replication_factor(topic)))
    if output is OutputFormat.JSON:
        for name, count, factor in rows:
            print_json_line({"name": name, "partitions": count, "replication_factor": factor})
    else:
        print_table(("NAME", "PARTITIONS", "REPLICATION_FACTOR"), rows)


def _replication_factor(topic: TopicMetadata) -> int:
    return max((len(p.replicas) for p in topic.partitions.values()), default=0)


# ---------------------------------------------------------------------------------- describe
@app.command()
@kafka_command
def describe(
    ctx: typer.Context,
    conn: Connection,
    topics: TopicsArgument,
    all_configs: Annotated[
        bool, typer.Option("--all-configs", help="Show every config, defaults too.")
    ] = False,
    output: FormatOption = OutputFormat.TEXT,
) -> None:
    """Partitions (leader, replicas, isr, offsets) and configs of topics."""
    with _each_topic(ctx, conn) as (admin, metadata, failures):
        for index, name in enumerate(dict.fromkeys(topics)):
            try:
                described = _describe_one(admin, admin.topic(name, metadata))
            except KafkaClientError as exc:
                failures.append(exc)
                continue
            if not all_configs:
                described["configs"] = {
                    k: v for k, v in described["configs"].items()
                    if v["source"] != ConfigSource.DEFAULT_CONFIG.name
                }
            if output is OutputFormat.JSON:
                print_json_line({**described, "configs": {
                    k: v["value"] for k, v in described["configs"].items()
                }})
            else:
                if index:
                    typer.echo("")
                _print_description(described)


def _describe_one(admin: KafkaAdmin, topic: TopicMetadata) -> dict[str, Any]:
    """The describe document of one topic, configs as ``{name: {value, source}}``."""
    name = str(topic.topic)
    ids = sorted(topic.partitions)
    keys = [(name, p) for p in ids]
    starts = admin.list_offsets(keys, "earliest")
    ends = admin.list_offsets(keys, "latest")
    entries = admin.topic_configs(name)
    return {
        "name": name,
        "partitions": [
            {
                "partition": p,
                "leader": topic.partitions[p].leader,
                "replicas": list(topic.partitions[p].replicas),
                "isr": list(topic.partitions[p].isrs),
                "log_start_offset": starts.get((name, p)),
                "high_watermark": ends.get((name, p)),
            }
            for p in ids
        ],
        "configs": {
            key: {"value": entry.value, "source": config_source_name(entry.source)}
            for key, entry in sorted(entries.items())
        },
    }


def _print_description(described: Mapping[str, Any]) -> None:
    partitions = described["partitions"]
    factor = max((len(p["replicas"]) for p in partitions), default=0)
    typer.echo(f"topic: {described['name']}  partitions: {len(partitions)}  "
               f"replication factor: {factor}")
    configs = described["configs"]
    typer.echo("configs:" if configs else "configs: (all defaults)")
    for key, entry in configs.items():
        value = "(sensitive)" if entry["value"] is None else entry["value"]
        typer.echo(f"  {key}={value}  ({entry['source']})")
    print_table(
        ("PARTITION", "LEADER", "REPLICAS", "ISR", "LOG_START_OFFSET", "HIGH_WATERMARK"),
        [
            (p["partition"], p["leader"], ",".join(map(str, p["replicas"])),
             ",".join(map(str, p["isr"])), p["log_start_offset"], p["high_watermark"])
            for p in partitions
        ],
    )


# ------------------------------------------------------------------------------------- alter
@app.command()
@kafka_command
def alter(
    ctx: typer.Context,
    conn: Connection,
    topic: Annotated[str, typer.Argument(help="Topic name.", show_default=False)],
    set_: Annotated[
        list[str] | None, typer.Option("--set", "-s", metavar="KEY=VALUE",
                                       help="Set a topic config. Repeatable.")
    ] = None,
    delete_: Annotated[
        list[str] | None, typer.Option("--delete", "-d", metavar="KEY",
                                       help="Remove a config override (back to the default). "
                                            "Repeatable.")
    ] = None,
    partitions: Annotated[
        int | None, typer.Option("--partitions", "-p", min=1,
                                 help="New total partition count (only ever grows).")
    ] = None,
) -> None:
    """Change configs (IncrementalAlterConfigs) or add partitions (CreatePartitions)."""
    to_set, to_delete = config_changes(set_, delete_)
    with reported_errors(ctx):
        if not (to_set or to_delete or partitions is not None):
            raise usage_error("nothing to change: give --set, --delete or --partitions")
        admin, metadata = connect(conn)
        admin.topic(topic, metadata)
        changes = []
        if to_set or to_delete:
            admin.alter_topic_configs(topic, to_set, to_delete)
            changes += [f"set {k}={v}" for k, v in to_set.items()]
            changes += [f"deleted {k}" for k in to_delete]
        if partitions is not None:
            admin.create_partitions(topic, partitions)
            changes.append(f"partitions {partitions}")
        typer.echo(f"altered topic {topic}: {', '.join(changes)}")


# ------------------------------------------------------------------------------------ delete
@app.command()
@kafka_command
def delete(
    ctx: typer.Context,
    conn: Connection,
    topics: TopicsArgument,
    if_exists: Annotated[
        bool, typer.Option("--if-exists", help="A missing topic is not an error.")
    ] = False,
) -> None:
    """Delete topics (DeleteTopics)."""
    with _each_topic(ctx, conn) as (admin, metadata, failures):
        names = list(dict.fromkeys(topics))
        if not if_exists:
            failures += [KafkaClientError.unknown_topic(n) for n in names
                         if n not in metadata.topics]
        results = admin.delete_topics([n for n in names if n in metadata.topics])
        _done(results, "deleted", "UNKNOWN_TOPIC_OR_PARTITION" if if_exists else None,
              failures)

