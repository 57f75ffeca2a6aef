"""Pure ``build_*`` functions for the etcd a Broker runs when ``spec.metadata.managed`` is true.

A static etcd cluster: a StatefulSet ``<b>-etcd`` of ``managedReplicas`` members with stable
names through the headless Service ``<b>-etcd-peers`` (``--initial-cluster`` lists every
member up front, so no discovery service is needed), a client Service ``<b>-etcd``, one volume
per member, and a PodDisruptionBudget keeping a quorum (``maxUnavailable: 1``). Changing the
member count of a running etcd needs etcd's member API and is not done by the operator.

With the operator's cluster CA (``etcd_tls.enabled``) the client port is TLS with client
certificates (``etcd_tls``: flags, the ``<broker>-etcd-certs`` Secret mounted at
``ETCD_TLS_DIR``, ``/health`` on the plain metrics port for the readiness probe). With
``EtcdCerts.peer_tls`` (an etcd created with TLS on) the peer URLs are https too, with peer
certificates required; an etcd's peer scheme never changes by a roll (``etcd_tls``).
"""

from __future__ import annotations

from strata.operator import etcd_tls
from strata.operator.builders import (
    Obj,
    container_security,
    meta,
    pod_security,
    selector_labels,
)
from strata.operator.model import ETCD_CLIENT_PORT, ETCD_PEER_PORT, BrokerNames, BrokerSpec

ETCD_DATA_DIR = "/var/lib/etcd"


def initial_cluster(names: BrokerNames, replicas: int, peer_tls: bool = False) -> str:
    peers = names.service_dns(names.etcd_peers)
    scheme = etcd_tls.peer_scheme(peer_tls)
    return ",".join(f"{names.etcd}-{i}={scheme}://{names.etcd}-{i}.{peers}:{ETCD_PEER_PORT}"
                    for i in range(replicas))


def build_etcd_peer_service(names: BrokerNames) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(names, names.etcd_peers, "etcd"),
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": selector_labels(names, "etcd"),
                 "ports": [{"name": "client", "port": ETCD_CLIENT_PORT, "protocol": "TCP"},
                           {"name": "peer", "port": ETCD_PEER_PORT, "protocol": "TCP"}]},
    }


def build_etcd_client_service(names: BrokerNames) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(names, names.etcd, "etcd"),
        "spec": {"type": "ClusterIP", "selector": selector_labels(names, "etcd"),
                 "ports": [{"name": "client", "port": ETCD_CLIENT_PORT, "protocol": "TCP"}]},
    }


def build_etcd_stateful_set(names: BrokerNames, spec: BrokerSpec,
                            certs: etcd_tls.EtcdCerts = etcd_tls.PLAIN) -> Obj:
    """``certs`` (``etcd_certs.ensure``): its ``trust_digest`` annotates the pod template, so a
    change of the CAs etcd trusts (a cluster CA rotation) rolls the members, one at a time;
    ``peer_tls`` makes the peer URLs https."""
    replicas = spec.metadata.managed_replicas
    peers = names.service_dns(names.etcd_peers)
    tls = etcd_tls.enabled(spec)
    scheme = etcd_tls.client_scheme(spec)
    peer_scheme = etcd_tls.peer_scheme(certs.peer_tls)
    trust_digest = certs.trust_digest
    flags = [*(etcd_tls.etcd_flags() if tls else []),
             *(etcd_tls.peer_flags() if certs.peer_tls else [])]
    script = (
        "exec etcd --name=${HOSTNAME} --data-dir=" + ETCD_DATA_DIR + "/data"
        f" --listen-client-urls={scheme}://0.0.0.0:{ETCD_CLIENT_PORT}"
        f" --advertise-client-urls={scheme}://${{HOSTNAME}}.{peers}:{ETCD_CLIENT_PORT}"
        f" --listen-peer-urls={peer_scheme}://0.0.0.0:{ETCD_PEER_PORT}"
        f" --initial-advertise-peer-urls={peer_scheme}://${{HOSTNAME}}.{peers}:{ETCD_PEER_PORT}"
        f" --initial-cluster={initial_cluster(names, replicas, certs.peer_tls)}"
        f" --initial-cluster-token={names.etcd}.{names.namespace}"
        " --initial-cluster-state=new"
        # A topic's registration and all its partitions are one transaction (Strata's
        # ClusterTopicStore); etcd's default of 128 ops would cap topics at 127 partitions.
        " --max-txn-ops=100000"
        + "".join(f" {flag}" for flag in flags)
    )
    ports: list[Obj] = [{"name": "client", "containerPort": ETCD_CLIENT_PORT, "protocol": "TCP"},
                        {"name": "peer", "containerPort": ETCD_PEER_PORT, "protocol": "TCP"}]
    mounts: list[Obj] = [{"name": "data", "mountPath": ETCD_DATA_DIR}]
    volumes: list[Obj] = []
    if tls:
        ports.append({"name": "metrics", "containerPort": etcd_tls.ETCD_METRICS_PORT,
                      "protocol": "TCP"})
    if tls or certs.peer_tls:
        mounts.append({"name": "tls", "mountPath": etcd_tls.ETCD_TLS_DIR, "readOnly": True})
        volumes.append({"name": "tls", "secret": {"secretName": etcd_tls.secret_name(names),
                                                  "defaultMode": 0o440}})
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(names, names.etcd, "etcd"),
        "spec": {
            "replicas": replicas,
            "serviceName": names.etcd_peers,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": selector_labels(names, "etcd")},
            "template": {
                "metadata": {"labels": meta(names, names.etcd, "etcd")["labels"],
                             **({"annotations": {etcd_tls.TRUST_HASH_ANNOTATION: trust_digest}}
                                if trust_digest else {})},
                "spec": {
                    "securityContext": pod_security(),
                    "containers": [{
                        "name": "etcd",
                        "image": spec.metadata.etcd_image,
                        "command": ["/bin/sh", "-c", script],
                        "ports": ports,
                        "readinessProbe": {"httpGet": {
                            "path": "/health", "port": "metrics" if tls else "client"},
                            "periodSeconds": 5},
                        "volumeMounts": mounts,
                        "securityContext": container_security(),
                    }],
                    **({"volumes": volumes} if volumes else {}),
                },
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {
                             "storage": spec.metadata.managed_storage_size}},
                         **({"storageClassName": spec.metadata.managed_storage_class_name}
                            if spec.metadata.managed_storage_class_name else {})},
            }],
        },
    }


def build_etcd_pdb(names: BrokerNames) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(names, names.etcd, "etcd"),
        "spec": {"maxUnavailable": 1,
                 "selector": {"matchLabels": selector_labels(names, "etcd")}},
    }


def build_etcd_objects(names: BrokerNames, spec: BrokerSpec,
                       certs: etcd_tls.EtcdCerts = etcd_tls.PLAIN) -> list[Obj]:
    return [build_etcd_peer_service(names), build_etcd_client_service(names),
            build_etcd_stateful_set(names, spec, certs), build_etcd_pdb(names)]
