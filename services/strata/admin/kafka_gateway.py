"""The admin service's only way to the brokers: confluent-kafka clients over the Kafka protocol.

Owns the clients and the rule for calling them: librdkafka's calls block, so routers never call
them on the event loop; they hand a plain function to ``KafkaGateway.run``, which runs it on a
worker thread (``asyncio.to_thread``). One long-lived admin client
(``strata.client.kafka_admin.KafkaAdmin``, shared with the CLI and the operator) and one
``Producer`` are shared by every request (both are thread-safe); a ``Consumer`` for browsing
records is made per request and closed after it (``consumer()``). All of them report their
connection errors to one ``ConnectionErrors``.

Bounded waits: every admin request carries ``timeout_s`` and every future is awaited for at
most ``timeout_s`` plus a grace (``KafkaAdmin``), so an unreachable cluster answers 503/504
instead of hanging.

Errors: a failed Kafka call raises ``KafkaClientError``; ``problem`` is the one place it becomes
a ``ProblemError`` (``run`` applies it): titled with Kafka's error name
(``strata.client.kafka_errors``; librdkafka's own name for its local, negative codes), the
detail ``<subject>: <message>``; a Metadata request that failed with a 5xx error is 503
CLUSTER_UNREACHABLE, naming the address and librdkafka's latest connection error.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from confluent_kafka import Consumer, Producer

from strata.admin.problems import ProblemError
from strata.client.client_properties import ClientPropertiesError, client_security
from strata.client.client_quotas import QuotaTarget
from strata.client.kafka_admin import ConnectionErrors, KafkaAdmin
from strata.client.kafka_config import client_config
from strata.client.kafka_errors import KafkaClientError

if TYPE_CHECKING:
    from strata.admin.authentication import AuthSettings

CLIENT_ID: Final = "strata-admin"
DEFAULT_TIMEOUT_S: Final = 10.0

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


class KafkaGateway:
    """Shared clients of one admin service; ``run`` is the only way routers call them."""

    def __init__(self, settings: AdminSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._kafka: KafkaAdmin | None = None
        self._producer: Producer | None = None
        # librdkafka's latest connection error of any client (e.g. a refused SASL login)
        self.errors = ConnectionErrors()

    def problem(self, exc: KafkaClientError) -> ProblemError:
        """The ``ProblemError`` of a failed Kafka call."""
        if exc.timed_out:
            return ProblemError.kafka(exc.name, exc.message)
        detail = f"{exc.subject}: {exc.message}" if exc.subject else exc.message
        problem = (ProblemError.kafka(exc.name, detail) if exc.name
                   else ProblemError(502, "KAFKA_ERROR", detail))
        if exc.api == "Metadata" and problem.status >= 500:
            return ProblemError(503, "CLUSTER_UNREACHABLE", self.unreachable_detail(exc))
        return problem

    @staticmethod
    def unreachable_detail(exc: KafkaClientError) -> str:
        """Why the cluster cannot be reached, with librdkafka's latest error when it says
        more (an authentication failure)."""
        detail = f"{exc.subject}: {exc.message}"
        last = exc.reason
        return f"{detail} (latest client error: {last})" if last and last not in detail \
            else detail

    def config(self) -> dict[str, Any]:
        """librdkafka properties every client of the service gets (the security settings of
        ``kafka_config`` included)."""
        settings = self.settings
        return {**client_config(settings.bootstrap_servers, CLIENT_ID, settings.timeout_s,
                                settings.kafka_config),
                "error_cb": self.errors}

    # ------------------------------------------------------------------------------ clients
    @property
    def kafka(self) -> KafkaAdmin:
        """The shared admin client."""
        with self._lock:
            if self._kafka is None:
                settings = self.settings
                self._kafka = KafkaAdmin(settings.bootstrap_servers, CLIENT_ID,
                                         settings.timeout_s, settings.kafka_config, self.errors)
            return self._kafka

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
            producer, self._producer, self._kafka = self._producer, None, None
        if producer is not None:
            producer.flush(self.settings.timeout_s)

    # ------------------------------------------------------------------------------ calling
    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await fn(target, *args)`` for the Kafka calls confluent-kafka has none for
        (``strata.client.client_quotas``), logged in with ``kafka_config``; a
        ``KafkaClientError`` is answered as its ``problem``."""
        settings = self.settings
        try:
            security = client_security(settings.kafka_config)
        except ClientPropertiesError as exc:
            raise ProblemError(500, "INVALID_CLIENT_CONFIG",
                               f"the service's Kafka login settings: {exc}") from None
        target = QuotaTarget(settings.bootstrap_servers, security, settings.timeout_s,
                             CLIENT_ID)
        try:
            return await fn(target, *args)
        except KafkaClientError as exc:
            raise self.problem(exc) from None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread: the event loop never waits on librdkafka. A
        ``KafkaClientError`` it raises is answered as its ``problem``."""
        try:
            return await asyncio.to_thread(fn, *args)
        except KafkaClientError as exc:
            raise self.problem(exc) from None
