"""``strata quotas`` against a real broker: set, describe, remove and refused changes."""

from __future__ import annotations

import json

import pytest

from .conftest import StrataCli

pytestmark = pytest.mark.integration


def _described(strata_cli: StrataCli, *args: str) -> list[dict[str, object]]:
    out = strata_cli("quotas", "describe", "--format", "json", *args).ok().stdout
    return [json.loads(line) for line in out.splitlines()]


def test_set_describe_and_remove(strata_cli: StrataCli) -> None:
    set_user = strata_cli("quotas", "alter", "--user", "cq-alice", "--add-config",
                          "producer_byte_rate=1048576,consumer_byte_rate=2097152").ok()
    assert set_user.stdout == "quotas of user=cq-alice changed\n"
    strata_cli("quotas", "alter", "--user", "cq-alice", "--client-default",
               "--add-config", "request_percentage=50").ok()
    assert _described(strata_cli, "--user", "cq-alice", "--strict") == [
        {"entity": "user=cq-alice", "key": "consumer_byte_rate", "value": 2097152.0},
        {"entity": "user=cq-alice", "key": "producer_byte_rate", "value": 1048576.0},
    ]
    assert {"entity": "client-id=<default>, user=cq-alice", "key": "request_percentage",
            "value": 50.0} in _described(strata_cli, "--user", "cq-alice")
    strata_cli("quotas", "alter", "--user", "cq-alice", "--delete-config",
               "consumer_byte_rate").ok()
    assert [r["key"] for r in _described(strata_cli, "--user", "cq-alice", "--strict")] == [
        "producer_byte_rate"]


def test_refusals_name_kafkas_error(strata_cli: StrataCli) -> None:
    fractional = strata_cli("quotas", "alter", "--client-id", "cq-app", "--add-config",
                            "producer_byte_rate=1.5")
    assert fractional.returncode == 1
    assert fractional.error_lines == [
        "strata quotas alter: INVALID_REQUEST: configuration producer_byte_rate must be a "
        "Long value"]
    dry = strata_cli("quotas", "alter", "--client-id", "cq-app", "--add-config",
                     "producer_byte_rate=100", "--validate-only").ok()
    assert dry.stdout == "quotas of client-id=cq-app would be changed\n"
    assert _described(strata_cli, "--client-id", "cq-app") == []
    no_entity = strata_cli("quotas", "alter", "--add-config", "producer_byte_rate=1")
    assert no_entity.returncode == 2 and "name the entity" in no_entity.stderr
    bad = strata_cli("quotas", "alter", "--user", "x", "--add-config", "producer_byte_rate")
    assert bad.returncode == 2 and "expected key=number" in bad.stderr
