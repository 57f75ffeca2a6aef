"""ListPartitionReassignments and AlterPartitionReassignments (KIP-455) over the Kafka protocol.

librdkafka has no call for these two APIs, so they are sent with ``bootstrap_request`` to the
first broker that answers (``QuotaTarget``: bootstrap, security, timeout, client id). Owns
their request shapes and the reading of their answers: a refusal of the request or of the
partition is a ``KafkaClientError`` with Kafka's error name and message. Used by the console's
reassignment page through the admin service's gateway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from strata.client.bootstrap_request import bootstrap_request
from strata.client.client_quotas import QuotaTarget
from strata.client.kafka_errors import KafkaClientError
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import kafka_error_name

TIMEOUT_MS: Final = 30_000


@dataclass(frozen=True, slots=True)
class Moving:
    """One partition being reassigned (ListPartitionReassignments)."""

    topic: str
    partition: int
    replicas: list[int]
    adding: list[int]
    removing: list[int]


def _refused(code: int, message: str | None, what: str) -> KafkaClientError:
    return KafkaClientError(kafka_error_name(code), message or what, subject="",
                            api="PartitionReassignments")


async def list_reassignments(target: QuotaTarget) -> list[Moving]:
    """Every reassignment in progress, by topic and partition."""
    response = await bootstrap_request(
        target.bootstrap, target.security, target.timeout_s, target.client_id,
        ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": TIMEOUT_MS, "topics": None})
    if int(response.error_code):
        raise _refused(int(response.error_code), response.error_message,
                       "the reassignments cannot be listed")
    rows = [Moving(t.name, int(p.partition_index), [int(r) for r in p.replicas],
                   [int(r) for r in p.adding_replicas], [int(r) for r in p.removing_replicas])
            for t in response.topics for p in t.partitions]
    return sorted(rows, key=lambda m: (m.topic, m.partition))


async def alter_reassignment(target: QuotaTarget, topic: str, partition: int,
                             replicas: list[int] | None) -> None:
    """Move one partition to ``replicas`` (None: cancel its move); Kafka's refusal of the
    request or of the partition is a ``KafkaClientError``."""
    response = await bootstrap_request(
        target.bootstrap, target.security, target.timeout_s, target.client_id,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0,
        {"timeout_ms": TIMEOUT_MS, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition,
                                            "replicas": replicas}]}]})
    if int(response.error_code):
        raise _refused(int(response.error_code), response.error_message,
                       "the reassignment was refused")
    for t in response.responses:
        for p in t.partitions:
            if int(p.error_code):
                raise _refused(int(p.error_code), p.error_message,
                               f"{topic}-{partition}: refused")
