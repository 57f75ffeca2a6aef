"""Client quotas over the Kafka protocol: DescribeClientQuotas and AlterClientQuotas v1.

Owns the requests Strata's tools (``strata quotas``, the admin API's ``/v1/quotas``) send for
quotas, which librdkafka has no call for, and their answers as plain values. An entity is a
list of (entity type, name) pairs: ``user``, ``client-id`` or ``ip``, a name of None for that
type's default entity. A broker's refusal is a ``KafkaClientError`` named as Kafka names the
error, with the broker's message; no broker answering is the unreachable one
(``bootstrap_request``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from strata.client.bootstrap_request import bootstrap_request
from strata.client.kafka_errors import KafkaClientError
from strata.client.security import ClientSecurity
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import kafka_error_name

MATCH_EXACT: Final = 0
MATCH_DEFAULT: Final = 1

Entity = list[tuple[str, str | None]]


@dataclass(frozen=True, slots=True)
class QuotaTarget:
    """Where and how to ask: the bootstrap list, the login, the bound, the client id."""

    bootstrap: str
    security: ClientSecurity | None
    timeout_s: float
    client_id: str


def _refused(code: int, message: str | None, what: str) -> KafkaClientError:
    return KafkaClientError(kafka_error_name(code), message or what, subject="",
                            api="ClientQuotas")


async def describe_client_quotas(target: QuotaTarget, entity: Entity, strict: bool
                                 ) -> list[tuple[Entity, dict[str, float]]]:
    """The entities matching ``entity`` (every one when empty; exactly its types when
    ``strict``) and their quotas."""
    components = [{"entity_type": kind, "match": name,
                   "match_type": MATCH_DEFAULT if name is None else MATCH_EXACT}
                  for kind, name in entity]
    response = await bootstrap_request(target.bootstrap, target.security, target.timeout_s,
                                       target.client_id, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1,
                                       {"components": components, "strict": strict})
    if int(response.error_code):
        raise _refused(int(response.error_code), response.error_message,
                       "the quotas cannot be described")
    return [([(e.entity_type, e.entity_name) for e in entry.entity],
             {v.key: v.value for v in entry.values}) for entry in response.entries or ()]


async def alter_client_quotas(target: QuotaTarget, entity: Entity,
                              set_quotas: Mapping[str, float], remove: Sequence[str],
                              validate_only: bool) -> None:
    """Set ``set_quotas`` and remove ``remove`` of one entity."""
    ops = [{"key": k, "value": float(v), "remove": False} for k, v in set_quotas.items()]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in remove]
    response = await bootstrap_request(
        target.bootstrap, target.security, target.timeout_s, target.client_id,
        ApiKey.ALTER_CLIENT_QUOTAS, 1,
        {"entries": [{"entity": [{"entity_type": kind, "entity_name": name}
                                 for kind, name in entity], "ops": ops}],
         "validate_only": validate_only})
    (result,) = response.entries
    if int(result.error_code):
        raise _refused(int(result.error_code), result.error_message, "the change was refused")
