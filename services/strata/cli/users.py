"""``strata users create|delete|list``: SCRAM users of a cluster or of a single broker.

Writes salted credentials (``strata.security.credentials``; never a password) straight to
where brokers read them on every login, like Kafka's ``kafka-configs.sh --alter --add-config
'SCRAM-SHA-512=[password=...]' --entity-type users``:

* ``--metadata-store URL`` (``sqlite:///...`` or ``etcd://...``): a cluster's store, key
  ``/strata/credentials/<mechanism>/<user>``;
* ``--log-dir DIR``: a single broker without ``metadata.store``: ``credentials.json`` in its first
  log dir (replaced atomically, so a running broker may read it at any time).

``create USER`` makes one credential per ``--mechanism`` (default SCRAM-SHA-256 and
SCRAM-SHA-512; SASL/PLAIN logins are checked against these) with ``--iterations`` (4096,
Kafka's minimum, to 16384); the password comes from ``--password``, ``STRATA_USER_PASSWORD`` or
a hidden prompt. Creating an existing user replaces its credentials. ``delete USER`` removes
them all (exit 1 when there were none). ``list`` prints each user with its mechanisms
(``--format json``: one object per user).

Exit codes: 0 done, 1 the store refused or the user did not exist, 2 usage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from strata.cli.errors import CliError, reported_errors, usage_error
from strata.cli.output import OutputFormat, print_json_line, print_table
from strata.cli.store_access import LogDirOption, StoreOption, run_on_store
from strata.security.credentials import (
    CredentialStore,
    FileCredentialStore,
    MetadataCredentialStore,
)
from strata.security.scram import DEFAULT_ITERATIONS, MECHANISMS, make_credential

app = typer.Typer(name="users", help="SCRAM users (SASL credentials).", no_args_is_help=True)

T = TypeVar("T")



def _run(metadata_store: str | None, log_dir: Path | None,
         work: Callable[[CredentialStore], Awaitable[T]]) -> T:
    in_log_dir: Callable[[Path], CredentialStore] = FileCredentialStore
    return run_on_store(metadata_store, log_dir, in_log_dir, MetadataCredentialStore, work)


@app.command()
def create(
    ctx: typer.Context,
    user: Annotated[str, typer.Argument(help="The user name (SASL authentication id).")],
    password: Annotated[str, typer.Option(
        "--password", envvar="STRATA_USER_PASSWORD", prompt=True, hide_input=True,
        confirmation_prompt=True, help="The password (else STRATA_USER_PASSWORD or a prompt).")],
    mechanism: Annotated[list[str] | None, typer.Option(
        "--mechanism", "-m", help="SCRAM-SHA-256 or SCRAM-SHA-512 (default both). Repeatable.")
    ] = None,
    iterations: Annotated[int, typer.Option(
        "--iterations", help="PBKDF2 iterations (4096..16384).")] = DEFAULT_ITERATIONS,
    metadata_store: StoreOption = None,
    log_dir: LogDirOption = None,
) -> None:
    """Create a user, or replace its credentials."""
    with reported_errors(ctx):
        mechanisms = [m.upper() for m in mechanism] if mechanism else sorted(MECHANISMS)
        for name in mechanisms:
            if name not in MECHANISMS:
                raise usage_error(f"--mechanism {name}: one of {', '.join(sorted(MECHANISMS))}")
        if not user:
            raise usage_error("the user name is empty")
        try:
            credentials = [make_credential(m, password, iterations=iterations)
                           for m in mechanisms]
        except ValueError as exc:
            raise usage_error(str(exc)) from None

        async def put(store: CredentialStore) -> None:
            for credential in credentials:
                await store.put(user, credential)

        _run(metadata_store, log_dir, put)
        typer.echo(f"created user {user} ({', '.join(mechanisms)})")


@app.command()
def delete(
    ctx: typer.Context,
    user: Annotated[str, typer.Argument(help="The user to remove.")],
    metadata_store: StoreOption = None,
    log_dir: LogDirOption = None,
) -> None:
    """Delete every credential of a user."""
    with reported_errors(ctx):
        if not _run(metadata_store, log_dir, lambda store: store.delete(user)):
            raise CliError(f"no user {user}")
        typer.echo(f"deleted user {user}")


@app.command("list")
def list_users(
    ctx: typer.Context,
    metadata_store: StoreOption = None,
    log_dir: LogDirOption = None,
    output: Annotated[OutputFormat, typer.Option(
        "--format", help="text or json.")] = OutputFormat.TEXT,
) -> None:
    """List users and the mechanisms they have credentials for."""
    with reported_errors(ctx):
        users = _run(metadata_store, log_dir, lambda store: store.users())
        if output is OutputFormat.JSON:
            for name, mechanisms in users.items():
                print_json_line({"user": name, "mechanisms": mechanisms})
        else:
            print_table(["USER", "MECHANISMS"],
                        [[name, ",".join(mechs)] for name, mechs in users.items()])
