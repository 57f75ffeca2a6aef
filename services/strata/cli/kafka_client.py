"""The CLI's only way to a broker: confluent-kafka clients configured alike, errors made lines.

Owns what ``strata topic``, ``strata produce`` and ``strata consume`` share: the common options
(``--bootstrap-server/-b``, default ``$STRATA_BOOTSTRAP_SERVERS`` or ``127.0.0.1:9092``, and
``--timeout``), the librdkafka configuration every client gets from them, and the translation of
librdkafka's errors into ``CliError`` lines. The CLI talks to brokers over the Kafka protocol
only (docs/architecture.md, "Packages"), never through broker internals.

Bounded waits: ``--timeout`` caps connecting, each request, each delivery and each admin
operation (librdkafka's admin timeouts default to ``socket.timeout.ms``, set from it), so a
command against an unreachable broker exits 1 within about that long. Every command starts
with a Metadata request (``cluster_metadata``); when no broker answers it, the error names the
bootstrap address and the last connection error librdkafka reported.

librdkafka's own log lines are switched off (``log_level`` 0): connection problems reach us
through ``error_cb`` (``ConnectionErrors``) and failed requests through their results, so
stderr only ever carries our one line.

Error names: Kafka's (``UNKNOWN_TOPIC_OR_PARTITION``, ``INVALID_TOPIC_EXCEPTION``) for broker
error codes, librdkafka's own for its local errors (negative codes, e.g. ``_MSG_TIMED_OUT``):
``strata.client.kafka_errors``, shared with the admin service.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, TopicMetadata

from strata.cli.errors import EXIT_USAGE, CliError
from strata.client.kafka_config import client_config
from strata.client.kafka_errors import error_text, kafka_error_name, kafka_error_of

DEFAULT_BOOTSTRAP: Final = "127.0.0.1:9092"
BOOTSTRAP_ENV: Final = "STRATA_BOOTSTRAP_SERVERS"
COMMAND_CONFIG_ENV: Final = "STRATA_COMMAND_CONFIG"
DEFAULT_TIMEOUT_S: Final = 30.0
CLIENT_ID: Final = "strata-cli"

# librdkafka's local errors that mean "no broker answered", not "a broker said no".
_UNREACHABLE: Final = frozenset({
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
})
# Extra seconds to wait for an admin future beyond the timeout the request itself carries.
_FUTURE_GRACE_S: Final = 5.0

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


@contextmanager
def client_created() -> Iterator[None]:
    """Around making a client: a property librdkafka refuses is a usage error naming it."""
    try:
        yield
    except KafkaException as exc:
        cause = exc.args[0] if exc.args else None
        if isinstance(cause, KafkaError) and cause.code() == KafkaError._INVALID_ARG:
            raise CliError(f"--command-config: {cause.str()}", exit_code=EXIT_USAGE) from None
        raise


class ConnectionErrors:
    """``error_cb`` for a client: remembers the last connection-level error it reported.

    librdkafka calls it from ``poll()`` (or the consumer's ``poll``), on the caller's thread.
    """

    def __init__(self) -> None:
        self.last: KafkaError | None = None
        self.all_brokers_down = False

    def __call__(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self.all_brokers_down = True
        else:
            self.last = error

    def reset(self) -> None:
        """A broker answered: earlier connection errors are history."""
        self.all_brokers_down = False


def new_admin(conn: Connection, errors: ConnectionErrors) -> AdminClient:
    with client_created():
        return AdminClient(conn.config(), error_cb=errors)


def _sentence(text: str) -> str:
    """A message as the tail of our line: no trailing period, lower-case first word."""
    text = text.strip().rstrip(".")
    first = text.split(" ", 1)[0]
    if first[:1].isupper() and not first.isupper() and first[1:].islower():
        text = text[0].lower() + text[1:]
    return text


def kafka_error(error: KafkaError, subject: str | None = None) -> CliError:
    """``NAME: message`` for an error a client reported about ``subject`` (e.g. "topic 'x'").

    librdkafka fills a missing broker message with the code's generic text (``Broker: Unknown
    topic or partition``); then the subject is named, since the generic text names nothing.
    """
    message, generic = error_text(error)
    message = _sentence(message)
    if generic and subject:
        message = f"{subject}: {message}"
    return CliError(f"{kafka_error_name(error)}: {message}")


def exception_error(exc: KafkaException, subject: str | None = None) -> CliError:
    """The ``CliError`` for a ``KafkaException`` (which normally carries a ``KafkaError``)."""
    error = kafka_error_of(exc)
    return CliError(str(exc)) if error is None else kafka_error(error, subject)


def admin_result(conn: Connection, future: concurrent.futures.Future[Any], subject: str) -> Any:
    """The result of one admin operation on ``subject``, or the ``CliError`` it failed with."""
    try:
        return future.result(timeout=conn.timeout_s + _FUTURE_GRACE_S)
    except KafkaException as exc:
        raise exception_error(exc, subject) from None
    except concurrent.futures.TimeoutError:
        raise CliError(f"no answer about {subject} within {conn.timeout_s:g}s") from None


def unreachable(conn: Connection, errors: ConnectionErrors, cause: KafkaError) -> CliError:
    """The line for "no broker answered", naming the address and librdkafka's last reason."""
    detail = errors.last.str() if errors.last is not None else cause.str()
    return CliError(
        f"cannot reach a broker at {conn.bootstrap} within {conn.timeout_s:g}s: {detail}"
    )


def cluster_metadata(client: Any, conn: Connection, errors: ConnectionErrors) -> ClusterMetadata:
    """All topics' metadata from ``client`` (admin, producer or consumer), bounded by --timeout.

    Asks for every topic, so a broker with ``auto.create.topics.enable`` creates nothing.
    """
    try:
        metadata: ClusterMetadata = client.list_topics(timeout=conn.timeout_s)
    except KafkaException as exc:
        cause = exc.args[0] if exc.args else None
        if isinstance(cause, KafkaError) and cause.code() in _UNREACHABLE:
            client.poll(0)  # serve error_cb: it holds the reason (refused, resolve, ...)
            raise unreachable(conn, errors, cause) from None
        raise exception_error(exc) from None
    errors.reset()
    return metadata


def unknown_topic(topic: str) -> CliError:
    return CliError(f"UNKNOWN_TOPIC_OR_PARTITION: topic {topic!r} does not exist")


def topic_metadata(metadata: ClusterMetadata, topic: str) -> TopicMetadata:
    """``topic``'s entry in ``metadata``; ``CliError`` if it does not exist or has an error."""
    found: TopicMetadata | None = metadata.topics.get(topic)
    if found is None:
        raise unknown_topic(topic)
    if found.error is not None:
        if found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise unknown_topic(topic)
        raise kafka_error(found.error, f"topic {topic!r}")
    return found


def check_partitions(topic: TopicMetadata, wanted: list[int]) -> None:
    """``CliError`` naming the first of ``wanted`` that ``topic`` does not have."""
    for partition in wanted:
        if partition not in topic.partitions:
            raise CliError(
                f"UNKNOWN_TOPIC_OR_PARTITION: topic {topic.topic!r} has "
                f"{len(topic.partitions)} partitions; there is no partition {partition}"
            )
