"""The Helm chart: ``helm lint --strict`` and ``helm template`` with the default and the
all-features values (``charts/strata/ci``); every rendered object passes
``kubernetes-validate --strict`` for the pinned Kubernetes version, except our own CRs (checked
against our CRD schemas with jsonschema) and the Prometheus operator's kinds (shape only);
the CRDs themselves pass; monitoring objects appear only when the cluster has their CRDs;
``values.schema.json`` refuses bad values; every dashboard JSON becomes a sidecar ConfigMap."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from strata.operator import crds

from .deploy_tools import ROOT, helm

K8S_VERSION = "1.33.0"  # the chart's minimum (kubeVersion in Chart.yaml)
CHART = ROOT / "charts" / "strata"
ALL_FEATURES = CHART / "ci" / "all-features-values.yaml"
MONITORING = ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor",
              "--api-versions", "monitoring.coreos.com/v1/PrometheusRule",
              "--api-versions", "sparkoperator.k8s.io/v1beta2/SparkApplication"]


def run_helm(*args: str, chart: Path = CHART) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm(), *args, str(chart)], capture_output=True, text=True,
                          timeout=60, check=False)


def render(*args: str, chart: Path = CHART) -> list[dict[str, Any]]:
    done = subprocess.run([helm(), "template", "rel", str(chart), "--namespace", "strata",
                           "--kube-version", K8S_VERSION, *args],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def openapi_to_json_schema(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: openapi_to_json_schema(v) for k, v in node.items()
               if not k.startswith("x-kubernetes-")}
        if node.get("x-kubernetes-int-or-string"):
            out["type"] = ["integer", "string"]
        return out
    if isinstance(node, list):
        return [openapi_to_json_schema(v) for v in node]
    return node


def validate(obj: dict[str, Any]) -> None:
    if obj["apiVersion"] == "strata.dev/v1beta1":
        crd = crds.BROKER_CRD if obj["kind"] == "Broker" else crds.TOPIC_CRD
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        jsonschema.validate(obj, openapi_to_json_schema(schema))
    elif obj["apiVersion"] == "kopf.dev/v1":
        assert obj["kind"] in {"ClusterKopfPeering", "KopfPeering"} and obj["metadata"]["name"]
    elif obj["apiVersion"] == "monitoring.coreos.com/v1":
        assert obj["kind"] in {"ServiceMonitor", "PrometheusRule"}
        assert obj["metadata"]["name"] and obj["spec"]
    elif obj["apiVersion"] == "sparkoperator.k8s.io/v1beta2":
        assert obj["kind"] == "SparkApplication"
        assert obj["spec"]["type"] == "Python" and obj["spec"]["mainApplicationFile"]
    else:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


@pytest.mark.parametrize("values", [[], ["-f", str(ALL_FEATURES)]], ids=["default", "all"])
def test_helm_lint_strict(values: list[str]) -> None:
    done = run_helm("lint", "--strict", *values)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("values", [[], ["-f", str(ALL_FEATURES), *MONITORING]],
                         ids=["default", "all"])
def test_every_rendered_object_is_valid(values: list[str]) -> None:
    objects = render(*values)
    assert objects
    for obj in objects:
        validate(obj)
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == "rel"
        assert labels["helm.sh/chart"] == "strata-0.1.0"


def test_default_render_is_the_operator_and_dashboards_only() -> None:
    kinds = sorted(o["kind"] for o in render()
                   if o["metadata"]["labels"]["app.kubernetes.io/component"] != "dashboards")
    assert kinds == ["ClusterKopfPeering", "ClusterRole", "ClusterRoleBinding", "Deployment",
                     "Service", "ServiceAccount"]
    deployment = next(o for o in render() if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["kopf", "run", "--peering=rel-strata", "--all-namespaces",
                                    "--liveness=http://0.0.0.0:8080/healthz", "-m",
                                    "strata.operator.main"]
    assert container["image"] == "strata:0.1.0"
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_all_features_render() -> None:
    objects = render("-f", str(ALL_FEATURES), *MONITORING)
    kinds = sorted(o["kind"] for o in objects)
    assert kinds.count("ServiceMonitor") == 2
    assert kinds.count("PrometheusRule") == 1
    assert kinds.count("Topic") == 2
    broker = next(o for o in objects if o["kind"] == "Broker")
    assert broker["spec"]["metadata"] == {"etcd": {"endpoints": [
        "etcd-0.etcd:2379", "etcd-1.etcd:2379", "etcd-2.etcd:2379"]}}
    assert broker["spec"]["rack"] == {"topologyKey": "topology.kubernetes.io/zone"}
    assert broker["spec"]["users"] == [
        {"name": "audit", "mechanism": "SCRAM-SHA-256",
         "passwordSecret": {"name": "shared-passwords", "key": "audit"}},
        {"name": "orders-app", "mechanism": "SCRAM-SHA-512",
         "passwordSecret": {"name": "orders-app-password", "key": "password"}}]
    topic = next(o for o in objects if o["metadata"]["name"] == "audit-log")
    assert topic["spec"] == {"broker": "events", "topicName": "audit.log", "partitions": 3}
    command = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"][
        "spec"]["containers"][0]["command"]
    assert "--namespace=kafka" in command and "--namespace=apps" in command
    assert "--verbose" in command
    rule = next(o for o in objects if o["kind"] == "PrometheusRule")
    alerts = yaml.safe_load((CHART / "files" / "alerts" / "strata-alerts.yaml").read_text())
    assert rule["spec"] == alerts


def test_monitoring_objects_need_their_crds_in_the_cluster() -> None:
    kinds = {o["kind"] for o in render("-f", str(ALL_FEATURES))}
    assert "ServiceMonitor" not in kinds and "PrometheusRule" not in kinds
    assert "SparkApplication" not in kinds


def test_spark_pipeline_application() -> None:
    objects = render("-f", str(ALL_FEATURES), *MONITORING)
    (app,) = [o for o in objects if o["kind"] == "SparkApplication"]
    spec = app["spec"]
    assert spec["image"] == "registry.example.com/strata:0.1.0-spark"
    assert spec["mainApplicationFile"].endswith("/strata/spark/pipelines/windowed_counts.py")
    args = spec["arguments"]
    assert args[args.index("--bootstrap-servers") + 1] == "events-kafka-bootstrap.kafka:9092"
    assert spec["driver"]["env"] == [{"name": "PYSPARK_PYTHON",
                                      "value": "/opt/strata/bin/python"}]
    assert spec["executor"]["instances"] == 2


def test_crds_are_valid_kubernetes() -> None:
    for path in sorted((CHART / "crds").glob("*.yaml")):
        kubernetes_validate.validate(yaml.safe_load(path.read_text()), K8S_VERSION, strict=True)


@pytest.mark.parametrize("bad", ["operator.logLevel=loud", "broker.replicas=-1",
                                 "metrics.port=0", "unknownKey=1",
                                 "broker.users.app.mechanism=SCRAM-SHA-256",
                                 "broker.users.app.passwordSecret.name=s,"
                                 "broker.users.app.mechanism=PLAIN"])
def test_values_schema_rejects_bad_values(bad: str) -> None:
    done = subprocess.run([helm(), "template", "rel", str(CHART), "--set", bad],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr


def test_every_dashboard_json_ships_as_a_sidecar_configmap(tmp_path: Path) -> None:
    chart = tmp_path / "strata"
    shutil.copytree(CHART, chart)
    dashboards = chart / "files" / "dashboards"
    dashboards.mkdir(parents=True, exist_ok=True)
    shipped = sorted(p.name for p in dashboards.glob("*.json"))
    (dashboards / "zz-test-board.json").write_text(json.dumps({"title": "Test board"}))
    maps = [o for o in render(chart=chart) if o["kind"] == "ConfigMap"]
    assert sorted(k for m in maps for k in m["data"]) == [*shipped, "zz-test-board.json"]
    board = next(m for m in maps if "zz-test-board.json" in m["data"])
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(board["data"]["zz-test-board.json"]) == {"title": "Test board"}
    for config_map in maps:
        validate(config_map)
