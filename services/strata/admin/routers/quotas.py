"""``/v1/quotas``: client quotas per user and client id (DescribeClientQuotas and
AlterClientQuotas over the Kafka protocol, as ``kafka-configs.sh --entity-type users|clients``).

``GET /v1/quotas`` lists every entity with quotas, or those matching ``user`` / ``client_id``
/ ``ip`` (``user_default`` etc. for the default entities; ``strict`` for exactly those types).
``PUT /v1/quotas`` sets and removes quotas of one entity; the broker's refusal (an unknown
key, a fractional byte rate, a bad entity) is a 400 titled with Kafka's error name.
Authorization (authentication on): Cluster DescribeConfigs to read, AlterConfigs to change.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from strata.admin.models import ClientQuota, QuotaAlteration, QuotaEntityPart
from strata.admin.problems import ProblemError
from strata.admin.routers import PROBLEMS, AccessDep, GatewayDep
from strata.client.client_quotas import alter_client_quotas, describe_client_quotas
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix="/v1", tags=["quotas"], responses=PROBLEMS)


def _entity(pairs: list[tuple[str, str | None, bool]]) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for kind, name, default in pairs:
        if name is not None and default:
            raise ProblemError(400, "INVALID_REQUEST",
                               f"{kind} and its default exclude each other")
        if name is not None or default:
            out.append((kind, name))
    return out


def _quota(entity: list[tuple[str, str | None]], quotas: dict[str, float]) -> ClientQuota:
    return ClientQuota(entity=[QuotaEntityPart(type=kind, name=name)  # type: ignore[arg-type]
                               for kind, name in entity], quotas=quotas)


@router.get("/quotas", summary="Client quotas")
async def list_quotas(
    gateway: GatewayDep, access: AccessDep,
    user: Annotated[str | None, Query(min_length=1)] = None,
    user_default: bool = False,
    client_id: Annotated[str | None, Query(min_length=1)] = None,
    client_default: bool = False,
    ip: Annotated[str | None, Query(min_length=1)] = None,
    ip_default: bool = False,
    strict: bool = False,
) -> list[ClientQuota]:
    await access.require(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
    entity = _entity([("user", user, user_default), ("client-id", client_id, client_default),
                      ("ip", ip, ip_default)])
    found = await gateway.call(describe_client_quotas, entity, strict)
    return [_quota(matched, quotas) for matched, quotas in found]


@router.put("/quotas", summary="Set and remove quotas of one entity")
async def alter_quotas(gateway: GatewayDep, access: AccessDep,
                       body: QuotaAlteration) -> ClientQuota:
    await access.require(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)
    entity: list[tuple[str, str | None]] = [(p.type, p.name) for p in body.entity]
    await gateway.call(alter_client_quotas, entity, body.set, body.remove, body.validate_only)
    if body.validate_only:
        return _quota(entity, dict(body.set))
    found = await gateway.call(describe_client_quotas, entity, True)
    return _quota(entity, found[0][1] if found else {})
