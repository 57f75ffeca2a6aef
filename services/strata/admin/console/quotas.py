"""``/console/quotas``: client quotas — list, set, remove (``kafka-configs.sh --entity-type
users|clients``), by calling the REST routes of ``strata.admin.routers.quotas`` themselves.

* ``GET /console/quotas``: every entity with quotas (``GET /v1/quotas``: DescribeClientQuotas);
* ``POST /console/quotas``: set one quota (``key`` = ``value``) of one entity (``PUT
  /v1/quotas``: AlterClientQuotas): a user and/or a client id, each by name or the type's
  default entity (``<default>``, Kafka's spelling). The broker's refusal (a fractional byte
  rate, an unknown key) is shown with Kafka's error name and message;
* ``POST /console/quotas/delete``: remove one quota of one entity.

Authorization: the REST routes' (Cluster DescribeConfigs to list, Cluster AlterConfigs to
change, as Kafka checks DescribeClientQuotas and AlterClientQuotas); the forms are shown only
with AlterConfigs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import ValidationError

from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute
from strata.admin.models import ClientQuota, QuotaAlteration, QuotaEntityPart
from strata.admin.problems import ProblemError
from strata.admin.routers.quotas import alter_quotas, list_quotas
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

DEFAULT: Final = "<default>"
KEYS: Final = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
               "controller_mutation_rate")  # Kafka's client quota keys


def entity_of(fields: dict[str, str]) -> list[QuotaEntityPart]:
    """The entity a form names: ``user`` and/or ``client_id``, ``<default>`` for the default."""
    parts = []
    for kind, field in (("user", "user"), ("client-id", "client_id")):
        name = fields.get(field, "").strip()
        if name:
            parts.append(QuotaEntityPart.model_validate(
                {"type": kind, "name": None if name == DEFAULT else name}))
    if not parts:
        raise ProblemError(422, "VALIDATION_ERROR",
                           f"give a user and/or a client id (or {DEFAULT})")
    return parts


def _value(fields: dict[str, str]) -> float:
    text = fields.get("value", "").strip()
    try:
        return float(text)
    except ValueError:
        raise ProblemError(422, "VALIDATION_ERROR", f"value: {text!r} is not a number"
                           ) from None


@dataclass(frozen=True, slots=True)
class QuotaRow:
    """One quota of one entity, as the table shows it and its remove form sends it back."""

    entity: str
    user: str | None  # the form's value: a name or ``<default>``; None: not in the entity
    client_id: str | None
    key: str
    value: float


def rows_of(quotas: list[ClientQuota]) -> list[QuotaRow]:
    out = []
    for quota in quotas:
        names = {p.type: p.name if p.name is not None else DEFAULT for p in quota.entity}
        for key, value in sorted(quota.quotas.items()):
            out.append(QuotaRow(_label(quota.entity), names.get("user"),
                                names.get("client-id"), key, value))
    return sorted(out, key=lambda r: (r.entity, r.key))


async def _render(console: ConsoleDep, error: ProblemError | None = None,
                  notice: str = "") -> Response:
    rows = rows_of(await list_quotas(console.gateway, console.access))
    may_alter = await console.access.allowed(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)
    return console.render("quotas.html", status=error.status if error is not None else 200,
                          rows=rows, may_alter=may_alter, error=error, notice=notice,
                          keys=KEYS, default=DEFAULT, section="security", tab="quotas")


@router.get("/quotas")
async def quotas(console: ConsoleDep) -> Response:
    return await _render(console)


def _label(entity: list[QuotaEntityPart]) -> str:
    return ", ".join(f"{p.type} {p.name if p.name is not None else DEFAULT}" for p in entity)


async def _alter(console: ConsoleDep, fields: dict[str, str], remove: bool) -> Response:
    await console.access.require(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)
    try:
        entity = entity_of(fields)
        key = fields.get("key", "")
        try:
            body = (QuotaAlteration(entity=entity, remove=[key]) if remove
                    else QuotaAlteration(entity=entity, set={key: _value(fields)}))
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else None
            where = ".".join(str(p) for p in first["loc"]) if first else "form"
            raise ProblemError(422, "VALIDATION_ERROR",
                               f"{where}: {first['msg'] if first else 'invalid'}") from None
        await alter_quotas(console.gateway, console.access, body)
    except ProblemError as exc:
        if exc.status >= 500 or exc.status == 403:
            raise
        return await _render(console, error=exc)
    what = f"{key} removed" if remove else f"{key} set to {fields.get('value', '').strip()}"
    return await _render(console, notice=f"{_label(entity)}: {what}")


@router.post("/quotas")
async def set_quota(console: ConsoleDep) -> Response:
    return await _alter(console, await console.form(), remove=False)


@router.post("/quotas/delete")
async def remove_quota(console: ConsoleDep) -> Response:
    return await _alter(console, await console.form(), remove=True)
