"""``strata quotas describe|alter``: client quotas, like ``kafka-configs.sh`` for users and clients.

Over the Kafka protocol (DescribeClientQuotas, AlterClientQuotas; librdkafka has no call for
them, so ``strata.client.client_quotas`` sends them), so it works against any Kafka-compatible
cluster and through its security. The entity is named as Kafka's tool names it: ``--user NAME``
or ``--user-default``, ``--client-id ID`` or ``--client-default`` (both: a user + client-id
quota), or ``--ip ADDRESS`` / ``--ip-default``.

- ``describe``: the quotas of every entity matching the options (none: every entity; with
  ``--strict`` only entities with exactly the given entity types). One row per entity and key.
- ``alter``: ``--add-config producer_byte_rate=1048576,consumer_byte_rate=2097152`` sets
  quotas, ``--delete-config request_percentage`` removes them (Kafka's keys:
  ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
  ``controller_mutation_rate``; ``connection_creation_rate`` for an ip); ``--validate-only``
  checks without storing.

Exit codes: 0 done, 1 a broker refused (its Kafka error and message on the line), 2 usage.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Final

import typer

from strata.cli import protocol_client
from strata.cli.errors import EXIT_USAGE, CliError, reported_errors
from strata.cli.kafka_client import Connection, kafka_command
from strata.cli.output import OutputFormat, RowsFormatOption, print_rows
from strata.client.client_quotas import QuotaTarget, alter_client_quotas, describe_client_quotas

app = typer.Typer(name="quotas", help="Client quotas (per user and client id).",
                  no_args_is_help=True)

DEFAULT_LABEL: Final = "<default>"

UserOption = Annotated[str | None, typer.Option("--user", help="A user (principal name).")]
UserDefaultOption = Annotated[bool, typer.Option("--user-default",
                                                 help="The default user entity.")]
ClientOption = Annotated[str | None, typer.Option("--client-id", help="A client id.")]
ClientDefaultOption = Annotated[bool, typer.Option("--client-default",
                                                   help="The default client-id entity.")]
IpOption = Annotated[str | None, typer.Option("--ip", help="A client IP address.")]
IpDefaultOption = Annotated[bool, typer.Option("--ip-default", help="The default ip entity.")]


def _entity(user: str | None, user_default: bool, client_id: str | None,
            client_default: bool, ip: str | None, ip_default: bool
            ) -> list[tuple[str, str | None]]:
    """(entity type, name or None for the default) pairs the options name."""
    pairs: list[tuple[str, str | None]] = []
    for kind, name, default in (("user", user, user_default),
                                ("client-id", client_id, client_default),
                                ("ip", ip, ip_default)):
        if name is not None and default:
            raise CliError(f"--{kind} and --{kind.split('-')[0]}-default exclude each other",
                           exit_code=EXIT_USAGE)
        if name is not None or default:
            pairs.append((kind, name))
    return pairs


def _label(entity: list[tuple[str, str | None]]) -> str:
    return ", ".join(f"{kind}={DEFAULT_LABEL if name is None else name}"
                     for kind, name in entity)


def parse_add_config(text: str) -> dict[str, float]:
    """``key=value,key=value`` -> {key: value}; ``CliError`` naming a bad item."""
    out: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        try:
            if not sep or not key:
                raise ValueError
            out[key.strip()] = float(value)
        except ValueError:
            raise CliError(f"--add-config: expected key=number, got {item!r}",
                           exit_code=EXIT_USAGE) from None
    return out


def _target(conn: Connection) -> QuotaTarget:
    return QuotaTarget(conn.bootstrap, protocol_client.client_security(conn.properties),
                       conn.timeout_s, "strata-cli")


@kafka_command
def describe(
    ctx: typer.Context,
    conn: Connection,
    user: UserOption = None, user_default: UserDefaultOption = False,
    client_id: ClientOption = None, client_default: ClientDefaultOption = False,
    ip: IpOption = None, ip_default: IpDefaultOption = False,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Only entities with exactly the given entity types.")] = False,
    output: RowsFormatOption = OutputFormat.TEXT,
) -> None:
    """The quotas of the matching entities (DescribeClientQuotas)."""
    with reported_errors(ctx):
        entity = _entity(user, user_default, client_id, client_default, ip, ip_default)
        found = asyncio.run(describe_client_quotas(_target(conn), entity, strict))
    rows: list[dict[str, Any]] = [{"entity": _label(matched), "key": key, "value": value}
                                  for matched, quotas in found for key, value in quotas.items()]
    rows.sort(key=lambda r: (r["entity"], r["key"]))
    print_rows(output, rows)


@kafka_command
def alter(
    ctx: typer.Context,
    conn: Connection,
    user: UserOption = None, user_default: UserDefaultOption = False,
    client_id: ClientOption = None, client_default: ClientDefaultOption = False,
    ip: IpOption = None, ip_default: IpDefaultOption = False,
    add_config: Annotated[str, typer.Option(
        "--add-config", metavar="KEY=VALUE,...", help="Quotas to set.")] = "",
    delete_config: Annotated[str, typer.Option(
        "--delete-config", metavar="KEY,...", help="Quotas to remove.")] = "",
    validate_only: Annotated[bool, typer.Option(
        "--validate-only", help="Check the change without storing it.")] = False,
) -> None:
    """Set or remove quotas of one entity (AlterClientQuotas)."""
    with reported_errors(ctx):
        entity = _entity(user, user_default, client_id, client_default, ip, ip_default)
        if not entity:
            raise CliError("name the entity: --user/--user-default, --client-id/"
                           "--client-default, or --ip/--ip-default", exit_code=EXIT_USAGE)
        added = parse_add_config(add_config)
        deleted = [k.strip() for k in delete_config.split(",") if k.strip()]
        if not added and not deleted:
            raise CliError("give --add-config and/or --delete-config", exit_code=EXIT_USAGE)
        asyncio.run(alter_client_quotas(_target(conn), entity, added, deleted, validate_only))
    verb = "would be changed" if validate_only else "changed"
    typer.echo(f"quotas of {_label(entity)} {verb}")


app.command("describe")(describe)
app.command("alter")(alter)
