"""Every query of every panel of every dashboard returns data from a real Prometheus scraping a
real 3-broker cluster (replication factor 3) under produce / consume / consumer-group traffic.

Prometheus scrapes every second with the labels a Kubernetes scrape config adds (``namespace``,
``cluster``); the template variables are resolved as Grafana does — each variable's
``label_values`` query run against Prometheus with the variables before it substituted — and
every panel query is run twice: with every filter at "All" (``.*``) and with the values the
variable queries offered (the traffic's topic and group). Waits poll with deadlines. The
replicated topic gives followers' series (lag, ISR) and the controller panels a real source.
A ``client-metrics`` subscription and a producer and a consumer kept open for the module give
the client metrics row (KIP-714) the series their clients push. Two ``group.protocol=consumer``
members joining one after the other give the Rebalances row a reconciliation to time.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Final

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strata.client.bootstrap_request import bootstrap_request
from strata.protocol.api_keys import ApiKey

from ..cluster.cluster_processes import ClusterProcesses, cluster_on
from .dashboard_queries import Query, load, queries, substitute, variables
from .prometheus_process import PrometheusProcess, running_prometheus

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC: Final = "dash-orders"
GROUP: Final = "dash-app"
KIP848_GROUP: Final = "dash-kip848"
LABELS: Final = {"namespace": "ns-test", "cluster": "local"}
RATE_INTERVAL: Final = "5s"  # Grafana: max(4 x scrape interval, step); the scrape is 1 s
DEADLINE_S: Final = 60.0
_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.*),\s*(?P<label>\w+)\)$")


@pytest.fixture(scope="module")
def busy_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    """A 3-broker cluster (replication factor 3) with traffic: the healthy cluster every panel
    must show series for."""
    settings = {"log.flush.interval.ms": "200", "log.flush.scheduler.interval.ms": "200",
                "group.consumer.min.heartbeat.interval.ms": "500",
                "group.consumer.heartbeat.interval.ms": "500"}
    with cluster_on("sqlite", tmp_path_factory.mktemp("cluster"), 3, settings) as cluster:
        subscribe_every_client(cluster.bootstrap)
        traffic(cluster.bootstrap)
        with ThreadPoolExecutor(1) as pool:  # beside the pushing clients' setup: no slower
            rebalanced = pool.submit(kip848_rebalance, cluster.bootstrap)
            with pushing_clients(cluster.bootstrap):
                rebalanced.result(DEADLINE_S)
                yield cluster


def subscribe_every_client(bootstrap: str) -> None:
    """A ``client-metrics`` resource (type 16) subscribing every client to every metric, pushed
    each second (confluent-kafka's admin binding has no CLIENT_METRICS resource type)."""
    configs = [{"name": "metrics", "config_operation": 0, "value": "*"},
               {"name": "interval.ms", "config_operation": 0, "value": "1000"}]
    response = asyncio.run(bootstrap_request(
        bootstrap, None, 30, "dash-test", ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
        {"resources": [{"resource_type": 16, "resource_name": "dash-all", "configs": configs}],
         "validate_only": False}))
    assert [r.error_code for r in response.responses] == [0]


@contextmanager
def pushing_clients(bootstrap: str) -> Iterator[None]:
    """A producer and a consumer (its own group) that stay open, pushing their metrics."""
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "dash-producer"})
    producer.produce(TOPIC, b"telemetry")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dash-telemetry",
                         "client.id": "dash-consumer", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + DEADLINE_S
        message = None
        while message is None or message.error() is not None:
            assert time.monotonic() < deadline, "the telemetry consumer read nothing"
            message = consumer.poll(0.2)
        consumer.commit(asynchronous=False)
        yield
    finally:
        consumer.close()


