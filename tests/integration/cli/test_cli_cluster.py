"""``strata cluster status`` against a real broker: brokers, controller, partitions with
leader, replicas, ISR and high watermark; internal topics hidden unless asked for."""

from __future__ import annotations

import json

import pytest

from ..broker_process import BrokerProcess, free_port
from .conftest import StrataCli, run_strata

pytestmark = pytest.mark.integration


def test_status_shows_brokers_controller_and_partitions(strata_cli: StrataCli,
                                                        broker: BrokerProcess) -> None:
    strata_cli("topic", "create", "cs-orders", "--partitions", "2").ok()
    strata_cli("produce", "cs-orders", "--partition", "1", input="a\nb\nc\n").ok()
    [doc] = [json.loads(line) for line in
             strata_cli("cluster", "status", "--format", "json").ok().stdout.splitlines()]
    assert doc["controller"] == 1 and doc["cluster_id"]
    assert doc["brokers"] == [{"id": 1, "host": "127.0.0.1", "port": broker.port, "rack": None}]
    mine = [p for p in doc["partitions"] if p["topic"] == "cs-orders"]
    assert mine == [
        {"topic": "cs-orders", "partition": 0, "leader": 1, "replicas": [1], "isr": [1],
         "high_watermark": 0},
        {"topic": "cs-orders", "partition": 1, "leader": 1, "replicas": [1], "isr": [1],
         "high_watermark": 3},
    ]
    assert not any(p["topic"].startswith("__") for p in doc["partitions"])
    text = strata_cli("cluster", "status", "--topic", "cs-orders").ok().stdout.splitlines()
    assert text[0].endswith("1 brokers, controller 1, 2 partitions (0 under-replicated, "
                            "0 offline)"), text[0]
    assert ["cs-orders", "1", "1", "1", "1", "3", "ok"] in [line.split() for line in text]


def test_status_of_an_unreachable_cluster() -> None:
    result = run_strata("cluster", "status", "-b", f"127.0.0.1:{free_port()}", "--timeout", "2")
    assert result.returncode == 1 and result.stdout == ""
    assert result.error_lines[-1].startswith("strata cluster status: cannot reach a broker at")
