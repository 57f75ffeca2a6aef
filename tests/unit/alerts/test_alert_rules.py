"""The alert rules (charts/strata/files/alerts): valid for Prometheus, behaving as their unit
tests say under ``promtool test rules``, and naming only series the brokers export."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from strata.broker.metrics.broker_metrics import BrokerMetrics

ALERTS = Path(__file__).resolve().parents[3] / "charts" / "strata" / "files" / "alerts"
RULES = ALERTS / "strata-alerts.yaml"


def promtool() -> str:
    found = shutil.which("promtool")
    assert found is not None, "promtool is missing: `make test` installs Debian's prometheus"
    return found


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], cwd=ALERTS, capture_output=True, text=True,
                          timeout=60, check=False)


def test_rules_are_valid() -> None:
    checked = run("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "5 rules found" in checked.stdout


def test_rules_fire_as_their_tests_say() -> None:
    tested = run("test", "rules", "strata-alerts.test.yaml")
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_rules_name_only_exported_series() -> None:
    metrics = BrokerMetrics([0], list, lambda _t, _p: None, list)
    exported = set(re.findall(r"^# TYPE (\w+) ", metrics.exposition().decode(), re.M))
    exported |= {f"{name}_total" for name in exported}
    named = set(re.findall(r"\bstrata_\w+", RULES.read_text()))
    assert named and named <= exported, f"not exported by any broker: {named - exported}"
