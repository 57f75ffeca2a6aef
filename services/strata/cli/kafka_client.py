"""The CLI's only way to a broker: confluent-kafka clients configured alike.

Owns what ``strata topic``, ``strata produce``, ``strata consume`` and the other librdkafka
commands share: the common options (``--bootstrap-server/-b``, default
``$STRATA_BOOTSTRAP_SERVERS`` or ``127.0.0.1:9092``, and ``--timeout``), the login of
``--command-config``, and making clients from them (``Connection``): the admin client is
``strata.client.kafka_admin.KafkaAdmin``, shared with the admin service and the operator. The
CLI talks to brokers over the Kafka protocol only (docs/architecture.md, "Packages"), never
through broker internals.

Bounded waits: ``--timeout`` caps connecting, each request, each delivery and each admin
operation, so a command against an unreachable broker exits 1 within about that long. Every
command starts with a Metadata request; when no broker answers it, the error names the
bootstrap address and the last connection error librdkafka reported.

Failed calls raise ``KafkaClientError``; ``strata.cli.errors.kafka_line`` makes it the line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, TypeVar

import typer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ClusterMetadata, TopicMetadata

from strata.cli.errors import EXIT_USAGE, CliError, kafka_line
from strata.cli.shared_options import with_options
from strata.client.kafka_admin import (
    ConnectionErrors,
    KafkaAdmin,
    check_partitions,
    cluster_metadata,
    topic_of,
)
from strata.client.kafka_config import client_config
from strata.client.kafka_errors import KafkaClientError

DEFAULT_BOOTSTRAP: Final = "127.0.0.1:9092"
BOOTSTRAP_ENV: Final = "STRATA_BOOTSTRAP_SERVERS"
COMMAND_CONFIG_ENV: Final = "STRATA_COMMAND_CONFIG"
DEFAULT_TIMEOUT_S: Final = 30.0
CLIENT_ID: Final = "strata-cli"

C = TypeVar("C")

BootstrapOption = Annotated[
    str,
    typer.Option("--bootstrap-server", "-b", envvar=BOOTSTRAP_ENV, metavar="HOST:PORT,...",
                 help="Brokers to bootstrap from (default $STRATA_BOOTSTRAP_SERVERS or "
                      "127.0.0.1:9092)."),
]
TimeoutOption = Annotated[
    float,
    typer.Option("--timeout", min=1.0, metavar="SECONDS",
                 help="Longest wait for a broker: connecting, each request, each delivery."),
]


def command_config_properties() -> dict[str, str]:
    """The client properties of ``--command-config`` (``$STRATA_COMMAND_CONFIG``), if given."""
    from strata.cli.client_properties import CommandConfigError, load_client_properties

    path = os.environ.get(COMMAND_CONFIG_ENV)
    if not path:
        return {}
    try:
        return load_client_properties(Path(path))
    except CommandConfigError as exc:
        raise CliError(f"--command-config {exc}", exit_code=EXIT_USAGE) from None


@contextmanager
def _client_created() -> Iterator[None]:
    """Around making a client: a property librdkafka refuses is a usage error naming it."""
    try:
        yield
    except KafkaException as exc:
        cause = exc.args[0] if exc.args else None
        if isinstance(cause, KafkaError) and cause.code() == KafkaError._INVALID_ARG:
            raise CliError(f"--command-config: {cause.str()}", exit_code=EXIT_USAGE) from None
        raise


@dataclass(frozen=True, slots=True)
class Connection:
    """Where the brokers are, how long to wait for them, and how to log in (the client
    properties of ``--command-config``: security.protocol, SASL credentials, TLS files)."""

    bootstrap: str = DEFAULT_BOOTSTRAP
    timeout_s: float = DEFAULT_TIMEOUT_S
    properties: dict[str, str] = field(default_factory=command_config_properties)

    @property
    def timeout_ms(self) -> int:
        return int(self.timeout_s * 1000)

    def config(self) -> dict[str, Any]:
        """librdkafka properties every client of the CLI gets (``strata.client.kafka_config``)."""
        return client_config(self.bootstrap, CLIENT_ID, self.timeout_s, self.properties)

    def admin(self) -> KafkaAdmin:
        """The admin client; commands ask it for ``metadata()`` first, so they fail naming the
        address when no broker answers."""
        with _client_created():
            return KafkaAdmin(self.bootstrap, CLIENT_ID, self.timeout_s, self.properties)

    def client(self, factory: Callable[[dict[str, Any]], C], settings: Mapping[str, Any]
               ) -> tuple[C, ConnectionErrors]:
        """A producer or consumer (``factory``) with ``settings`` on top of ``config()``, and
        the ``error_cb`` that remembers its connection errors."""
        errors = ConnectionErrors()
        with _client_created():
            return factory({**self.config(), "error_cb": errors, **settings}), errors

    def topic(self, client: Any, errors: ConnectionErrors, topic: str,
              partitions: Iterable[int] = ()) -> TopicMetadata:
        """``topic``'s metadata through ``client``, which must have ``partitions``."""
        found = topic_of(cluster_metadata(client, self.bootstrap, self.timeout_s, errors),
                         topic)
        check_partitions(found, partitions)
        return found


def _connection_options(bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
                        timeout_s: TimeoutOption = DEFAULT_TIMEOUT_S) -> None:
    """The options of every command that talks to brokers (only the signature is used)."""


# A command that talks to brokers: it takes --bootstrap-server and --timeout, and gets their
# ``Connection`` (with --command-config's login) as its second parameter.
kafka_command = with_options(_connection_options, Connection)


def connect(conn: Connection) -> tuple[KafkaAdmin, ClusterMetadata]:
    """The admin client of a command and the cluster's metadata, its first request: a command
    fails first, naming the address, when no broker answers."""
    admin = conn.admin()
    return admin, admin.metadata()


def kafka_error(error: KafkaError | KafkaException, subject: str | None = None) -> CliError:
    """The line for an error a client reported about ``subject`` (e.g. "topic 'x'")."""
    return kafka_line(KafkaClientError.of(error, subject or ""))
