"""The dashboards' definitions: valid Grafana JSON with the datasource as a variable, the
namespace → cluster → broker → topic filters on every query, and only metrics the broker's
registry defines (a dashboard naming a series no broker exports fails here)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from prometheus_client.metrics_core import Metric

from strata.broker.metrics.broker_metrics import BrokerMetrics
from strata.broker.metrics.transaction_metrics import TransactionMetrics
from strata.broker.replication.replica_manager import ReplicaManager
from strata.broker.transaction.transaction_markers import TransactionMarkerBook
from strata.broker.transaction.transaction_state_manager import TransactionStateManager
from strata.storage.clock import SystemClock
from strata.storage.log_manager import LogManager

from .dashboard_queries import FILTERS, family_of, load, metric_names, panels, queries, variables

EXPECTED = {"strata-cluster-overview.json", "strata-topics.json", "strata-replication.json",
            "strata-consumer-groups.json"}


def exported_families(tmp_path: Path) -> dict[str, Metric]:
    """Every family a broker's registry exports, with the broker's real collaborators (a log
    manager, a replica manager hosting one partition) so scrape-time series are present."""
    log_manager = LogManager([tmp_path / "data"], {}, SystemClock(), cluster_id="c", node_id=1)
    log_manager.startup()
    replica_manager = ReplicaManager(log_manager, SystemClock(), node_id=1)
    metrics = BrokerMetrics([0, 1, 3], replica_manager.partitions,
                            replica_manager.get_partition, list)
    # The transaction coordinator's series (registered by the broker beside BrokerMetrics).
    runtime = SimpleNamespace(state_manager=TransactionStateManager(), clock=SystemClock(),
                              sender=SimpleNamespace(book=TransactionMarkerBook(),
                                                     leader_of=lambda tp: -1))
    TransactionMetrics(metrics.registry, runtime)  # type: ignore[arg-type]  # a stub runtime
    return {family.name: family for family in metrics.registry.collect()}


def test_the_four_dashboards_exist_and_are_distinct() -> None:
    boards = load()
    assert set(boards) == EXPECTED
    assert len({b["uid"] for b in boards.values()}) == len(boards)
    for name, board in boards.items():
        assert board["title"].startswith("Strata / "), name
        assert "strata" in board["tags"]
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), f"{name}: duplicate panel ids"


def test_datasource_is_a_variable_and_filters_chain(tmp_path: Path) -> None:
    for name, board in load().items():
        listed = variables(board)
        names = [v["name"] for v in listed]
        assert names[0] == "datasource" and listed[0]["type"] == "datasource", name
        assert listed[0]["query"] == "prometheus"
        assert names[1:5] == list(FILTERS), f"{name}: filters out of order: {names}"
        for earlier, variable in zip(FILTERS, listed[2:5], strict=False):
            assert f"${earlier}" in variable["definition"], (
                f"{name}: ${variable['name']} is not filtered by ${earlier}")
        for variable in listed[1:]:
            assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert variable["includeAll"] and variable["allValue"] == ".*"
        for panel in panels(board):
            assert panel["datasource"]["uid"] == "${datasource}", (name, panel["title"])
            assert panel["targets"], (name, panel["title"])
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "${datasource}"


def test_every_query_is_filtered() -> None:
    for query in queries(load()):
        for label, variable in (("namespace", "namespace"), ("cluster", "cluster"),
                                ("instance", "broker")):
            assert f'{label}=~"${variable}"' in query.expr, (
                f"{query.dashboard} / {query.panel}: no {label} filter: {query.expr}")


def test_dashboards_name_only_exported_metrics(tmp_path: Path) -> None:
    families = exported_families(tmp_path)
    named: dict[str, set[str]] = {}
    for query in queries(load()):
        for sample in metric_names(query.expr):
            named.setdefault(sample, set()).add(f"{query.dashboard} / {query.panel}")
    for board in load().values():
        for variable in variables(board)[1:]:
            for sample in metric_names(variable["definition"]):
                named.setdefault(sample, set()).add(f"variable ${variable['name']}")
    assert named
    unknown = {sample: where for sample, where in named.items()
               if family_of(sample, set(families)) is None}
    assert not unknown, f"named by dashboards but exported by no broker: {unknown}"
    for sample in named:
        family = families[family_of(sample, set(families)) or sample]
        if sample.endswith("_bucket"):
            assert family.type == "histogram", sample
        if sample.endswith("_total"):
            assert family.type == "counter", sample
