"""Placeholder: the security pages."""

from __future__ import annotations

from fastapi import APIRouter

from strata.admin.console.web import PREFIX, ConsoleRoute

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)