def traffic(bootstrap: str) -> None:
    """A topic, 300 records, a consumer group that reads and commits part of them, and a
    committed and an aborted transaction."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(300):
        producer.produce(TOPIC, key=str(i).encode(), value=b"x" * 100)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    try:
        consumer.subscribe([TOPIC])
        read = 0
        deadline = time.monotonic() + DEADLINE_S
        while read < 200:
            assert time.monotonic() < deadline, f"consumed only {read} records"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                read += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": "dash-txn"})
    transactional.init_transactions(30)
    for commit in (True, False):  # the Transactions row: one commit, one abort
        transactional.begin_transaction()
        transactional.produce(TOPIC, b"txn")
        assert transactional.flush(30) == 0  # else librdkafka's abort sends no EndTxn
        (transactional.commit_transaction if commit else transactional.abort_transaction)(30)


def kip848_rebalance(bootstrap: str) -> None:
    """A consumer-protocol member takes every partition of the topic, a second joins: the first
    gives up partitions and reaches the new group epoch (one reconciliation observed)."""
    config = {"bootstrap.servers": bootstrap, "group.id": KIP848_GROUP,
              "group.protocol": "consumer", "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    first, second = Consumer(config), Consumer(config)
    try:
        first.subscribe([TOPIC])
        deadline = time.monotonic() + DEADLINE_S
        while len(first.assignment()) < 3:
            assert time.monotonic() < deadline, "the first KIP-848 member got no partitions"
            first.poll(0.1)
        second.subscribe([TOPIC])
        while not (first.assignment() and second.assignment()):
            assert time.monotonic() < deadline, "the KIP-848 members did not share the topic"
            first.poll(0.1)
            second.poll(0.1)
    finally:
        first.close()
        second.close()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory,
               busy_cluster: ClusterProcesses) -> Iterator[PrometheusProcess]:
    targets = [f"127.0.0.1:{b.http_port}" for b in busy_cluster.brokers]
    with running_prometheus(tmp_path_factory.mktemp("prometheus"), targets, LABELS) as server:
        deadline = time.monotonic() + DEADLINE_S
        ready = ("count_over_time(strata_replication_partitions[1m]) >= 3 and on() "
                 f'count(strata_group_lag_records{{group="{GROUP}"}}) > 0 and on() '
                 "sum(strata_group_reconciliation_seconds_count) > 0 and on() "
                 'sum(strata_group_rebalances_total{type="classic"}) > 0')
        while not server.query(ready):
            assert time.monotonic() < deadline, f"no scrapes in {DEADLINE_S}s\n{server.log_tail()}"
            time.sleep(0.2)
        yield server


def resolve(server: PrometheusProcess, board: dict[str, object]) -> dict[str, str]:
    """Each filter's value as Grafana would offer it: the variable's label_values query run with
    the earlier choices substituted; the traffic's topic and group where offered."""
    chosen: dict[str, str] = {}
    prefer = {"namespace": LABELS["namespace"], "cluster": LABELS["cluster"],
              "topic": TOPIC, "group": GROUP}
    for variable in variables(board)[1:]:  # [0] is the datasource
        match = _LABEL_VALUES.match(substitute(variable["definition"], chosen, RATE_INTERVAL))
        assert match, variable["definition"]
        offered = server.label_values(match["label"], match["selector"])
        name = variable["name"]
        assert offered, f"variable ${name} offers nothing ({variable['definition']})"
        if name == "broker":
            # In a cluster a group, a leader or a follower lives on some brokers only: the
            # specific choices below are made with every broker selected (Grafana's "All").
            assert len(offered) == 3, f"$broker offers {offered}, not the 3 brokers"
            chosen[name] = ".*"
            continue
        want = prefer.get(name, offered[0])
        assert want in offered, f"variable ${name} offers {offered}, not {want}"
        chosen[name] = regex_escape(want)
    return chosen


def regex_escape(value: str) -> str:
    """A value as Grafana puts it into a PromQL regex matcher: regex metacharacters escaped
    with a backslash that is itself escaped for the PromQL string."""
    return re.sub(r"([\\.^$*+?()\[\]{}|])", r"\\\\\1", value)


def test_every_panel_query_returns_series(prometheus: PrometheusProcess) -> None:
    boards = load()
    runs: list[tuple[Query, str]] = []
    for name, board in boards.items():
        every = {v["name"]: ".*" for v in variables(board)[1:]}
        chosen = resolve(prometheus, board)
        for query in queries({name: board}):
            runs.append((query, substitute(query.expr, every, RATE_INTERVAL)))
            runs.append((query, substitute(query.expr, chosen, RATE_INTERVAL)))
    assert len(runs) >= 2 * 40
    deadline = time.monotonic() + DEADLINE_S
    pending = runs
    while pending:
        pending = [(query, expr) for query, expr in pending if not prometheus.query(expr)]
        if pending and time.monotonic() > deadline:
            empty = "\n".join(f"{q.dashboard} / {q.panel} [{q.ref_id}]: {expr}"
                              for q, expr in pending)
            pytest.fail(f"{len(pending)} panel queries return no series:\n{empty}")
        if pending:
            time.sleep(0.5)
