"""``/console/groups``: consumer groups — list, detail with lag, reset offsets with a preview.

Each page is the REST route of the same action, rendered (``strata.admin.routers.groups``):

* ``GET /console/groups``: ListGroups — id, state, type; only groups the caller may Describe;
* ``GET /console/groups/{id}``: state, type (consumer or simple), group protocol (classic or
  consumer), assignor, coordinator, members and their assignment, and per partition the
  committed offset, log end offset and lag (log end - committed), with the total lag (the sum
  of the known lags, as ``strata groups describe`` prints) and its chart over time (the
  coordinator's ``strata_group_lag_records``, sampled by the console);
* ``POST /console/groups/{id}/reset``: ``earliest | latest | offset | timestamp`` for every
  partition the group has committed, or one topic's. With ``dry_run`` the page shows the
  offsets the reset would commit next to the current ones and commits nothing
  (``plan_reset``); without it the offsets are committed (``reset_offsets``, 409
  NON_EMPTY_GROUP while the group has active members, Kafka's rule);
* ``POST /console/groups/{id}/delete``: DeleteGroups (only an empty group: the coordinator
  answers NON_EMPTY_GROUP otherwise, shown on the page), then the list.

Authorization: describe needs Group Describe, reset Group Read (as OffsetCommit does),
delete Group Delete (the button is shown only with it).
"""

from __future__ import annotations

import asyncio
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from strata.admin.console.charts import sampler_of
from strata.admin.console.records import parse_timestamp
from strata.admin.console.settings import ConsoleSettings
from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute, int_field
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import (
    GroupDescription,
    GroupSummary,
    OffsetReset,
    ResetTarget,
    TopicSelection,
)
from strata.admin.problems import ProblemError
from strata.admin.routers.groups import _delete as delete_group
from strata.admin.routers.groups import describe_group, plan_reset, reset_offsets, summaries
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

GroupId = Annotated[str, Path(min_length=1, max_length=255)]


def total_lag(description: GroupDescription) -> int:
    return sum(row.lag for row in description.offsets if row.lag is not None)


def _list_groups(gateway: KafkaGateway) -> list[GroupSummary]:
    """ListGroups, as the REST route's list without its leading whole-cluster Metadata
    request (with 1,000 partitions that request alone costs a good part of the budget)."""
    return summaries(gateway.kafka.list_consumer_groups())


@router.get("/groups")
async def groups(console: ConsoleDep,
                 deleted: Annotated[str, Query(max_length=255)] = "") -> Response:
    rows = await console.gateway.run(_list_groups, console.gateway)
    visible = await console.allowed_names(AclOperation.DESCRIBE, ResourceType.GROUP,
                                          [row.group_id for row in rows])
    rows = [row for row in rows if row.group_id in visible]
    return console.render("groups.html", groups=rows, section="groups", deleted=deleted)


def group_kind(gateway: KafkaGateway, group_id: str) -> tuple[str, str]:
    """(type, group protocol) of a group: ``simple`` (offsets of ``assign()`` consumers only)
    or ``consumer``; ``classic`` or ``consumer`` (KIP-848), as DescribeGroups reports them."""
    found = gateway.kafka.describe_consumer_group(group_id, must_exist=False)
    protocol = getattr(found.type, "name", str(found.type)).lower()
    return ("simple" if found.is_simple_consumer_group else "consumer",
            protocol if protocol != "unknown" else "classic")


async def _render_group(console: ConsoleDep, group_id: str,
                        preview: dict[tuple[str, int], int] | None = None,
                        reset: OffsetReset | None = None, done: bool = False,
                        form: dict[str, str] | None = None,
                        error: ProblemError | None = None) -> Response:
    gateway = console.gateway
    description, (kind, protocol) = await asyncio.gather(
        gateway.run(describe_group, gateway, group_id, False),
        gateway.run(group_kind, gateway, group_id))
    sampler_of(console)  # the lag chart's series
    settings: ConsoleSettings = console.request.app.state.console_settings
    may_delete = await console.access.allowed(AclOperation.DELETE, ResourceType.GROUP,
                                              group_id)
    return console.render("group.html", status=error.status if error is not None else 200,
                          group=description, total_lag=total_lag(description),
                          preview=preview, reset=reset, done=done, section="groups",
                          form=form or {}, kind=kind, group_protocol=protocol,
                          may_delete=may_delete, error=error,
                          grafana=settings.grafana_link("groups", group=group_id),
                          targets=[t.value for t in ResetTarget])


@router.get("/groups/{group_id}")
async def group(console: ConsoleDep, group_id: GroupId) -> Response:
    await console.access.require(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
    return await _render_group(console, group_id)


def _reset_body(fields: dict[str, str]) -> OffsetReset:
    try:
        target = ResetTarget(fields.get("to", ""))
    except ValueError:
        raise ProblemError(422, "VALIDATION_ERROR",
                           f"to: one of {', '.join(t.value for t in ResetTarget)}") from None
    text = fields.get("value", "").strip()
    topic = fields.get("topic", "").strip()
    return OffsetReset(
        to=target,
        offset=int_field(fields, "value") if target is ResetTarget.OFFSET else None,
        timestamp=(parse_timestamp(text) if target is ResetTarget.TIMESTAMP and text
                   else None),
        topics=[TopicSelection(topic=topic, partitions=None)] if topic else None)


def _preview(gateway: KafkaGateway, group_id: str, body: OffsetReset
             ) -> dict[tuple[str, int], int]:
    plan, _ = plan_reset(gateway, group_id, body)
    return plan


@router.post("/groups/{group_id}/reset")
async def reset(console: ConsoleDep, group_id: GroupId) -> Response:
    fields = await console.form()
    await console.access.require(AclOperation.READ, ResourceType.GROUP, group_id)
    body = _reset_body(fields)
    if fields.get("dry_run"):
        preview = await console.gateway.run(_preview, console.gateway, group_id, body)
        return await _render_group(console, group_id, preview=preview, reset=body,
                                   form=fields)
    await console.gateway.run(reset_offsets, console.gateway, group_id, body)
    return await _render_group(console, group_id, reset=body, done=True, form=fields)


@router.post("/groups/{group_id}/delete")
async def delete(console: ConsoleDep, group_id: GroupId) -> Response:
    """DeleteGroups, as ``DELETE /v1/groups/{id}``: Group Delete; a group with members is
    refused by the coordinator (409 NON_EMPTY_GROUP), shown on the group's page."""
    await console.form()
    await console.access.require(AclOperation.DELETE, ResourceType.GROUP, group_id)
    try:
        await console.gateway.run(delete_group, console.gateway, group_id)
    except ProblemError as exc:
        if exc.status != 409:
            raise
        return await _render_group(console, group_id, error=exc)
    return console.redirect(f"{PREFIX}/groups?deleted={quote(group_id, safe='')}")
