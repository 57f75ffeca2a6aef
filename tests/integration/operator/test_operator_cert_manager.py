"""cert-manager mode through the real operator loop against the mock API server: a Broker with
``tls.certManager.issuerRef`` gets a ``cert-manager.io/v1`` Certificate (valid against our
schema of cert-manager's fields) and no operator-made CA; the brokers mount the Certificate's
Secret, and when cert-manager (played by the test) writes or renews it, the brokers roll."""

from __future__ import annotations

import base64

import jsonschema
import pytest

from strata.operator.builders import CONFIG_HASH_ANNOTATION
from strata.operator.cert_manager import CERTIFICATE_SCHEMA
from strata.operator.kube import Kube

from .kube_mock import StatefulSetController
from .operator_process import OperatorProcess, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(90)]

NS = "cm"


def template_hash(kube: Kube) -> str:
    sts = kube.read("StatefulSet", NS, "cm") or {}
    return str(((sts.get("spec") or {}).get("template") or {}).get("metadata", {}).get(
        "annotations", {}).get(CONFIG_HASH_ANNOTATION, ""))


def issue(kube: Kube, cert: str) -> None:
    """What cert-manager does: the Certificate's Secret, cert-manager's layout."""
    data = {k: base64.b64encode(v.encode()).decode()
            for k, v in {"tls.crt": cert, "tls.key": "KEY", "ca.crt": "CA"}.items()}
    if kube.read("Secret", NS, "cm-broker-certs") is None:
        kube.create({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                     "metadata": {"name": "cm-broker-certs", "namespace": NS}, "data": data})
    else:
        kube.patch("Secret", NS, "cm-broker-certs", {"data": data})


def test_a_certificate_is_requested_and_its_secret_rolls_the_brokers(
        kube: Kube, operator: OperatorProcess) -> None:
    kube.create({"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
                 "metadata": {"name": "cm", "namespace": NS},
                 "spec": {"replicas": 1, "metadata": {"etcd": {"endpoints": ["etcd:2379"]}},
                          "admin": {"enabled": False},
                          "listeners": {"plaintext": {"port": 9092},
                                        "tls": {"port": 9093, "tls": True}},
                          "tls": {"certManager": {"issuerRef": {"name": "ca-issuer"}}}}})
    certificate = wait_until(lambda: kube.read("Certificate", NS, "cm-broker-certs"), 30,
                             "the Certificate", operator.log_tail)
    jsonschema.validate({k: certificate[k] for k in ("apiVersion", "kind", "metadata", "spec")},
                        CERTIFICATE_SCHEMA)
    assert certificate["spec"]["issuerRef"]["name"] == "ca-issuer"
    assert "*.cm-brokers.cm.svc" in certificate["spec"]["dnsNames"]
    assert certificate["metadata"]["ownerReferences"][0]["name"] == "cm"
    assert kube.read("Secret", NS, "cm-cluster-ca") is None  # cert-manager's job, not ours
    sts = wait_until(lambda: kube.read("StatefulSet", NS, "cm"), 30, "the StatefulSet",
                     operator.log_tail)
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "cm-broker-certs"

    controller = StatefulSetController(kube, NS)
    before = template_hash(kube)
    issue(kube, "CERT-1")
    wait_until(lambda: template_hash(kube) != before, 30, "a new hash once issued",
               operator.log_tail)
    controller.sync()
    issued = template_hash(kube)
    issue(kube, "CERT-2")  # renewed

    def rolled() -> bool:
        controller.sync()
        pod = kube.read("Pod", NS, "cm-0") or {}
        current = pod.get("metadata", {}).get("annotations", {}).get(CONFIG_HASH_ANNOTATION)
        return template_hash(kube) != issued and current == template_hash(kube)

    wait_until(rolled, 30, "the broker rolled onto the renewed certificate", operator.log_tail)
    assert controller.created.count("cm-0") == 2
