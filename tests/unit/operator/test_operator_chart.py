"""The chart, safe by default (``helm template``, as ``tests/unit/deploy/test_chart.py``
renders it): listeners are a list an override replaces whole; an unauthenticated listener next
to secured ones is refused; the production values (TLS + SCRAM) render no plaintext listener
and name the secured one wherever a bootstrap address is rendered, by the operator's own rule;
the Spark job's default bootstrap is the Service the operator creates; with watchNamespaces
Secrets are readable only through per-namespace Roles; NetworkPolicies for brokers, admin and
etcd; several operator replicas elect a leader through kopf peering. Every object of the
default and production renders passes ``kubernetes-validate --strict`` for the chart's
oldest Kubernetes and the newest two minor versions the validator knows."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from strata.operator import crds
from strata.operator.model import BrokerNames, BrokerSpec

from ..deploy.deploy_tools import helm
from ..deploy.test_chart import ALL_FEATURES, CHART, render, validate
from .test_operator_crds import admitted

PRODUCTION = CHART / "ci" / "production-values.yaml"
SPARK = ["--api-versions", "sparkoperator.k8s.io/v1beta2/SparkApplication"]
NEWEST = ["1.36.0", "1.37.0"]


def values_file(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "values.yaml"
    path.write_text(text, encoding="utf-8")
    return ["-f", str(path)]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


@pytest.mark.parametrize("values", [[], ["-f", str(PRODUCTION)]], ids=["default", "production"])
def test_rendered_objects_are_valid_at_the_newest_kubernetes(values: list[str]) -> None:
    objects = render(*values, *SPARK)
    for obj in objects:
        validate(obj)  # the chart's oldest Kubernetes; our CRs against our CRDs
        if "." not in obj["apiVersion"].split("/")[0] or obj["apiVersion"].split("/")[0] in (
                "apps", "rbac.authorization.k8s.io", "networking.k8s.io"):
            for version in NEWEST:
                kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("values", [["-f", str(PRODUCTION)], ["-f", str(ALL_FEATURES)]],
                         ids=["production", "all"])
def test_rendered_brokers_and_topics_pass_the_crds_cel_rules(values: list[str]) -> None:
    for obj in render(*values):
        if obj["kind"] in ("Broker", "Topic"):
            crd = crds.BROKER_CRD if obj["kind"] == "Broker" else crds.TOPIC_CRD
            assert admitted(crd, obj, None) == [], obj["metadata"]["name"]


def test_production_values_render_no_plaintext_listener() -> None:
    objects = render("-f", str(PRODUCTION), *SPARK)
    broker = one(objects, "Broker")
    listeners = broker["spec"]["listeners"]
    assert sorted(listeners) == ["mtls", "secure"]
    assert all(lst["authentication"]["type"] != "none" for lst in listeners.values())
    spec = BrokerSpec.parse(broker["spec"])
    assert spec.bootstrap_listener.name == "secure"
    advertised = BrokerNames("events", "strata").bootstrap_servers(spec.bootstrap_listener.port)
    args = one(objects, "SparkApplication")["spec"]["arguments"]
    assert args[args.index("--bootstrap-servers") + 1] == advertised
    assert advertised == "events-bootstrap.strata.svc:9093"


def test_the_default_listener_is_replaced_by_an_override(tmp_path: Path) -> None:
    default = one(render("--set", "broker.create=true"), "Broker")
    assert default["spec"]["listeners"] == {"plaintext": {"port": 9092}}
    override = values_file(tmp_path, "broker:\n  create: true\n  listeners:\n"
                                     "    - {name: internal, port: 9095}\n")
    assert one(render(*override), "Broker")["spec"]["listeners"] == {"internal": {"port": 9095}}


def test_an_unauthenticated_listener_next_to_secured_ones_is_refused(tmp_path: Path) -> None:
    mixed = ("broker:\n  create: true\n  tlsSecretName: t\n  listeners:\n"
             "    - {name: plaintext, port: 9092}\n"
             "    - {name: secure, port: 9093, tls: true, "
             "authentication: {type: scram-sha-512}}\n")
    done = subprocess.run([helm(), "template", "rel", str(CHART),
                           *values_file(tmp_path, mixed)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert '"plaintext" lets clients in without authentication' in done.stderr
    allowed = one(render(*values_file(tmp_path, mixed + "  allowUnauthenticatedListeners: true\n")),
                  "Broker")
    # Allowed, the unauthenticated listener is still not what clients are told to use.
    assert BrokerSpec.parse(allowed["spec"]).bootstrap_listener.name == "secure"
    tls_only = ("broker:\n  create: true\n  tlsSecretName: t\n  listeners:\n"
                "    - {name: plaintext, port: 9092}\n    - {name: tls, port: 9093, tls: true}\n")
    refused = subprocess.run([helm(), "template", "rel", str(CHART),
                              *values_file(tmp_path, tls_only)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0


def test_spark_default_bootstrap_is_the_service_the_operator_creates() -> None:
    objects = render("--set", "broker.create=true,broker.name=events,sparkPipeline.enabled=true",
                     *SPARK)
    args = one(objects, "SparkApplication")["spec"]["arguments"]
    spec = BrokerSpec.parse(one(objects, "Broker")["spec"])
    assert args[args.index("--bootstrap-servers") + 1] == BrokerNames(
        "events", "strata").bootstrap_servers(spec.bootstrap_listener.port)


def test_watched_namespaces_get_roles_and_secrets_stay_namespaced() -> None:
    everywhere = render()
    cluster_role = one(everywhere, "ClusterRole")
    assert any("secrets" in r["resources"] for r in cluster_role["rules"])
    assert any("persistentvolumeclaims" in r["resources"] for r in cluster_role["rules"])
    assert not [o for o in everywhere if o["kind"] in ("Role", "RoleBinding")]
    scoped = render("--set", "operator.watchNamespaces={kafka,apps}")
    cluster_role = one(scoped, "ClusterRole")
    assert {res for r in cluster_role["rules"] for res in r["resources"]} == {
        "customresourcedefinitions", "namespaces", "nodes", "clusterkopfpeerings"}
    roles = {o["metadata"]["namespace"]: o for o in scoped if o["kind"] == "Role"}
    bindings = {o["metadata"]["namespace"]: o for o in scoped if o["kind"] == "RoleBinding"}
    assert sorted(roles) == sorted(bindings) == ["apps", "kafka"]
    for role in roles.values():
        assert any("secrets" in r["resources"] for r in role["rules"])
    assert bindings["kafka"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "rel-strata", "namespace": "strata"}]
    peerings = [o for o in scoped if o["kind"] == "KopfPeering"]
    assert sorted(p["metadata"]["namespace"] for p in peerings) == ["apps", "kafka"]


def test_network_policies_for_brokers_admin_and_etcd() -> None:
    policies = {o["metadata"]["name"]: o["spec"] for o in render("-f", str(PRODUCTION))
                if o["kind"] == "NetworkPolicy"}
    assert sorted(policies) == ["events-admin", "events-brokers", "events-etcd"]
    kafka_ports = {p["port"] for p in policies["events-brokers"]["ingress"][0]["ports"]}
    assert kafka_ports == {9093, 9094}
    etcd_from = [peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
                 for rule in policies["events-etcd"]["ingress"] for peer in rule["from"]]
    assert sorted(etcd_from) == ["admin", "broker", "etcd"]
    assert not [o for o in render("--set", "broker.create=true,networkPolicy.enabled=false")
                if o["kind"] == "NetworkPolicy"]


def test_operator_replicas_elect_a_leader_through_kopf_peering() -> None:
    deployment = one(render(), "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--peering=rel-strata" in command and "--standalone" not in command
    single = render("--set", "operator.replicas=1")
    assert not [o for o in single if o["kind"] == "ClusterKopfPeering"]
    deployment = one(single, "Deployment")
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    assert "--standalone" in deployment["spec"]["template"]["spec"]["containers"][0]["command"]


@pytest.mark.parametrize(("listeners", "chosen"), [
    ({}, "plaintext"),
    ({"plaintext": {"port": 9092}, "internal": {"port": 9000}}, "plaintext"),
    ({"internal": {"port": 9095}, "other": {"port": 9094}}, "other"),
    ({"plaintext": {"port": 9092},
      "secure": {"port": 9093, "tls": True, "authentication": {"type": "scram-sha-512"}},
      "mtls": {"port": 9091, "tls": True, "authentication": {"type": "tls"}}}, "mtls"),
])
def test_status_bootstrap_names_an_authenticating_listener(listeners: dict[str, Any],
                                                           chosen: str) -> None:
    spec = BrokerSpec.parse({"metadata": {"managed": True}, "tls": {"secretName": "t"},
                             **({"listeners": listeners} if listeners else {})})
    assert spec.bootstrap_listener.name == chosen


def test_users_have_rbac_everywhere_the_operator_watches() -> None:
    def grants(rules: list[dict[str, Any]]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for rule in rules:
            for resource in rule["resources"]:
                out.setdefault(resource, set()).update(rule["verbs"])
        return out

    for objects, kind in ((render(), "ClusterRole"),
                          (render("--set", "operator.watchNamespaces={kafka}"), "Role")):
        rules = grants(one(objects, kind)["rules"])
        assert {"get", "list", "watch", "patch"} <= rules["users"]
        assert "patch" in rules["users/status"]
        # A generated password: the Secret is created, and deleted with the User; operator-made
        # certificates: their Secrets are patched too; cert-manager Certificates applied.
        assert rules["secrets"] == {"get", "create", "patch", "delete"}
        assert rules["certificates"] == {"get", "create", "patch"}


@pytest.mark.parametrize("version", NEWEST)
def test_the_crds_are_valid_at_the_newest_kubernetes(version: str) -> None:
    for path in sorted((CHART / "crds").glob("*.yaml")):
        kubernetes_validate.validate(yaml.safe_load(path.read_text(encoding="utf-8")), version,
                                     strict=True)


def test_jbod_and_certificate_values_render_a_valid_broker(tmp_path: Path) -> None:
    values = values_file(tmp_path, """
