"""The real operator loop against a real 3-broker Strata cluster (SQLite metadata store):

* a spec change rolls the broker pods one at a time, and holds while a partition is
  under-replicated because a follower is stopped (SIGSTOP), resuming after SIGCONT;
* a Topic's ``replicas`` 2 -> 3 -> 2 is carried out by reassignment, the Topic Ready with
  ``status.replicas`` as Kafka has it only once every partition has that many replicas, the
  move's replication throttles removed once no reassignment is in progress;
* a scale-down first moves the partitions off the leaving broker (AlterPartitionReassignments,
  carried out by the cluster's controller) and only then shrinks the StatefulSet; while the
  drain's batch is in flight its replication throttles are on the brokers and the topic
  (DescribeConfigs, at the operator's STRATA_OPERATOR_REBALANCE_THROTTLE), once it is done
  they are gone, and every record an acks=all producer had acknowledged meanwhile is read
  back.

The pods on kmock stand for the brokers: pod ``events-<n>`` is node ``n`` of the real cluster.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import ConfigResource

from strata.operator.kube import Kube

from ..cluster.cluster_processes import BackgroundProducer, ClusterProcesses, read_all
from .kube_mock import KubeMock, StatefulSetController
from .operator_process import OperatorProcess, running_operator, wait_until
from .test_broker_operator import NS, pod_hashes, ready_broker, ready_reason

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.slow,
              pytest.mark.timeout(180)]

THROTTLE = 8 * 1024 * 1024  # the operator's STRATA_OPERATOR_REBALANCE_THROTTLE here


@pytest.fixture(scope="module")
def operator(kube_mock: KubeMock, cluster: ClusterProcesses,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(tmp_path_factory.mktemp("operator"), kube_mock.kubeconfig,
                          {"STRATA_OPERATOR_BOOTSTRAP_SERVERS": cluster.bootstrap,
                           "STRATA_OPERATOR_REBALANCE_THROTTLE": str(THROTTLE)}) as started:
        yield started


@pytest.fixture(scope="module")
def pods(kube: Kube, operator: OperatorProcess) -> StatefulSetController:
    return ready_broker(kube, operator, 60)


def test_roll_holds_while_a_follower_is_stopped(
        kube: Kube, pods: StatefulSetController, operator: OperatorProcess,
        cluster: ClusterProcesses) -> None:
    cluster.create_topic("ledger", 1, 3)
    start = cluster.partition("ledger")
    assert start is not None
    follower = next(r for r in start.replicas if r != start.leader)
    pid = cluster.broker(follower).pid
    assert pid is not None
    old = pod_hashes(kube)
    os.kill(pid, signal.SIGSTOP)
    try:
        cluster.wait_for(lambda: (p := cluster.partition("ledger", via=start.leader))
                         is not None and follower not in p.isr, "the follower out of the ISR")
        kube.patch("Broker", NS, "events", {"spec": {"config": {"num.partitions": 4}}})
        wait_until(lambda: ready_reason(kube)[1] in ("UnderReplicatedPartitions",
                                                     "ClusterUnreachable"),
                   60, "the roll to hold", operator.log_tail)
        assert pod_hashes(kube) == old, "a pod was restarted with a partition under-replicated"
    finally:
        os.kill(pid, signal.SIGCONT)
    cluster.wait_for(lambda: (p := cluster.partition("ledger", via=start.leader)) is not None
                     and follower in p.isr, "the follower back in the ISR")
    restarted: list[str] = []

    def rolled() -> bool:
        pods.sync()
        for name, value in pod_hashes(kube).items():
            if value != old[name] and name not in restarted:
                restarted.append(name)
        return len(restarted) == 3

    wait_until(rolled, 90, "every pod restarted once the ISR is whole", operator.log_tail)
    assert restarted == ["events-2", "events-1", "events-0"]
    wait_until(lambda: ready_reason(kube) == ("True", "BrokersReady"), 60, "Ready again",
               operator.log_tail)
    # Three replicas cannot live on the two brokers the next test scales down to.
    cluster.admin().delete_topics(["ledger"])["ledger"].result(timeout=30)


def topic_state(kube: Kube, name: str) -> tuple[str | None, int | None]:
    status = (kube.read("Topic", NS, name) or {}).get("status") or {}
    reason = next((c["reason"] for c in status.get("conditions") or ()
                   if c["type"] == "Ready"), None)
    return reason, status.get("replicas")


def throttled_replicas(cluster: ClusterProcesses, topic: str) -> dict[str, str]:
    resource = ConfigResource("topic", topic)
    entries = cluster.admin().describe_configs([resource])[resource].result(timeout=30)
    return {name: entry.value for name, entry in entries.items()
            if name.endswith(".replication.throttled.replicas") and entry.value}


def test_topic_replication_factor_changes_by_reassignment(
        kube: Kube, pods: StatefulSetController, operator: OperatorProcess,
        cluster: ClusterProcesses) -> None:
    kube.create({"apiVersion": "strata.dev/v1beta1", "kind": "Topic",
                 "metadata": {"name": "rf", "namespace": NS},
                 "spec": {"broker": "events", "partitions": 2, "replicas": 2}})
    wait_until(lambda: topic_state(kube, "rf") == ("TopicReady", 2), 60, "the topic",
               operator.log_tail)
    for factor in (3, 2):
        kube.patch("Topic", NS, "rf", {"spec": {"replicas": factor}})
        cluster.wait_for(lambda f=factor: all(  # type: ignore[misc]  # default binds the loop
            (p := cluster.partition("rf", i)) is not None and len(p.replicas) == f
            for i in range(2)), f"every partition at {factor} replicas", 90)
        wait_until(lambda f=factor: topic_state(kube, "rf") == ("TopicReady", f), 60,
                   f"the Topic Ready at {factor} replicas", operator.log_tail)
        leaders = {p.leader for i in range(2) if (p := cluster.partition("rf", i)) is not None}
        assert leaders and leaders <= {0, 1, 2}
        # The move was throttled; once no reassignment is in progress the throttles go.
        wait_until(lambda: not throttled_replicas(cluster, "rf"), 60,
                   "the replication throttles of rf removed", operator.log_tail)
    log = operator.log_path.read_text(encoding="utf-8", errors="replace")
    assert log.count("topic 'rf': replication throttles removed") >= 2, log[-3000:]
    kube.delete("Topic", NS, "rf")
    wait_until(lambda: "rf" not in cluster.admin().list_topics(timeout=5).topics, 60,
               "the topic deleted", operator.log_tail)


def throttle_configs(cluster: ClusterProcesses, topic: str) -> dict[str, str]:
    """The replication throttles in force: ``<broker>/<rate config>`` of every broker and
    ``<topic>/<throttled-replicas config>`` (DescribeConfigs; Kafka's unthrottled default,
    Long.MAX_VALUE, does not count)."""
    found = {}
    for asked in [*(ConfigResource("broker", str(b)) for b in range(3)),
                  ConfigResource("topic", topic)]:
        (future,) = cluster.admin().describe_configs([asked]).values()
        for name, entry in future.result(timeout=30).items():
            if "replication.throttled" in name and entry.value not in (None, "", str(2**63 - 1)):
                found[f"{asked.name}/{name}"] = entry.value
    return found


def test_scale_down_moves_partitions_off_the_leaving_broker_first(
        kube: Kube, pods: StatefulSetController, operator: OperatorProcess,
        cluster: ClusterProcesses) -> None:
    cluster.create_topic("pinned", assignment=[[2]])  # lives on broker 2 only
    with BackgroundProducer(cluster.bootstrap, "pinned",
                            {"acks": "all", "enable.idempotence": True}) as producer:
        wait_until(lambda: producer.acked.count() > 200, 30, "records acknowledged")
        kube.patch("Broker", NS, "events", {"spec": {"replicas": 2}})

        def batch_throttled() -> tuple[dict[str, Any], dict[str, str]] | None:
            drain = ((kube.read("Broker", NS, "events") or {}).get("status") or {}).get(
                "scaleDown") or {}
            if not drain.get("inFlight") or not drain.get("throttle"):
                return None
            configs = throttle_configs(cluster, "pinned")
            return (drain, configs) if "pinned/leader.replication.throttled.replicas" in \
                configs else None

        # While the drain's batch is in flight its throttles are on the brokers and the topic.
        drain, configs = wait_until(batch_throttled, 60, "the drain batch throttled",
                                    operator.log_tail)
        assert drain["inFlight"][0]["topic"] == "pinned", drain
        (target,) = drain["inFlight"][0]["replicas"]
        assert target in (0, 1) and drain["throttle"]["rate"] == THROTTLE
        assert configs["pinned/leader.replication.throttled.replicas"] == "0:2"
        assert configs["pinned/follower.replication.throttled.replicas"] == f"0:{target}"
        for broker in (2, target):
            assert configs[f"{broker}/leader.replication.throttled.rate"] == str(THROTTLE)
            assert configs[f"{broker}/follower.replication.throttled.rate"] == str(THROTTLE)
        cluster.wait_for(lambda: (p := cluster.partition("pinned")) is not None
                         and 2 not in p.replicas and p.leader in (0, 1),
                         "the partition moved off broker 2 by the operator's reassignment", 90)
        wait_until(lambda: kube.read("StatefulSet", NS, "events")["spec"]["replicas"] == 2, 60,
                   "the StatefulSet to shrink once nothing lives on broker 2",
                   operator.log_tail)
        # The pass that found the batch done cleared its throttles before it shrank the set.
        assert not throttle_configs(cluster, "pinned"), "throttles left after the drain"
        wait_until(lambda: "scaleDown" not in (kube.read("Broker", NS, "events") or {}).get(
            "status", {}), 30, "status.scaleDown removed", operator.log_tail)
        written = producer.acked.count()
        wait_until(lambda: producer.acked.count() > written + 100, 30,
                   "records acknowledged after the drain")
        acked = producer.stop()
    reasons = [e["reason"] for e in kube.list("Event", NS)
               if e["involvedObject"]["name"] == "events"]
    assert "ReassigningPartitions" in reasons, reasons
    assert not acked.errors, acked.errors[:5]
    read = read_all(cluster.live_bootstrap(), "pinned", 1, acked.count())
    got = {(p, offset): value for p, records in read.items() for offset, value in records}
    missing = [key for key, value in acked.records.items() if got.get(key) != value]
    assert not missing, f"{len(missing)} acknowledged records not read back: {missing[:5]}"
