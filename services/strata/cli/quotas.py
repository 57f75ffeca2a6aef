"""``strata quotas describe|alter``: client quotas, like ``kafka-configs.sh`` for users and clients.

Over the Kafka protocol (DescribeClientQuotas, AlterClientQuotas; librdkafka has no call for
them, so ``strata.cli.protocol_client`` sends them), so it works against any Kafka-compatible
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

from typing import Annotated, Any, Final

import typer

from strata.cli import protocol_client
from strata.cli.errors import EXIT_USAGE, CliError, reported_errors
from strata.cli.kafka_client import Connection, kafka_command
from strata.cli.output import OutputFormat, RowsFormatOption, print_rows
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import kafka_error_name

app = typer.Typer(name="quotas", help="Client quotas (per user and client id).",
                  no_args_is_help=True)

MATCH_EXACT: Final = 0
MATCH_DEFAULT: Final = 1
MATCH_SPECIFIED: Final = 2
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
        components = [{"entity_type": kind,
                       "match_type": MATCH_DEFAULT if name is None else MATCH_EXACT,
                       "match": name} for kind, name in entity]
        response = protocol_client.request(conn, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {
            "components": components, "strict": strict})
        if int(response.error_code):
            raise CliError(f"{kafka_error_name(int(response.error_code))}: "
                           f"{response.error_message or 'the quotas cannot be described'}")
    rows: list[dict[str, Any]] = []
    for entry in response.entries or ():
        label = _label([(e.entity_type, e.entity_name) for e in entry.entity])
        rows.extend({"entity": label, "key": v.key, "value": v.value} for v in entry.values)
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
        ops = [{"key": k, "value": v, "remove": False} for k, v in added.items()]
        ops += [{"key": k, "value": 0.0, "remove": True} for k in deleted]
        response = protocol_client.request(conn, ApiKey.ALTER_CLIENT_QUOTAS, 1, {
            "entries": [{"entity": [{"entity_type": kind, "entity_name": name}
                                    for kind, name in entity], "ops": ops}],
            "validate_only": validate_only})
        (result,) = response.entries
        if int(result.error_code):
            raise CliError(f"{kafka_error_name(int(result.error_code))}: "
                           f"{result.error_message or 'the change was refused'}")
    verb = "would be changed" if validate_only else "changed"
    typer.echo(f"quotas of {_label(entity)} {verb}")


app.command("describe")(describe)
app.command("alter")(alter)
