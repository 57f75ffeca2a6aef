"""The managed etcd's certificates Secret ``<broker>-etcd-certs`` (I/O around ``etcd_tls``).

``ensure`` runs in each Broker reconcile right after ``cluster_ca.prepare`` (which read or
made the cluster CA): with etcd TLS on (``etcd_tls.enabled``) it issues etcd's server
certificate from the current cluster CA and writes it with the trusted cluster CAs, re-issuing
when the CA changes, the SANs change (more members) or the certificate nears its end — the
broker certificates' rules (``ca_rotation.plan_broker_certs``), and returns the digest of the
trusted CAs for the etcd pod template. The Secret is owned by the Broker. The clock is injectable.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from strata.operator import builders, ca_rotation, certificates, cluster_ca, etcd_tls
from strata.operator.kube import Kube
from strata.operator.model import BrokerNames, BrokerSpec


def plan(existing: Mapping[str, str], ca: ca_rotation.CaState, names: BrokerNames,
         spec: BrokerSpec, now: datetime.datetime) -> ca_rotation.BrokerCertsPlan:
    """The Secret's data: ``server.crt``/``server.key`` and ``ca.crt`` (pure)."""
    sans = etcd_tls.server_sans(names, spec.metadata.managed_replicas)
    return ca_rotation.plan_broker_certs(
        existing, certificates.bundle(ca.trusted), ca.issuer, {"server": sans}, names.etcd,
        now, spec.certificates.validity, spec.certificates.renewal)


def ensure(kube: Kube, body: Mapping[str, Any], names: BrokerNames, spec: BrokerSpec,
           prepared: cluster_ca.Prepared | None,
           now: Callable[[], datetime.datetime] = cluster_ca.utc_now) -> str:
    """Write ``<broker>-etcd-certs`` when it is missing or stale; the digest of the CAs it
    has etcd trust (``builders.SecretDigests.etcd``; "" without etcd TLS)."""
    if prepared is None or not etcd_tls.enabled(spec):
        return ""
    name = etcd_tls.secret_name(names)
    live = kube.read("Secret", names.namespace, name)
    planned = plan(cluster_ca.decoded(live), prepared.ca, names, spec, now())
    if planned.changed:
        cluster_ca.write_secret(kube, body, names, name, planned.data, {}, live)
    return builders.digest(planned.data["ca.crt"])
