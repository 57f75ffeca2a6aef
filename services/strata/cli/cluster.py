"""``strata cluster status|elect``: a cluster's replication state, and leader elections.

``elect`` is ``kafka-leader-election.sh``: ElectLeaders (KIP-460) for ``--type preferred`` (move
leadership back to each partition's first replica, when it is in the ISR) or ``unclean`` (elect
from outside the ISR, for offline partitions only), on ``--topic``/``--partition`` or every
partition. ELECTION_NOT_NEEDED is a result, not a failure; exit 1 if any partition failed.


Three admin requests through confluent-kafka's ``AdminClient``: DescribeCluster (cluster id,
controller, brokers with racks), Metadata (per partition: leader, replicas, ISR) and ListOffsets
(per partition: high watermark). A partition is *under-replicated* when its ISR is smaller than
its replica set and *offline* without a leader (-1), Kafka's definitions; both are counted in
the summary line and marked in the table. ``--topic`` (repeatable) narrows the partitions;
internal topics (``__*``) are left out unless ``--include-internal``.

Exit 0 when the status could be read (whatever it shows), 1 when no broker answered.
``--format json`` prints one object: ``{cluster_id, controller, brokers: [...],
partitions: [{topic, partition, leader, replicas, isr, high_watermark}]}``.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any

import typer
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition

from strata.cli.errors import CliError, reported_errors
from strata.cli.kafka_client import (
    Connection,
    connect,
    kafka_command,
)
from strata.cli.output import (
    OutputFormat,
    RowsFormatOption,
    print_json_line,
    print_rows,
    print_table,
)
from strata.client.kafka_admin import check_partitions
from strata.client.kafka_errors import kafka_error_name

app = typer.Typer(name="cluster", help="The state of a cluster.", no_args_is_help=True)

INTERNAL_TOPIC_PREFIX = "__"


@app.command()
@kafka_command
def status(
    ctx: typer.Context,
    conn: Connection,
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", "-t", help="Only this topic's partitions. Repeatable.")] = None,
    include_internal: Annotated[bool, typer.Option(
        "--include-internal", help="Show internal topics (__consumer_offsets) too.")] = False,
    output: Annotated[OutputFormat, typer.Option(
        "--format", help="text (tables) or json (one object).")] = OutputFormat.TEXT,
) -> None:
    """Brokers, controller, and per partition leader, replicas, ISR and high watermark."""
    with reported_errors(ctx):
        admin, metadata = connect(conn)
        cluster = admin.describe_cluster()
        names = (list(dict.fromkeys(topic)) if topic else sorted(
            n for n in metadata.topics
            if include_internal or not n.startswith(INTERNAL_TOPIC_PREFIX)))
        topics = [admin.topic(n, metadata) for n in names]
        watermarks = admin.list_offsets(
            [(str(t.topic), p) for t in topics for p in t.partitions], "latest")
    partitions: list[dict[str, Any]] = [
        {"topic": t.topic, "partition": p, "leader": t.partitions[p].leader,
         "replicas": list(t.partitions[p].replicas), "isr": list(t.partitions[p].isrs),
         "high_watermark": watermarks.get((str(t.topic), p))}
        for t in topics for p in sorted(t.partitions)
    ]
    controller = cluster.controller.id if cluster.controller is not None else None
    brokers = [{"id": n.id, "host": n.host, "port": n.port, "rack": n.rack}
               for n in sorted(cluster.nodes, key=lambda n: n.id)]
    if output is OutputFormat.JSON:
        print_json_line({"cluster_id": cluster.cluster_id, "controller": controller,
                         "brokers": brokers, "partitions": partitions})
        return
    under = sum(1 for p in partitions if len(p["isr"]) < len(p["replicas"]))
    offline = sum(1 for p in partitions if p["leader"] < 0)
    typer.echo(f"cluster {cluster.cluster_id}: {len(brokers)} brokers, controller "
               f"{controller if controller is not None else '-'}, {len(partitions)} partitions "
               f"({under} under-replicated, {offline} offline)")
    print_table(("BROKER", "HOST", "PORT", "RACK", "CONTROLLER"),
                [(b["id"], b["host"], b["port"], b["rack"] or "-",
                  "yes" if b["id"] == controller else "") for b in brokers])
    typer.echo("")
    print_table(("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "HIGH_WATERMARK", "STATUS"),
                [(p["topic"], p["partition"], p["leader"], ",".join(map(str, p["replicas"])),
                  ",".join(map(str, p["isr"])), p["high_watermark"],
                  "offline" if p["leader"] < 0 else
                  "under-replicated" if len(p["isr"]) < len(p["replicas"]) else "ok")
                 for p in partitions])


class Election(enum.StrEnum):
    PREFERRED = "preferred"
    UNCLEAN = "unclean"


@app.command()
@kafka_command
def elect(
    ctx: typer.Context,
    conn: Connection,
    election: Annotated[Election, typer.Option(
        "--type", help="preferred: back to the first replica; unclean: offline partitions "
                       "from outside the ISR.")] = Election.PREFERRED,
    topic: Annotated[str | None, typer.Option(
        "--topic", "-t", help="Only this topic (default: every partition).")] = None,
    partition: Annotated[list[int] | None, typer.Option(
        "--partition", "-p", min=0, help="Only this partition of --topic. Repeatable.")] = None,
    output: RowsFormatOption = OutputFormat.TEXT,
) -> None:
    """Elect leaders (ElectLeaders): preferred replicas back, or offline partitions unclean."""
    with reported_errors(ctx):
        if partition and topic is None:
            raise CliError("--partition needs --topic", exit_code=2)
        admin, metadata = connect(conn)
        wanted: list[TopicPartition] | None = None
        if topic is not None:
            described = admin.topic(topic, metadata)
            numbers = sorted(set(partition)) if partition else sorted(described.partitions)
            check_partitions(described, numbers)
            wanted = [TopicPartition(topic, p) for p in numbers]
        kind = ElectionType.PREFERRED if election is Election.PREFERRED else ElectionType.UNCLEAN
        # No timeout keywords: confluent-kafka 2.16.1's elect_leaders fails on any
        # (SystemError from its argument parsing); socket.timeout.ms (--timeout) bounds it.
        results = admin.result(admin.client.elect_leaders(kind, wanted), "the election",
                               "ElectLeaders")
    rows = [_election_row(tp, outcome) for tp, outcome in
            sorted(results.items(), key=lambda item: (item[0].topic, item[0].partition))]
    print_rows(output, rows)
    if any(r["result"] not in ("elected", "ELECTION_NOT_NEEDED") for r in rows):
        raise typer.Exit(1)


def _election_row(tp: TopicPartition, outcome: KafkaException | KafkaError | None
                  ) -> dict[str, Any]:
    error = outcome.args[0] if isinstance(outcome, KafkaException) and outcome.args else outcome
    if isinstance(error, KafkaError):
        name = kafka_error_name(error)
        return {"topic": tp.topic, "partition": tp.partition, "result": name,
                "message": error.str()}
    return {"topic": tp.topic, "partition": tp.partition, "result": "elected", "message": ""}
