"""AlterClientQuotas (key 49, v0-1; flexible from v1): set and remove client quotas (KIP-546).

What ``kafka-configs.sh --alter --entity-type users|clients --add-config
producer_byte_rate=...``, the Java admin client's ``alterClientQuotas``, kafka-python's
``alter_client_quotas`` and ``strata quotas set`` send. Per entry (an entity and its ops: a key
with a value, or ``remove``): validated and applied as Kafka's controller does
(``strata.broker.quotas.client_quotas``): INVALID_REQUEST with Kafka's message for an invalid
entity, an unknown key, a fractional value of a LONG key, a key twice in one entry, or an
entity twice in one request (then every entry for it is refused). ``validate_only`` checks
without storing. Valid entries are stored together (``BrokerQuotas.alter``: the metadata store
in one transaction, or ``client-quotas.json``) and the answer waits until this broker
enforces them.

Authorization: AlterConfigs on the Cluster, else CLUSTER_AUTHORIZATION_FAILED per entry.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.broker.quotas.client_quotas import Alteration, QuotaRequestError
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode, error_code_for
from strata.protocol.messages import build_response
from strata.security.acl import AclOperation, ResourceType


def _entity_key(entry: Any) -> tuple[tuple[str, str | None], ...]:
    """The entry's entity in a canonical order. A type may appear twice, once as the default
    (name None) and once named: refused later (``client_quotas``), but it must sort."""
    return tuple(sorted(((e.entity_type, e.entity_name) for e in entry.entity),
                        key=lambda pair: (pair[0], pair[1] is not None, pair[1] or "")))


def _precheck(entry: Any, duplicated: bool) -> QuotaRequestError | None:
    """Kafka's refusals that look at the request rather than the configuration."""
    if duplicated:
        return QuotaRequestError(f"Ignoring duplicate entity {dict(_entity_key(entry))}")
    keys = Counter(op.key for op in entry.ops)
    twice = sorted(key for key, count in keys.items() if count > 1)
    if twice:
        return QuotaRequestError(f"Duplicate quota key {twice[0]} not updating quota for this "
                                 f"entity {dict(_entity_key(entry))}")
    return None


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.header.api_version
    entries = list(request.entries)
    results: list[tuple[ErrorCode, str | None]]
    if not ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER):
        results = [(ErrorCode.cluster_authorization_failed,
                    "AlterConfigs on the cluster is required")] * len(entries)
    else:
        quotas = ctx.state.quotas
        assert quotas is not None, "KafkaServer.start opens the broker's quotas"
        seen = Counter(_entity_key(entry) for entry in entries)
        errors: list[QuotaRequestError | None] = [
            _precheck(entry, seen[_entity_key(entry)] > 1) for entry in entries]
        valid = [i for i, error in enumerate(errors) if error is None]
        alterations = [Alteration([(e.entity_type, e.entity_name) for e in entries[i].entity],
                                  {op.key: None if op.remove else op.value
                                   for op in entries[i].ops})
                       for i in valid]
        for i, error in zip(valid, await quotas.alter(alterations, bool(request.validate_only)),
                            strict=True):
            errors[i] = error
        results = [(ErrorCode.none, None) if error is None
                   else (error_code_for(error.error_name), str(error)) for error in errors]
    return build_response(ApiKey.ALTER_CLIENT_QUOTAS, version, throttle_time_ms=0, entries=[
        {"error_code": code, "error_message": message,
         "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                    for e in entry.entity]}
        for entry, (code, message) in zip(entries, results, strict=True)])
