"""The Grafana dashboards (charts/strata/files/dashboards) as their tests read them.

Owns the parts of Grafana's model the tests need: every panel's PromQL targets, the template
variables (namespace → cluster → broker → topic [→ group]) and their substitution the way
Grafana does it (``$var`` / ``${var}``, ``$__rate_interval``), and the metric names a query
names (``strata_*``, with histogram/counter sample suffixes mapped to their family).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

DASHBOARDS: Final = (Path(__file__).resolve().parents[3] / "charts" / "strata" / "files"
                     / "dashboards")
FILTERS: Final = ("namespace", "cluster", "broker", "topic")
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")
_METRIC = re.compile(r"\bstrata_[a-z0-9_]+")
_SUFFIXES: Final = ("_bucket", "_count", "_sum", "_total", "_created")


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel: str
    ref_id: str
    expr: str


def load() -> dict[str, dict[str, Any]]:
    """Every dashboard by file name."""
    return {path.name: json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(DASHBOARDS.glob("*.json"))}


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows included (rows themselves left out)."""
    found: list[dict[str, Any]] = []
    for panel in board.get("panels", []):
        if panel.get("type") == "row":
            found += panel.get("panels", [])
        else:
            found.append(panel)
    return found


def queries(boards: dict[str, dict[str, Any]]) -> list[Query]:
    return [Query(name, panel["title"], target["refId"], target["expr"])
            for name, board in boards.items() for panel in panels(board)
            for target in panel.get("targets", [])]


def variables(board: dict[str, Any]) -> list[dict[str, Any]]:
    return list(board.get("templating", {}).get("list", []))


def substitute(expr: str, values: dict[str, str], rate_interval: str) -> str:
    """``expr`` with Grafana's variables replaced; an unknown variable is an error."""
    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name == "__rate_interval":
            return rate_interval
        if name not in values:
            raise KeyError(f"unknown variable ${name} in {expr!r}")
        return values[name]

    return _VARIABLE.sub(replace, expr)


def metric_names(expr: str) -> set[str]:
    """The ``strata_*`` series ``expr`` names, as sample names (``..._bucket``)."""
    return set(_METRIC.findall(expr))


def family_of(sample: str, families: set[str]) -> str | None:
    """The family a sample name belongs to (``x_bucket`` → ``x``), if it is one of ``families``."""
    if sample in families:
        return sample
    for suffix in _SUFFIXES:
        if sample.endswith(suffix) and sample[: -len(suffix)] in families:
            return sample[: -len(suffix)]
    return None
