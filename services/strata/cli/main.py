"""``strata``: the command line entry point (``[project.scripts] strata``).

Only registers commands; each delegates to the package that owns the work (kopf's rule for
``main.py``). ``strata broker --config FILE [--override key=value ...]`` runs one broker in the
foreground until SIGTERM/SIGINT (``strata.broker.server.run``); ``python -m strata.broker``
runs the same command. ``strata dev`` runs a local cluster (``strata.cli.dev``), what
``make run`` starts. The Kafka client commands talk to brokers over the Kafka protocol:
``strata topic ...`` (``strata.cli.topic``), ``strata produce`` (``strata.cli.produce``) and
``strata consume`` (``strata.cli.consume``). ``strata chaos run`` runs the fault campaign
(``strata.cli.chaos``). Exit codes and one-line errors:
``strata.cli.errors``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from strata.cli import (
    acls,
    admin,
    chaos,
    cluster,
    consume,
    groups,
    produce,
    quotas,
    reassign,
    spark,
    topic,
    transactions,
    users,
)
from strata.cli.errors import OneLineErrorsGroup

app = typer.Typer(
    name="strata",
    help="Strata: a Kafka-compatible commit log.",
    no_args_is_help=True,
    add_completion=False,
    cls=OneLineErrorsGroup,
)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Broker properties file (Kafka's server.properties).",
                 exists=True, dir_okay=False, readable=True),
]
OverrideOption = Annotated[
    list[str] | None,
    typer.Option("--override", "-o", metavar="KEY=VALUE",
                 help="Set a config key; wins over the file and STRATA_* variables. Repeatable."),
]
LogLevelOption = Annotated[
    str, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")
]


@app.callback()
def main(
    command_config: Annotated[
        Path | None,
        typer.Option("--command-config", envvar="STRATA_COMMAND_CONFIG", dir_okay=False,
                     help="Kafka client properties for the client commands (as Kafka's tools "
                          "take them): security.protocol, sasl.mechanism, sasl.jaas.config, "
                          "ssl.truststore.location (PEM)... Default $STRATA_COMMAND_CONFIG."),
    ] = None,
) -> None:
    """Strata: a Kafka-compatible commit log."""
    if command_config is not None:
        # Read by every client command's Connection (strata.cli.kafka_client).
        os.environ["STRATA_COMMAND_CONFIG"] = str(command_config)


@app.command()
def broker(
    config: ConfigOption = None,
    override: OverrideOption = None,
    log_level: LogLevelOption = "INFO",
) -> None:
    """Run one broker until SIGTERM or SIGINT (exit 0 after a clean shutdown)."""
    from strata.broker.config import BrokerConfig, ConfigError
    from strata.broker.server import configure_logging, run

    configure_logging(log_level)
    try:
        broker_config = BrokerConfig.load(config, overrides=override or [])
    except ConfigError as exc:
        typer.echo(f"strata broker: {exc}", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(run(broker_config))


@app.command()
def dev(
    brokers: Annotated[int, typer.Option("--brokers", "-n", help="Number of brokers.")] = 3,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Where brokers keep data (default ./.strata-data, "
                     "or STRATA_DATA_DIR)."),
    ] = None,
    kafka_port: Annotated[
        int, typer.Option("--kafka-port", help="First broker's Kafka port; broker i uses +i.")
    ] = 9092,
    metadata: Annotated[
        str, typer.Option("--metadata", help="Metadata store: sqlite (embedded) or etcd (a "
                          "local etcd is started).")
    ] = "sqlite",
    admin_port: Annotated[
        int, typer.Option("--admin-port", help="Port of the REST admin API (0: a free port, "
                          "-1: no admin service).")
    ] = 8080,
    override: Annotated[
        list[str] | None,
        typer.Option("--override", "-o", help="A broker setting key=value for every broker "
                     "(repeatable).")
    ] = None,
    racks: Annotated[
        str | None,
        typer.Option("--racks", help="Comma-separated racks: broker i gets the i-th "
                     "(round-robin) as broker.rack.")
    ] = None,
) -> None:
    """Run a local cluster until Ctrl-C: prints the bootstrap address, then READY."""
    from strata.cli.dev import default_data_dir, run_dev

    raise typer.Exit(run_dev(brokers, data_dir or default_data_dir(), kafka_port, metadata,
                             admin_port, override or [], racks))


app.add_typer(topic.app, name="topic")
app.add_typer(groups.app, name="groups")
cluster.app.command("reassign")(reassign.reassign)
cluster.app.command("reassignments")(reassign.reassignments)
app.add_typer(cluster.app, name="cluster")
app.add_typer(spark.app, name="spark")
app.add_typer(users.app, name="users")
app.add_typer(acls.app, name="acls")
app.add_typer(quotas.app, name="quotas")
app.add_typer(transactions.app, name="transactions")
app.add_typer(chaos.app, name="chaos")
app.command("produce")(produce.produce)
app.command("consume")(consume.consume)
app.command("admin")(admin.admin)


def broker_main() -> None:
    """``python -m strata.broker``: the ``broker`` command on its own."""
    typer.run(broker)
