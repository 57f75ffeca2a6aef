"""Kafka's names for the errors confluent-kafka reports, for every confluent-kafka user alike.

Owns ``KafkaClientError``, the one exception a failed confluent-kafka call becomes (raised by
``kafka_admin``, translated by each tool in one place), and the one rule the CLI, the admin
service and the operator name errors by: a broker error code
(positive) is named as Kafka names it (``UNKNOWN_TOPIC_OR_PARTITION``, ``INVALID_TOPIC_EXCEPTION``;
``strata.protocol.error_codes``, where librdkafka abbreviates some names), a librdkafka local
error (zero or negative, e.g. ``_MSG_TIMED_OUT``, ``_TRANSPORT``) keeps librdkafka's own name.
``error_text`` strips the generic ``Broker: `` / ``Local: `` prefix librdkafka puts in front of
the code's stock text when the broker sent no message, and says whether it did so (then the
text names no subject, and callers add one).

Pure: reads ``KafkaError`` values, no I/O. kio's schema (behind ``strata.protocol.error_codes``)
takes a third of a second to load, so it is imported only when a broker error is named.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

_GENERIC_PREFIXES = ("Broker: ", "Local: ")


def kafka_error_name(error: KafkaError) -> str:
    """Kafka's name for a broker error code, librdkafka's for its local (negative) ones."""
    code = error.code()
    if code <= 0:
        return str(error.name())
    from strata.protocol.error_codes import kafka_error_name as name_of

    return name_of(code)


def error_text(error: KafkaError) -> tuple[str, bool]:
    """The error's message without librdkafka's generic prefix, and whether it had one."""
    message = str(error.str())
    generic = message.startswith(_GENERIC_PREFIXES)
    if generic:
        message = message.split(": ", 1)[1]
    return message, generic


def kafka_error_of(exc: KafkaException) -> KafkaError | None:
    """The ``KafkaError`` a ``KafkaException`` normally carries, or None."""
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else None


class KafkaClientError(Exception):
    """A confluent-kafka call that failed, in Kafka's terms: the one exception every tool
    translates into its own surface (the CLI's error line, the admin service's problem, the
    operator's condition).

    * ``name``: Kafka's error name (``kafka_error_name``); "" when confluent-kafka gave no
      ``KafkaError`` (then ``message`` is the exception's text);
    * ``message``: the error's text without librdkafka's generic prefix, ``generic`` whether it
      had one (then the text names nothing, and ``subject`` should be named with it);
    * ``text``: librdkafka's own text, prefix and all;
    * ``subject``: what the call was about (``topic 'x'``, ``the cluster at host:9092``); ""
      when ``message`` is Strata's own and names it (``topic 'x' does not exist``);
    * ``api``: the Kafka request (``Metadata``, ``CreateTopics``...), "" when not a request;
    * ``unreachable``: no broker answered (Metadata failed with a transport, time-out, resolve
      or all-brokers-down error);
    * ``reason``: for a failed Metadata request, librdkafka's last ``error_cb`` report (a
      refused connection, a failed SASL login), None when it reported nothing;
    * ``bootstrap``, ``timeout_s``: where the client looked and how long it waited, when the
      failure is about waiting (``unreachable``, ``timed_out``);
    * ``timed_out``: no answer within the caller's bound (``timeout_s`` plus a grace); then
      ``name`` is ``_TIMED_OUT`` and ``message`` says what was waited for and how long.
    """

    def __init__(self, name: str, message: str, *, subject: str, api: str = "",
                 generic: bool = False, text: str | None = None, unreachable: bool = False,
                 reason: str | None = None, timed_out: bool = False, bootstrap: str = "",
                 timeout_s: float = 0.0) -> None:
        super().__init__(f"{name or 'KAFKA_ERROR'}: {subject}: {message}")
        self.name = name
        self.message = message
        self.generic = generic
        self.text = message if text is None else text
        self.subject = subject
        self.api = api
        self.unreachable = unreachable
        self.reason = reason
        self.timed_out = timed_out
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s

    @classmethod
    def of(cls, cause: KafkaError | KafkaException, subject: str, api: str = "",
           ) -> KafkaClientError:
        """The error a failed call about ``subject`` reported (an exception or a per-item
        ``KafkaError``)."""
        error = kafka_error_of(cause) if isinstance(cause, KafkaException) else cause
        if error is None:
            return cls("", str(cause), subject=subject, api=api)
        message, generic = error_text(error)
        return cls(kafka_error_name(error), message, subject=subject, api=api,
                   generic=generic, text=str(error.str()))

    @classmethod
    def unknown_topic(cls, topic: str, api: str = "Metadata") -> KafkaClientError:
        """UNKNOWN_TOPIC_OR_PARTITION for a topic the cluster does not have."""
        return cls("UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} does not exist",
                   subject="", api=api)
