"""The console's own settings, read once from the environment of ``strata admin``.

* ``STRATA_CONSOLE_GRAFANA_URL``: the base URL of a Grafana that has Strata's dashboards
  (``charts/strata/files/dashboards/``, provisioned by the chart). Set, the console links each
  page to its dashboard (``grafana_link``), filtered to the topic or group shown. Unset: no
  links;
* ``STRATA_CONSOLE_SAMPLE_INTERVAL_S``: how often the console samples the brokers' metrics
  for its charts (default 5 s, at least 0.5 s).

Pure: ``from_env`` takes the mapping, so tests pass their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlencode

from strata.admin.console.sampler import DEFAULT_INTERVAL_S

GRAFANA_ENV: Final = "STRATA_CONSOLE_GRAFANA_URL"
INTERVAL_ENV: Final = "STRATA_CONSOLE_SAMPLE_INTERVAL_S"
MIN_INTERVAL_S: Final = 0.5
# The dashboards' uids (their JSON's "uid") by what they show.
DASHBOARDS: Final = {"cluster": "strata-cluster-overview", "topics": "strata-topics",
                     "groups": "strata-consumer-groups", "replication": "strata-replication"}


@dataclass(frozen=True, slots=True)
class ConsoleSettings:
    grafana_url: str | None = None
    sample_interval_s: float = DEFAULT_INTERVAL_S

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ConsoleSettings:
        grafana = env.get(GRAFANA_ENV, "").strip().rstrip("/") or None
        if grafana is not None and not grafana.startswith(("http://", "https://")):
            raise ValueError(f"{GRAFANA_ENV} must be an http:// or https:// URL, not {grafana!r}")
        text = env.get(INTERVAL_ENV, "").strip()
        try:
            interval = float(text) if text else DEFAULT_INTERVAL_S
        except ValueError:
            raise ValueError(f"{INTERVAL_ENV} must be a number of seconds, not {text!r}"
                             ) from None
        return cls(grafana, max(interval, MIN_INTERVAL_S))

    def grafana_link(self, dashboard: str, **variables: str) -> str | None:
        """The URL of one of Strata's dashboards with its ``var-*`` filters; None without a
        Grafana."""
        if self.grafana_url is None:
            return None
        query = urlencode({f"var-{k}": v for k, v in variables.items()})
        return f"{self.grafana_url}/d/{DASHBOARDS[dashboard]}" + (f"?{query}" if query else "")
