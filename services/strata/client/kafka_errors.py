"""Kafka's names for the errors confluent-kafka reports, for every confluent-kafka user alike.

Owns the one rule the CLI and the admin service both print errors by: a broker error code
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
