"""A mock Kubernetes API (kmock's emulator) in a background thread, and the pieces a real
cluster would add that kmock does not: what the operator under test needs, nothing more.

``ApiServer`` subclasses kmock's ``KubernetesEmulator`` to stamp what an API server stamps
on writes: ``resourceVersion`` (kopf's finalizer patches need it), and on create ``uid``,
``creationTimestamp`` and ``generation`` (ownerReferences and observedGeneration need them);
``generation`` also moves when a write changes ``spec``. Resources are declared for discovery
(kopf looks up ``strata.dev/v1beta1``). kmock runs no controllers and ignores label selectors
(the operator filters labels itself); ``StatefulSetController.sync`` plays the StatefulSet
controller: it creates the missing pods of every StatefulSet from its template and marks them
Ready, one call at a time, driven by the test's polling loop; it also creates each pod's
claims from the claim templates (``<template>-<pod>``, ``status.capacity`` = the request) and,
while ``expand_volumes`` is set, plays the volume expansion controller: a claim whose request
was raised gets that capacity at the next call.

``KubeMock`` runs the server on its own event loop in a daemon thread (tests and the operator
talk to it over HTTP on 127.0.0.1) and writes a kubeconfig pointing at it.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import itertools
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kmock
import yaml

from strata.operator.kube import Kube

_counter = itertools.count(1)

RESOURCES: dict[str, dict[str, Any]] = {
    "strata.dev/v1beta1/brokers": {"kind": "Broker", "subresources": {"status", "scale"},
                                    "shortnames": {"sb"}},
    "strata.dev/v1beta1/topics": {"kind": "Topic", "subresources": {"status"},
                                   "shortnames": {"st"}},
    "strata.dev/v1beta1/users": {"kind": "User", "subresources": {"status"},
                                  "shortnames": {"su"}},
    "strata.dev/v1beta1/rebalances": {"kind": "Rebalance", "subresources": {"status"},
                                       "shortnames": {"srb"}},
    "v1/pods": {"kind": "Pod"}, "v1/configmaps": {"kind": "ConfigMap"},
    "v1/secrets": {"kind": "Secret"},
    "v1/persistentvolumeclaims": {"kind": "PersistentVolumeClaim", "subresources": {"status"}},
    "v1/services": {"kind": "Service"}, "v1/nodes": {"kind": "Node", "namespaced": False},
    "v1/events": {"kind": "Event"}, "apps/v1/statefulsets": {"kind": "StatefulSet"},
    "apps/v1/deployments": {"kind": "Deployment"},
    "policy/v1/poddisruptionbudgets": {"kind": "PodDisruptionBudget"},
    # kopf waits for these two in discovery before it watches anything (it lists neither
    # when it runs cluster-wide: listing namespaces is what crashes kmock).
    "v1/namespaces": {"kind": "Namespace", "namespaced": False},
    # kopf peering (operator replicas with --peering).
    "kopf.dev/v1/clusterkopfpeerings": {"kind": "ClusterKopfPeering", "namespaced": False},
    "kopf.dev/v1/kopfpeerings": {"kind": "KopfPeering"},
    "apiextensions.k8s.io/v1/customresourcedefinitions": {"kind": "CustomResourceDefinition",
                                                          "namespaced": False},
    # tls.certManager: the Broker's cert-manager Certificate (no cert-manager runs here).
    "cert-manager.io/v1/certificates": {"kind": "Certificate"},
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 merge patch of ``patch`` onto ``target`` (a new value; inputs untouched)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class ApiServer(kmock.KubernetesEmulator):
    """kmock's emulator plus the metadata a real API server stamps on writes; it runs no
    garbage collector, so each delete's ``propagationPolicy`` is only recorded
    (``deletions``: kind's plural, name, policy or None)."""

    deletions: list[tuple[str, str, str | None]]

    async def _handle(self, request: Any) -> Any:
        if request.action == kmock.action.DELETE and request.resource is not None:
            self.__dict__.setdefault("deletions", []).append(
                (request.resource.plural, request.name,
                 request.params.get("propagationPolicy")))
        data = request.data
        if request.resource is not None and isinstance(data, dict):
            meta = data.setdefault("metadata", {})
            if request.action == kmock.action.CREATE:
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", datetime.datetime.now(
                    tz=datetime.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"))
                meta.setdefault("generation", 1)
                meta.pop("deletionTimestamp", None)
            elif request.action == kmock.action.UPDATE and "spec" in data \
                    and request.subresource is None:
                key = (request.resource, request.namespace, request.name)
                if key in self.objects and not self.objects[key].deleted:
                    old = self.objects[key].raw
                    if merge_patch(old.get("spec"), data["spec"]) != old.get("spec"):
                        meta["generation"] = int(old.get("metadata", {}).get("generation", 1)) + 1
            meta["resourceVersion"] = str(next(_counter))
        return await super()._handle(request)


class KubeMock:
    """The API server on a private event loop in a daemon thread."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.kubeconfig = workdir / "kubeconfig"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kmock",
                                        daemon=True)
        self._stop: asyncio.Event | None = None
        self.url = ""
        self.server: ApiServer | None = None

    def _submit(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    async def _serve(self, started: Future[str]) -> None:
        self._stop = asyncio.Event()
        async with ApiServer() as server, kmock.Server(server) as http:
            self.server = server
            for key, info in RESOURCES.items():
                server.resources[key] = kmock.ResourceInfo(
                    namespaced=info.get("namespaced", True), kind=info["kind"],
                    verbs={"list", "watch", "get", "create", "patch", "delete"},
                    shortnames=info.get("shortnames", set()),
                    subresources=info.get("subresources", set()))
            started.set_result(str(http.url).rstrip("/"))
            await self._stop.wait()

    def start(self) -> None:
        self._thread.start()
        started: Future[str] = Future()
        self._serve_future = asyncio.run_coroutine_threadsafe(self._serve(started), self._loop)
        self.url = started.result(timeout=30)
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "kmock",
            "clusters": [{"name": "kmock", "cluster": {"server": self.url}}],
            "users": [{"name": "kmock", "user": {"token": "kmock"}}],
            "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "kmock"}}],
        }), encoding="utf-8")

    def stop(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._serve_future.result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    def client(self) -> Kube:
        """A ``Kube`` (the operator's own REST layer) talking to this server."""
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(config_file=str(self.kubeconfig),
                                client_configuration=configuration)
        return Kube(client.ApiClient(configuration))


@contextmanager
def running_kube_mock(workdir: Path) -> Iterator[KubeMock]:
    mock = KubeMock(workdir)
    mock.start()
    try:
        yield mock
    finally:
        mock.stop()


def ready_pod_status() -> dict[str, Any]:
    return {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


class StatefulSetController:
    """Plays the StatefulSet controller on kmock: missing pods are created from the template
    (name ``<sts>-<ordinal>``) and marked Ready. Pods the operator deleted are recreated from
    the current template, so they carry its config hash."""

    def __init__(self, kube: Kube, namespace: str, node_name: str | None = None) -> None:
        self.kube = kube
        self.namespace = namespace
        self.node_name = node_name
        self.created: list[str] = []
        self.expand_volumes = True

    def _claims(self, sts: dict[str, Any], pod_name: str) -> None:
        existing = {c["metadata"]["name"]
                    for c in self.kube.list("PersistentVolumeClaim", self.namespace)}
        for template in sts["spec"].get("volumeClaimTemplates") or ():
            claim_name = f"{template['metadata']['name']}-{pod_name}"
            if claim_name in existing:
                continue
            spec = copy.deepcopy(template["spec"])
            self.kube.create({
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim_name, "namespace": self.namespace,
                             "labels": dict(template["metadata"].get("labels") or {})},
                "spec": spec,
                "status": {"phase": "Bound",
                           "capacity": {"storage": spec["resources"]["requests"]["storage"]}},
            })

    def _expand(self) -> None:
        for claim in self.kube.list("PersistentVolumeClaim", self.namespace):
            requested = claim["spec"]["resources"]["requests"]["storage"]
            if (claim.get("status") or {}).get("capacity", {}).get("storage") != requested:
                self.kube.patch_status("PersistentVolumeClaim", self.namespace,
                                       claim["metadata"]["name"],
                                       {"phase": "Bound", "capacity": {"storage": requested}})

    def sync(self) -> None:
        if self.expand_volumes:
            self._expand()
        for sts in self.kube.list("StatefulSet", self.namespace):
            name = sts["metadata"]["name"]
            template = sts["spec"]["template"]
            existing = {p["metadata"]["name"] for p in self.kube.list("Pod", self.namespace)}
            for ordinal in range(int(sts["spec"].get("replicas", 1))):
                pod_name = f"{name}-{ordinal}"
                self._claims(sts, pod_name)
                if pod_name in existing:
                    continue
                pod = {
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod_name, "namespace": self.namespace,
                                 "labels": dict(template["metadata"].get("labels") or {}),
                                 "annotations": dict(template["metadata"].get("annotations")
                                                     or {})},
                    "spec": {**copy.deepcopy(template["spec"]),
                             **({"nodeName": self.node_name} if self.node_name else {})},
                    "status": ready_pod_status(),
                }
                self.kube.create(pod)
                self.created.append(pod_name)
