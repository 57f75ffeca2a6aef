"""The admin service's only way to the brokers: confluent-kafka clients over the Kafka protocol.

Owns the clients and the rule for calling them: librdkafka's calls block, so routers never call
them on the event loop; they hand a plain function to ``KafkaGateway.run``, which runs it on a
worker thread (``asyncio.to_thread``). One long-lived ``AdminClient`` and one ``Producer`` are
shared by every request (both are thread-safe); a ``Consumer`` for browsing records is made per
request and closed after it (``consumer()``).

Bounded waits: every admin request carries ``timeout_s`` and every future is awaited for at
most ``timeout_s`` plus a grace, so an unreachable cluster answers 503/504 instead of hanging.
Errors: ``KafkaException`` becomes ``ProblemError`` titled with Kafka's error name
(``strata.protocol.error_codes``; librdkafka's own name for its local, negative codes).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata, TopicMetadata

from strata.admin.problems import ProblemError

if TYPE_CHECKING:
    from strata.admin.authentication import AuthSettings

CLIENT_ID: Final = "strata-admin"
DEFAULT_TIMEOUT_S: Final = 10.0
_FUTURE_GRACE_S: Final = 2.0

T = TypeVar("T")


# librdkafka properties the service sets itself: ``kafka_config`` may not override them.
RESERVED_CLIENT_KEYS: Final = frozenset({"bootstrap.servers", "client.id"})
KAFKA_ENV_PREFIX: Final = "STRATA_ADMIN_KAFKA_"


@dataclass(frozen=True, slots=True)
class AdminSettings:
    """Where the brokers are, how the service logs in to them, how long one Kafka request may
    take, and who may call the API (``auth``; None: no authentication, as before security).

    ``kafka_config``: extra librdkafka properties for every client of the service — the
    brokers' security settings (``security.protocol``, ``sasl.mechanism``, ``sasl.username``,
    ``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``...).
    """

    bootstrap_servers: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    kafka_config: Mapping[str, str] = field(default_factory=dict)
    auth: AuthSettings | None = None

    @property
    def timeout_ms(self) -> int:
        return int(self.timeout_s * 1000)


def kafka_client_config(env: Mapping[str, str], properties: str = "") -> dict[str, str]:
    """librdkafka properties from a properties file's text, then ``STRATA_ADMIN_KAFKA_*``
    environment variables (``STRATA_ADMIN_KAFKA_SASL_PASSWORD`` -> ``sasl.password``: lower
    case, ``_`` -> ``.``), which win. Raises ``ValueError`` on a malformed line or a reserved
    key."""
    out: dict[str, str] = {}
    for number, raw in enumerate(properties.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"line {number}: expected key=value, got {line!r}")
        out[key.strip()] = value.strip()
    for name, value in env.items():
        if name.startswith(KAFKA_ENV_PREFIX) and len(name) > len(KAFKA_ENV_PREFIX):
            out[name[len(KAFKA_ENV_PREFIX):].lower().replace("_", ".")] = value
    reserved = sorted(RESERVED_CLIENT_KEYS & set(out))
    if reserved:
        raise ValueError(f"{', '.join(reserved)} may not be set here (use --bootstrap-servers)")
    return out


def error_name(error: KafkaError) -> str:
    """Kafka's name for a broker error code, librdkafka's for its local (negative) ones."""
    code = error.code()
    if code <= 0:
        return str(error.name())
    from strata.protocol.error_codes import kafka_error_name

    return kafka_error_name(code)


def problem_from(exc: KafkaException, subject: str) -> ProblemError:
    """The ``ProblemError`` of a failed client call about ``subject`` (e.g. "topic 'x'")."""
    error = exc.args[0] if exc.args else None
    if not isinstance(error, KafkaError):
        return ProblemError(502, "KAFKA_ERROR", f"{subject}: {exc}")
    return problem_from_error(error, subject)


def problem_from_error(error: KafkaError, subject: str) -> ProblemError:
    message = str(error.str())
    if message.startswith(("Broker: ", "Local: ")):
        message = message.split(": ", 1)[1]
    return ProblemError.kafka(error_name(error), f"{subject}: {message}")


def unknown_topic(name: str) -> ProblemError:
    return ProblemError.kafka("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")


class KafkaGateway:
    """Shared clients of one admin service; ``run`` is the only way routers call them."""

    def __init__(self, settings: AdminSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None
        self.last_client_error: str | None = None  # librdkafka's latest (e.g. SASL refused)

    def _on_error(self, error: KafkaError) -> None:
        """librdkafka's ``error_cb``: keep the latest error (a failed SASL login, a refused
        certificate), which its request errors ("transport failure") do not name."""
        self.last_client_error = str(error.str())

    def unreachable_detail(self, exc: KafkaException) -> str:
        """Why the cluster cannot be reached, with librdkafka's latest error when it says
        more (an authentication failure)."""
        detail = problem_from(exc, f"the cluster at {self.settings.bootstrap_servers}").detail
        admin = self._admin
        if admin is not None:
            admin.poll(0)  # serves error_cb, which librdkafka calls only from poll()
        last = self.last_client_error
        return f"{detail} (latest client error: {last})" if last and last not in detail \
            else detail

    def config(self) -> dict[str, Any]:
        """librdkafka properties every client of the service gets (the security settings of
        ``kafka_config`` included)."""
        timeout_ms = self.settings.timeout_ms
        return {
            **self.settings.kafka_config,
            "bootstrap.servers": self.settings.bootstrap_servers,
            "client.id": CLIENT_ID,
            "socket.timeout.ms": timeout_ms,
            "socket.connection.setup.timeout.ms": timeout_ms,
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 1000,
            "log_level": 0,
            "error_cb": self._on_error,
        }

    # ------------------------------------------------------------------------------ clients
    @property
    def admin(self) -> AdminClient:
        with self._lock:
            if self._admin is None:
                self._admin = AdminClient(self.config())
            return self._admin

    @property
    def producer(self) -> Producer:
        with self._lock:
            if self._producer is None:
                self._producer = Producer({
                    **self.config(),
                    "linger.ms": 1,
                    "acks": "all",
                    "message.timeout.ms": self.settings.timeout_ms,
                    "enable.idempotence": False,
                })
            return self._producer

    def consumer(self) -> Consumer:
        """A new consumer for ``assign()`` reads; it never commits. Close it after use."""
        return Consumer({
            **self.config(),
            "group.id": f"{CLIENT_ID}-browser",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
        })

    def close(self) -> None:
        """Deliver what the producer still holds (bounded), then drop the clients."""
        with self._lock:
            producer, self._producer, self._admin = self._producer, None, None
        if producer is not None:
            producer.flush(self.settings.timeout_s)

    # ------------------------------------------------------------------------------ calling
    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread: the event loop never waits on librdkafka."""
        return await asyncio.to_thread(fn, *args)

    def result(self, future: concurrent.futures.Future[Any], subject: str) -> Any:
        """The result of one admin future about ``subject``, or the ``ProblemError`` it failed
        with."""
        try:
            return future.result(timeout=self.settings.timeout_s + _FUTURE_GRACE_S)
        except KafkaException as exc:
            raise problem_from(exc, subject) from None
        except concurrent.futures.TimeoutError:
            raise ProblemError.kafka(
                "_TIMED_OUT", f"no answer about {subject} within {self.settings.timeout_s:g}s"
            ) from None

    def metadata(self) -> ClusterMetadata:
        """Metadata of every topic (so a broker with auto.create.topics.enable creates none)."""
        try:
            metadata: ClusterMetadata = self.admin.list_topics(timeout=self.settings.timeout_s)
        except KafkaException as exc:
            problem = problem_from(exc, f"the cluster at {self.settings.bootstrap_servers}")
            if problem.status >= 500:
                problem.status = 503
                problem.title = "CLUSTER_UNREACHABLE"
                problem.detail = self.unreachable_detail(exc)
            raise problem from None
        return metadata

    def topic(self, name: str, metadata: ClusterMetadata | None = None) -> TopicMetadata:
        """``name``'s metadata; 404 UNKNOWN_TOPIC_OR_PARTITION when it does not exist."""
        found: TopicMetadata | None = (metadata or self.metadata()).topics.get(name)
        if found is None:
            raise unknown_topic(name)
        if found.error is not None:
            if found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise unknown_topic(name)
            raise problem_from_error(found.error, f"topic {name!r}")
        return found
