"""JBOD through the real operator loop against the mock API server: a Broker with
``storage.type: jbod`` gets one claim per volume and broker (made by the stand-in StatefulSet
controller from the claim templates) and one ``log.dirs`` entry per volume; raising one
volume's size patches that volume's claims only, ``StorageResizing`` until they have grown."""

from __future__ import annotations

from typing import Any

import pytest

from strata.operator.kube import Kube

from .kube_mock import StatefulSetController
from .operator_process import OperatorProcess, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(90)]

NS = "jbod"


def volumes(second: str) -> list[dict[str, Any]]:
    return [{"id": 0, "size": "1Gi"}, {"id": 1, "size": second, "deleteClaim": True}]


def condition(kube: Kube, of_type: str) -> tuple[str | None, str | None]:
    for item in ((kube.read("Broker", NS, "jb") or {}).get("status") or {}).get(
            "conditions") or ():
        if item["type"] == of_type:
            return item["status"], item["reason"]
    return None, None


def claims(kube: Kube) -> dict[str, tuple[str, str]]:
    return {c["metadata"]["name"]: (c["spec"]["resources"]["requests"]["storage"],
                                    c["status"]["capacity"]["storage"])
            for c in kube.list("PersistentVolumeClaim", NS)}


def test_each_volume_is_a_claim_and_a_log_dir_and_grows_alone(
        kube: Kube, operator: OperatorProcess) -> None:
    kube.create({"apiVersion": "strata.dev/v1beta1", "kind": "Broker",
                 "metadata": {"name": "jb", "namespace": NS},
                 "spec": {"replicas": 2, "metadata": {"etcd": {"endpoints": ["etcd:2379"]}},
                          "admin": {"enabled": False},
                          "storage": {"type": "jbod", "volumes": volumes("1Gi")}}})
    controller = StatefulSetController(kube, NS)

    def started() -> bool:
        controller.sync()
        return condition(kube, "Ready") == ("True", "BrokersReady")

    wait_until(started, 30, "Ready", operator.log_tail)
    assert claims(kube) == {f"data-{v}-jb-{b}": ("1Gi", "1Gi") for v in (0, 1) for b in (0, 1)}
    properties = (kube.read("ConfigMap", NS, "jb-config") or {})["data"]["server.properties"]
    assert "log.dirs=/var/lib/strata/data-0/data,/var/lib/strata/data-1/data\n" in properties

    controller.expand_volumes = False
    kube.patch("Broker", NS, "jb", {"spec": {"storage": {"volumes": volumes("3Gi")}}})
    wait_until(lambda: condition(kube, "StorageResizing") == ("True", "VolumesResizing"), 30,
               "StorageResizing", operator.log_tail)
    assert claims(kube) == {"data-0-jb-0": ("1Gi", "1Gi"), "data-0-jb-1": ("1Gi", "1Gi"),
                            "data-1-jb-0": ("3Gi", "1Gi"), "data-1-jb-1": ("3Gi", "1Gi")}
    controller.expand_volumes = True

    def expanded() -> bool:
        controller.sync()
        return condition(kube, "StorageResizing") == ("False", "VolumesAtSize")

    wait_until(expanded, 30, "the volumes at size", operator.log_tail)
    # Volume 1 says deleteClaim and volume 0 does not: its claims are owned by the Broker.
    owned = {c["metadata"]["name"] for c in kube.list("PersistentVolumeClaim", NS)
             if c["metadata"].get("ownerReferences")}
    assert owned == {"data-1-jb-0", "data-1-jb-1"}
