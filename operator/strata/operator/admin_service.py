"""Pure builders of a Broker's REST admin service: Deployment and Service ``<b>-admin``.

The service runs ``strata admin`` against the client Service at the inter-broker listener's
port, logged in as the brokers' inter-broker user (``client_security``): librdkafka settings
as ``STRATA_ADMIN_KAFKA_*`` variables, the password from its Secret (``secretKeyRef``), the TLS
Secret's CA mounted at ``/etc/strata/tls``. With ``admin.authentication.secretName`` every
``/v1`` request must authenticate against that Secret's ``auth.json`` (``strata.admin.
credentials``), and with ``authorization.type: simple`` it is authorized by the brokers' ACLs
with the brokers' ``super.users``; ``/healthz``, ``/readyz`` and ``/metrics`` stay open, so
the probes need no credentials. With ``admin.tls.secretName`` it serves HTTPS (``tls.crt``,
``tls.key``) and the probes use HTTPS.
"""

from __future__ import annotations

from typing import Any

from strata.operator.builders import (
    ADMIN_AUTH_DIR,
    ADMIN_TLS_DIR,
    SECRETS_HASH_ANNOTATION,
    TLS_DIR,
    container_security,
    image_version,
    labels,
    meta,
    pod_security,
    selector_labels,
    super_users,
)
from strata.operator.client_security import client_properties
from strata.operator.model import ADMIN_PORT, BrokerNames, BrokerSpec

Obj = dict[str, Any]


def _env_name(key: str) -> str:
    return "STRATA_ADMIN_KAFKA_" + key.upper().replace(".", "_")


def admin_command(names: BrokerNames, spec: BrokerSpec) -> list[str]:
    command = ["strata", "admin", "--bootstrap-servers",
               names.bootstrap_servers(spec.inter_broker_listener.port),
               "--host", "0.0.0.0", "--port", str(ADMIN_PORT)]
    security = spec.security
    if security.admin_auth_secret:
        command += ["--auth-file", f"{ADMIN_AUTH_DIR}/auth.json"]
        if security.authorization == "simple":
            command += ["--authorization", "acl", "--super-users", ";".join(super_users(spec))]
            if security.allow_everyone_if_no_acl_found:
                command.append("--allow-everyone-if-no-acl-found")
        else:
            command += ["--authorization", "none"]
    if security.admin_tls_secret:
        command += ["--ssl-certfile", f"{ADMIN_TLS_DIR}/tls.crt",
                    "--ssl-keyfile", f"{ADMIN_TLS_DIR}/tls.key"]
    return command


def _admin_env(spec: BrokerSpec) -> list[Obj]:
    tls_dir = TLS_DIR if spec.security.tls_secret else None
    env: list[Obj] = [{"name": _env_name(key), "value": value}
                      for key, value in client_properties(spec, tls_dir).items()]
    password = spec.security.inter_broker_password
    if spec.inter_broker_listener.mechanism and password is not None:
        env.append({"name": _env_name("sasl.password"), "valueFrom": {"secretKeyRef": {
            "name": password.name, "key": password.key}}})
    return env


def _secret_volume(name: str, secret: str) -> Obj:
    return {"name": name, "secret": {"secretName": secret, "defaultMode": 0o440}}


def build_admin_deployment(names: BrokerNames, spec: BrokerSpec, secrets_digest: str = "") -> Obj:
    """``secrets_digest`` (``secret_refs``): annotated on the pod template, so a rotated Secret
    rolls the Deployment (Kubernetes' own rolling update)."""
    security = spec.security
    mounts: list[Obj] = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[Obj] = [{"name": "tmp", "emptyDir": {}}]
    for name, secret, path in (("tls", security.tls_secret, TLS_DIR),
                               ("admin-auth", security.admin_auth_secret, ADMIN_AUTH_DIR),
                               ("admin-tls", security.admin_tls_secret, ADMIN_TLS_DIR)):
        if secret:
            mounts.append({"name": name, "mountPath": path, "readOnly": True})
            volumes.append(_secret_volume(name, secret))
    scheme = "HTTPS" if security.admin_tls_secret else "HTTP"
    container: Obj = {
        "name": "admin",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": admin_command(names, spec),
        "ports": [{"name": "http", "containerPort": ADMIN_PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http", "scheme": scheme}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": scheme},
                          "initialDelaySeconds": 10},
        "securityContext": container_security(),
        "volumeMounts": mounts,
    }
    env = _admin_env(spec)
    if env:
        container["env"] = env
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(names, names.admin, "admin", image_version(spec.image)),
        "spec": {
            "replicas": spec.admin_replicas,
            "selector": {"matchLabels": selector_labels(names, "admin")},
            "template": {
                "metadata": {"labels": labels(names, "admin", image_version(spec.image)),
                             **({"annotations": {SECRETS_HASH_ANNOTATION: secrets_digest}}
                                if secrets_digest else {})},
                "spec": {
                    "securityContext": pod_security(),
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def build_admin_service(names: BrokerNames, spec: BrokerSpec) -> Obj:
    port_name = "https" if spec.security.admin_tls_secret else "http"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(names, names.admin, "admin"),
        "spec": {"type": "ClusterIP", "selector": selector_labels(names, "admin"),
                 "ports": [{"name": port_name, "port": ADMIN_PORT, "targetPort": "http",
                            "protocol": "TCP"}]},
    }
