"""Adding and removing a JBOD volume of a running Broker, against three real brokers with two
``log.dirs`` each (``a`` and ``b``) and the mock API server.

The Kafka side: the operator's drain passes (``volume_removal.drain``: DescribeLogDirs on
every broker, AlterReplicaLogDirs batches to the other dir) empty every ``b`` while an
acks=all producer keeps writing; every acknowledged record is read back, in order.

The Kubernetes side, through the real operator loop (its Kafka side this cluster): a volume
added re-creates the StatefulSet with one more claim template (the old one deleted with
``propagationPolicy: Orphan``: no pod deleted by it) and rolls the brokers onto the new
``log.dirs``; a volume set ``remove: true`` (with ``deleteClaim``) is drained first (no broker
holds a replica in ``/var/lib/strata/data-1/data`` here, so at once), then dropped the same
way, and its claims deleted once no pod mounts them. The pods here are kmock's stand-ins, so
the brokers themselves keep their log dirs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from strata.operator import log_dirs, volume_removal
from strata.operator.kube import Kube

from ..cluster.cluster_processes import (
    BackgroundProducer,
    ClusterProcesses,
    cluster_on,
    read_all,
)
from .kube_mock import KubeMock, StatefulSetController
from .operator_process import OperatorProcess, running_operator, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(120)]
NS = "jbod-live"

TOPIC = "on-two-disks"
PARTITIONS = 6


@pytest.fixture(scope="module")
def two_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    with cluster_on("sqlite", tmp_path_factory.mktemp("jbod-cluster"),
                    log_dir_names=("a", "b")) as cluster:
        yield cluster


def in_dir(cluster: ClusterProcesses, name: str) -> dict[int, set[tuple[str, int]]]:
    """broker -> replicas (current or future) in its dir ``name``, by DescribeLogDirs."""
    addresses = log_dirs.brokers(cluster.bootstrap, 5.0)
    out = {}
    for node, address in addresses.items():
        described = log_dirs.describe(address, 5.0)
        path = str((cluster.broker(node).data_dir / name).resolve())
        out[node] = set(described.current[path]) | set(described.future[path])
    return out


def test_every_replica_leaves_the_removed_dir_while_a_producer_writes(
        two_dirs: ClusterProcesses) -> None:
    two_dirs.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    before = in_dir(two_dirs, "b")
    assert all(before.values()), before  # new replicas spread over both dirs (fewest first)
    leaving = [str((b.data_dir / "b").resolve()) for b in two_dirs.brokers]
    with BackgroundProducer(two_dirs.bootstrap, TOPIC,
                            {"acks": "all", "enable.idempotence": True}) as producer:
        two_dirs.wait_for(lambda: producer.acked.count() >= 2000, "records acknowledged")
        outcomes: list[volume_removal.DrainOutcome] = []

        def drain_pass() -> bool:  # what each operator pass does
            outcome = volume_removal.drain(two_dirs.bootstrap, leaving, [0, 1, 2], 5.0,
                                           batch_size=2)
            outcomes.append(outcome)
            assert outcome.reason in (volume_removal.MOVING_REPLICAS,
                                      volume_removal.VOLUMES_REMOVED), outcome
            return outcome.drained

        two_dirs.wait_for(drain_pass, "every b dir empty", timeout=60)
        # One batch in flight per broker: at most 2 moves started per broker and pass.
        assert max(o.moved for o in outcomes) <= 6 and len(outcomes) > 2
        assert sum(o.moved for o in outcomes) == sum(len(r) for r in before.values())
        moved_at = producer.acked.count()
        two_dirs.wait_for(lambda: producer.acked.count() > moved_at + 100, "appends after it")
        acked = producer.stop()
    assert in_dir(two_dirs, "b") == {0: set(), 1: set(), 2: set()}
    assert all(len(r) == PARTITIONS for r in in_dir(two_dirs, "a").values())
    assert not acked.errors, acked.errors[:5]
    for partition in range(PARTITIONS):
        offsets = sorted(o for (p, o) in acked.records if p == partition)
        assert offsets == list(range(len(offsets))), f"an acknowledged offset of {partition}"
    total = len(acked.records)
    consumed = read_all(two_dirs.bootstrap, TOPIC, PARTITIONS, total)
    assert {(p, o): v for p, rows in consumed.items() for o, v in rows} == acked.records


@pytest.fixture(scope="module")
def operator(kube_mock: KubeMock, two_dirs: ClusterProcesses,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with running_operator(tmp_path_factory.mktemp("operator"), kube_mock.kubeconfig,
                          {"STRATA_OPERATOR_BOOTSTRAP_SERVERS": two_dirs.bootstrap}) as started:
        yield started


def condition(kube: Kube, of_type: str) -> tuple[str | None, str | None]:
    for item in ((kube.read("Broker", NS, "jv") or {}).get("status") or {}).get(
            "conditions") or ():
        if item["type"] == of_type:
            return item["status"], item["reason"]
    return None, None


def templates(kube: Kube) -> list[str]:
    sts = kube.read("StatefulSet", NS, "jv") or {}
    return [t["metadata"]["name"] for t in sts.get("spec", {}).get("volumeClaimTemplates", ())]


def log_dirs_of(kube: Kube) -> str:
    properties = (kube.read("ConfigMap", NS, "jv-config") or {})["data"]["server.properties"]
    return next(line for line in properties.splitlines() if line.startswith("log.dirs="))


def test_a_volume_is_added_then_removed_by_recreating_the_stateful_set(
        kube: Kube, kube_mock: KubeMock, operator: OperatorProcess) -> None:
    kube.create({"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
                 "metadata": {"name": "jv", "namespace": NS},
                 "spec": {"replicas": 3, "metadata": {"etcd": {"endpoints": ["etcd:2379"]}},
                          "admin": {"enabled": False},
                          "storage": {"type": "jbod", "volumes": [{"id": 0, "size": "1Gi"}]}}})
    controller = StatefulSetController(kube, NS)

    def settled() -> bool:
        controller.sync()
        return condition(kube, "Ready") == ("True", "BrokersReady")

    def pods() -> dict[str, str]:
        return {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.list("Pod", NS)}

    wait_until(settled, 30, "Ready", operator.log_tail)
    first = (kube.read("StatefulSet", NS, "jv") or {})["metadata"]["uid"]
    before = pods()

    kube.patch("Broker", NS, "jv", {"spec": {"storage": {"volumes": [
        {"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi", "deleteClaim": True}]}}})
    wait_until(lambda: templates(kube) == ["data-0", "data-1"], 30, "the new claim template",
               operator.log_tail)
    assert (kube.read("StatefulSet", NS, "jv") or {})["metadata"]["uid"] != first
    # The orphaning delete removed no pod: the roll replaces them one at a time, later.
    assert len(set(before.items()) & set(pods().items())) >= 2
    assert log_dirs_of(kube) == ("log.dirs=/var/lib/strata/data-0/data,"
                                 "/var/lib/strata/data-1/data")

    def rolled() -> bool:
        return settled() and not set(before.items()) & set(pods().items())

    wait_until(rolled, 40, "every broker rolled onto the new log.dirs", operator.log_tail)
    claims = {c["metadata"]["name"] for c in kube.list("PersistentVolumeClaim", NS)}
    assert {f"data-1-jv-{i}" for i in range(3)} <= claims

    kube.patch("Broker", NS, "jv", {"spec": {"storage": {"volumes": [
        {"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi", "deleteClaim": True,
                                   "remove": True}]}}})
    wait_until(lambda: templates(kube) == ["data-0"], 30, "the claim template dropped",
               operator.log_tail)
    assert log_dirs_of(kube) == "log.dirs=/var/lib/strata/data-0/data"

    def removed() -> bool:
        claims = {c["metadata"]["name"] for c in kube.list("PersistentVolumeClaim", NS)}
        return settled() and not any(c.startswith("data-1-") for c in claims)

    wait_until(removed, 40, "the removed volume's claims deleted", operator.log_tail)
    assert condition(kube, "VolumeRemoving") == ("False", "VolumesRemoved")
    assert kube_mock.server is not None  # both re-creations orphaned the pods
    assert [d for d in kube_mock.server.deletions if d[0] == "statefulsets"] == [
        ("statefulsets", "jv", "Orphan")] * 2
    assert {c["metadata"]["name"] for c in kube.list("PersistentVolumeClaim", NS)} == {
        f"data-0-jv-{i}" for i in range(3)}
