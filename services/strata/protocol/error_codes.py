"""Kafka's error codes: the int16 ``error_code`` fields of every response.

Owns the code <-> name map. kio 0.6.5 ships a complete one (``kio.schema.errors.ErrorCode``:
every code from -1 UNKNOWN_SERVER_ERROR to 133, checked by a unit test), and kio's response
dataclasses are typed with it, so it is re-exported here rather than written again.

Naming: kio spells the members as Kafka's ``org.apache.kafka.common.protocol.Errors`` names in
lower case (``ErrorCode.unsupported_version`` is UNSUPPORTED_VERSION, 35; ``ErrorCode.none`` is
NONE, 0). ``kafka_error_name`` and ``error_code_for`` translate to and from Kafka's spelling, the
one logs, metrics labels and ``strata.storage.errors`` use. Each member also carries kio's
``retriable`` flag (Kafka's ``RetriableException`` subclasses).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "error_code_for", "kafka_error_name"]


def kafka_error_name(code: int) -> str:
    """Kafka's name of an error code (``35 -> "UNSUPPORTED_VERSION"``).

    An unknown code (a newer peer) gives ``"UNKNOWN_ERROR_CODE_<n>"`` instead of raising, so it
    can always be logged.
    """
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def error_code_for(kafka_name: str) -> ErrorCode:
    """The error code Kafka calls ``kafka_name`` (``"NOT_LEADER_OR_FOLLOWER" -> 6``).

    Raises ``KeyError`` for a name Kafka does not define.
    """
    return ErrorCode[kafka_name.lower()]
