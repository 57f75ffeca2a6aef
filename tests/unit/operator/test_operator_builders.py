"""The pure builders: every object a Broker owns passes ``kubernetes-validate --strict`` for the
pinned Kubernetes version, and carries what the design promises (OnDelete, rack, PDB, hash)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from strata.operator import admin_service, builders
from strata.operator.etcd import build_etcd_objects
from strata.operator.model import BrokerNames, BrokerSpec

K8S_VERSION = "1.33.0"  # the oldest Kubernetes the chart supports (kubeVersion in Chart.yaml)

NAMES = BrokerNames("events", "kafka")
FULL = BrokerSpec.parse({
    "replicas": 3, "image": "strata:1.2.3", "resources": {"requests": {"cpu": "500m"}},
    "storage": {"size": "50Gi", "storageClassName": "fast", "deleteClaim": True},
    "config": {"num.partitions": 6, "auto.create.topics.enable": False, "node.id": 9},
    "rack": {"topologyKey": "topology.kubernetes.io/zone"},
    "metadata": {"managed": True, "managedReplicas": 3},
    "admin": {"enabled": True, "replicas": 2},
})
OWNER = {"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
         "metadata": {"name": "events", "uid": "1234"}}


def all_objects(spec: BrokerSpec) -> list[dict[str, Any]]:
    return builders.owned(builders.build_all(NAMES, spec), OWNER)


@pytest.mark.parametrize("spec", [FULL, BrokerSpec.parse({"metadata": {"etcd": {
    "endpoints": ["etcd-0:2379"]}}, "admin": {"enabled": False}, "metrics": {"enabled": False}})],
    ids=["all-features", "minimal"])
def test_every_built_object_is_valid_kubernetes(spec: BrokerSpec) -> None:
    objects = all_objects(spec)
    assert objects
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)  # raises when invalid


def test_owned_objects_carry_the_owner_reference_and_standard_labels() -> None:
    for obj in all_objects(FULL):
        assert obj["metadata"]["ownerReferences"] == [{
            "apiVersion": "strata.dev/v1beta1", "kind": "Broker", "name": "events",
            "uid": "1234", "controller": True, "blockOwnerDeletion": True}]
        assert obj["metadata"]["namespace"] == "kafka"
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "strata-operator"
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == "events"


def test_kinds_and_names() -> None:
    found = {(o["kind"], o["metadata"]["name"]) for o in all_objects(FULL)}
    assert found == {
        ("ConfigMap", "events-config"), ("Service", "events-brokers"),
        ("Service", "events-bootstrap"), ("StatefulSet", "events"),
        ("PodDisruptionBudget", "events"), ("Deployment", "events-admin"),
        ("Service", "events-admin"), ("Service", "events-etcd-peers"),
        ("Service", "events-etcd"), ("StatefulSet", "events-etcd"),
        ("PodDisruptionBudget", "events-etcd"),
    }


def test_stateful_set_rolls_by_operator_and_claims_storage() -> None:
    sts = builders.build_stateful_set(NAMES, FULL)
    spec = sts["spec"]
    assert spec["updateStrategy"] == {"type": "OnDelete"}
    assert spec["serviceName"] == "events-brokers"
    assert spec["replicas"] == 3
    claim = spec["volumeClaimTemplates"][0]["spec"]
    assert claim["resources"]["requests"]["storage"] == "50Gi"
    assert claim["storageClassName"] == "fast"
    assert spec["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"
    container = spec["template"]["spec"]["containers"][0]
    assert {"name": "STRATA_RACK_ENABLED", "value": "1"} in container["env"]
    assert container["resources"] == {"requests": {"cpu": "500m"}}
    assert spec["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    annotations = spec["template"]["metadata"]["annotations"]
    assert annotations[builders.CONFIG_HASH_ANNOTATION] == builders.config_hash(NAMES, FULL)
    assert builders.build_stateful_set(NAMES, FULL, replicas=5)["spec"]["replicas"] == 5


def test_config_hash_changes_with_config_and_image_only() -> None:
    base = builders.config_hash(NAMES, FULL)
    assert builders.config_hash(NAMES, FULL) == base
    more = BrokerSpec.parse({"metadata": {"managed": True}, "config": {"num.partitions": 7}})
    same = BrokerSpec.parse({"metadata": {"managed": True}, "config": {"num.partitions": 7},
                             "replicas": 5})
    assert builders.config_hash(NAMES, more) == builders.config_hash(NAMES, same)
    assert builders.config_hash(NAMES, more) != base
    newer = BrokerSpec.parse({"metadata": {"managed": True}, "config": {"num.partitions": 7},
                              "image": "strata:9"})
    assert builders.config_hash(NAMES, newer) != builders.config_hash(NAMES, more)


def test_broker_properties_keep_user_keys_but_operator_keys_win() -> None:
    properties = builders.broker_properties(NAMES, FULL)
    assert properties["num.partitions"] == "6"
    assert properties["auto.create.topics.enable"] == "false"
    assert "node.id" not in properties  # per pod, from the ordinal (entrypoint.sh)
    assert properties["listeners"] == "PLAINTEXT://0.0.0.0:9092"
    assert properties["http.port"] == "9404"
    assert properties["metadata.store"] == (
        "etcd://events-etcd-0.events-etcd-peers.kafka.svc:2379,"
        "events-etcd-1.events-etcd-peers.kafka.svc:2379,"
        "events-etcd-2.events-etcd-peers.kafka.svc:2379")


def test_pdb_allows_one_broker_down() -> None:
    pdb = builders.build_pdb(NAMES, FULL)
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == builders.selector_labels(NAMES, "broker")


def test_headless_service_publishes_not_ready_pods() -> None:
    service = builders.build_headless_service(NAMES, FULL)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True


def test_admin_runs_the_admin_command_against_the_bootstrap_service() -> None:
    deployment = admin_service.build_admin_deployment(NAMES, FULL)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["strata", "admin", "--bootstrap-servers",
                                    "events-bootstrap.kafka.svc:9092", "--host", "0.0.0.0",
                                    "--port", "8080"]
    assert deployment["spec"]["replicas"] == 2


def test_managed_etcd_is_a_static_cluster_of_stable_members() -> None:
    sts = next(o for o in build_etcd_objects(NAMES, FULL) if o["kind"] == "StatefulSet")
    script = sts["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert ("--initial-cluster=events-etcd-0=http://events-etcd-0.events-etcd-peers.kafka.svc"
            ":2380,") in script
    assert sts["spec"]["replicas"] == 3
