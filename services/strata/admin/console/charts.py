"""``GET /console/series``: the sampled series as JSON, for the charts the pages draw.

``?key=cluster:bytes_in&key=group:billing:lag`` answers ``{"interval_s": 5.0, "series":
{key: [[t, value], ...]}}`` (``t`` in epoch seconds, oldest first; an unknown key: an empty
list), from the ``MetricsSampler``'s ``SeriesStore`` (``strata.admin.console.sampler``), which
the request starts if it was not running. The committed ``static/console.js`` polls it every
``interval_s`` and draws each ``<figure data-series=...>`` as an inline SVG line.

Authorization, by the key's kind, as the page showing it: ``cluster:``, ``broker:`` and
``logdir:`` need Cluster Describe; ``topic:<name>:`` Topic Describe; ``group:<id>:`` Group
Describe. A key of another kind is 422 VALIDATION_ERROR; at most ``MAX_KEYS`` keys.
"""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from strata.admin.console.sampler import MetricsSampler
from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute
from strata.admin.problems import ProblemError
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

MAX_KEYS: Final = 32
_CLUSTER_KINDS: Final = ("cluster", "broker", "logdir")


def resource_of(key: str) -> tuple[ResourceType, str]:
    """The resource whose Describe right a series key needs."""
    kind, _, rest = key.partition(":")
    if kind in _CLUSTER_KINDS and rest:
        return ResourceType.CLUSTER, "kafka-cluster"
    name, sep, _ = rest.rpartition(":")
    if kind == "topic" and sep and name:
        return ResourceType.TOPIC, name
    if kind == "group" and sep and name:
        return ResourceType.GROUP, name
    raise ProblemError(422, "VALIDATION_ERROR", f"key: {key!r} is not a console series")


def sampler_of(console: ConsoleDep) -> MetricsSampler:
    sampler: MetricsSampler = console.request.app.state.console_sampler
    sampler.ensure_started()
    return sampler


@router.get("/series")
async def series(console: ConsoleDep,
                 key: Annotated[list[str], Query()]) -> JSONResponse:
    if len(key) > MAX_KEYS:
        raise ProblemError(422, "VALIDATION_ERROR", f"key: at most {MAX_KEYS} series a request")
    for k in key:
        resource_type, name = resource_of(k)
        await console.access.require(AclOperation.DESCRIBE, resource_type, name)
    sampler = sampler_of(console)
    store = sampler.store
    return JSONResponse({"interval_s": sampler.interval_s,
                         "series": {k: store.points(k) for k in key}},
                        headers={"Cache-Control": "no-store"})