broker:
  create: true
  jbodVolumes: [{id: 0, size: 100Gi}, {id: 1, size: 200Gi, deleteClaim: true}]
  listeners: [{name: secure, port: 9093, tls: true, authentication: {type: tls}}]
  tlsCertManagerIssuer: {name: cluster-issuer, kind: ClusterIssuer}
  tlsAlternativeNames: [kafka.example.com]
""")
    broker = one(render(*values), "Broker")
    validate(broker)
    assert admitted(crds.BROKER_CRD, broker, None) == []
    assert broker["spec"]["storage"]["type"] == "jbod"
    assert broker["spec"]["tls"] == {"certManager": {"issuerRef": {
        "name": "cluster-issuer", "kind": "ClusterIssuer"}},
        "alternativeNames": ["kafka.example.com"]}
    spec = BrokerSpec.parse(broker["spec"], "strata")
    assert [v.template for v in spec.storage.volumes] == ["data-0", "data-1"]
    assert spec.certificates.source == "cert-manager"
    # Neither an issuer nor a Secret: the operator makes the certificates.
    operator_made = one(render(*values_file(tmp_path, """
broker:
  create: true
  listeners: [{name: secure, port: 9093, tls: true, authentication: {type: tls}}]
""")), "Broker")
    assert "tls" not in operator_made["spec"]
    assert BrokerSpec.parse(operator_made["spec"], "strata").certificates.source == "operator"


def test_rebalances_have_rbac_everywhere_the_operator_watches() -> None:
    for objects, kind in ((render(), "ClusterRole"),
                          (render("--set", "operator.watchNamespaces={kafka}"), "Role")):
        rules = {r: set(rule["verbs"]) for rule in one(objects, kind)["rules"]
                 for r in rule["resources"] if "strata.dev" in rule["apiGroups"]}
        assert {"get", "list", "watch", "patch"} <= rules["rebalances"]
        assert "patch" in rules["rebalances/status"]
