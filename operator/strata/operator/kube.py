"""The Kubernetes side of the operator: a thin, dict-in dict-out layer over the official
``kubernetes`` client (its ``ApiClient`` does config, auth and TLS; we build the REST paths).

Owns the one way objects are written: ``apply`` creates a missing object, or merge-patches
(RFC 7386, ``application/merge-patch+json``) a live one whose fields differ from the desired
ones. ``is_subset`` decides "differs": every field we set must be equal; fields the API server
or others added are left alone. Immutable fields (a StatefulSet's ``volumeClaimTemplates`` and
``selector``) are never patched. Reads return plain dicts (no model classes), so objects of any
kind, ours included, go through the same code.

Label selectors are also applied on our side: lists are filtered by labels after the request
(harmless on a real API server, required on a mock that ignores ``labelSelector``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from strata.operator.model import API_VERSION

Obj = dict[str, Any]

MERGE_PATCH: Final = "application/merge-patch+json"

# kind -> (apiVersion, plural, namespaced)
KINDS: Final[dict[str, tuple[str, str, bool]]] = {
    "ConfigMap": ("v1", "configmaps", True),
    "Service": ("v1", "services", True),
    "Pod": ("v1", "pods", True),
    "Node": ("v1", "nodes", False),
    "Secret": ("v1", "secrets", True),
    "PersistentVolumeClaim": ("v1", "persistentvolumeclaims", True),
    "Event": ("v1", "events", True),
    "StatefulSet": ("apps/v1", "statefulsets", True),
    "Deployment": ("apps/v1", "deployments", True),
    "PodDisruptionBudget": ("policy/v1", "poddisruptionbudgets", True),
    "ClusterKopfPeering": ("kopf.dev/v1", "clusterkopfpeerings", False),
    "KopfPeering": ("kopf.dev/v1", "kopfpeerings", True),
    "Certificate": ("cert-manager.io/v1", "certificates", True),
    "Broker": (API_VERSION, "brokers", True),
    "Topic": (API_VERSION, "topics", True),
    "User": (API_VERSION, "users", True),
    "Rebalance": (API_VERSION, "rebalances", True),
}

# Fields the API server refuses to change on a live object: never part of a patch.
IMMUTABLE: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    "StatefulSet": (("spec", "volumeClaimTemplates"), ("spec", "selector"),
                    ("spec", "serviceName"), ("spec", "podManagementPolicy")),
    "Deployment": (("spec", "selector"),),
    "Service": (("spec", "clusterIP"),),
}


def load_config() -> client.ApiClient:
    """An ApiClient from the pod's service account, else from KUBECONFIG (as kopf logs in)."""
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    return client.ApiClient()


def is_subset(desired: Any, live: Any) -> bool:
    """Whether every field of ``desired`` is in ``live`` with the same value (lists: same
    length, each item a subset of the live item at the same position)."""
    if isinstance(desired, Mapping):
        return isinstance(live, Mapping) and all(
            key in live and is_subset(value, live[key]) for key, value in desired.items())
    if isinstance(desired, list):
        return (isinstance(live, list) and len(desired) == len(live)
                and all(is_subset(d, v) for d, v in zip(desired, live, strict=True)))
    return bool(desired == live)


def without(obj: Obj, paths: tuple[tuple[str, ...], ...]) -> Obj:
    """A copy of ``obj`` without the given nested fields."""
    result = json.loads(json.dumps(obj))
    for path in paths:
        node = result
        for key in path[:-1]:
            node = node.get(key, {})
        node.pop(path[-1], None)
    return dict(result)


def matches(obj: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    object_labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(object_labels.get(k) == v for k, v in selector.items())


class Kube:
    """Reads and writes objects by kind, namespace and name. Thread-safe as ApiClient is."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    # ------------------------------------------------------------------ raw REST
    def _path(self, kind: str, namespace: str | None, name: str | None = None,
              subresource: str | None = None) -> str:
        api_version, plural, namespaced = KINDS[kind]
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        path = base + (f"/namespaces/{namespace}" if namespaced and namespace else "") + \
            f"/{plural}"
        if name:
            path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
        return path

    def _call(self, method: str, path: str, body: Any = None,
              content_type: str = "application/json",
              query: list[tuple[str, str]] | None = None) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        method, url, headers, body, _ = self.api.param_serialize(
            method, path, query_params=query, header_params=headers, body=body,
            auth_settings=["BearerToken"])
        response = self.api.call_api(method, url, header_params=headers, body=body,
                                     _request_timeout=30)
        data = response.read()  # type: ignore[no-untyped-call]
        if not 200 <= response.status < 300:
            raise ApiException(status=response.status, reason=response.reason,
                               http_resp=response)
        return json.loads(data) if data else None

    # ------------------------------------------------------------------ verbs
    def read(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        try:
            result: Obj = self._call("GET", self._path(kind, namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return result

    def list(self, kind: str, namespace: str | None,
             selector: Mapping[str, str] | None = None) -> list[Obj]:
        path = self._path(kind, namespace)
        if selector:
            path += "?labelSelector=" + ",".join(f"{k}%3D{v}" for k, v in selector.items())
        items = self._call("GET", path).get("items") or []
        return [i for i in items if not selector or matches(i, selector)]

    def create(self, obj: Obj) -> Obj:
        namespace = obj["metadata"].get("namespace")
        result: Obj = self._call("POST", self._path(obj["kind"], namespace), body=obj)
        return result

    def patch(self, kind: str, namespace: str | None, name: str, patch: Obj,
              subresource: str | None = None) -> Obj:
        result: Obj = self._call("PATCH", self._path(kind, namespace, name, subresource),
                                 body=patch, content_type=MERGE_PATCH)
        return result

    def delete(self, kind: str, namespace: str | None, name: str,
               propagation_policy: str | None = None) -> bool:
        """Delete; False if it was already gone. ``propagation_policy``: Kubernetes'
        ``Orphan``, ``Background`` or ``Foreground`` for the object's dependents."""
        query = [("propagationPolicy", propagation_policy)] if propagation_policy else None
        try:
            self._call("DELETE", self._path(kind, namespace, name), query=query)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def patch_status(self, kind: str, namespace: str, name: str, status: Obj) -> Obj:
        return self.patch(kind, namespace, name, {"status": status}, subresource="status")

    # ------------------------------------------------------------------ apply
    def apply(self, desired: Obj) -> str:
        """Make the live object carry every field of ``desired``: "created", "patched" or
        "unchanged"."""
        kind = desired["kind"]
        namespace = desired["metadata"].get("namespace")
        name = desired["metadata"]["name"]
        live = self.read(kind, namespace, name)
        if live is None:
            try:
                self.create(desired)
            except ApiException as exc:
                if exc.status != 409:  # created meanwhile by a concurrent run: patch next time
                    raise
            return "created"
        patch = without(desired, IMMUTABLE.get(kind, ()))
        if is_subset(patch, live):
            return "unchanged"
        self.patch(kind, namespace, name, patch)
        return "patched"
