"""TLS for the managed etcd when the operator makes the Broker's certificates (pure; no I/O).

When ``spec.metadata.managed`` and ``spec.tls`` has the operator's cluster CA
(``certificates.source == "operator"``), the managed etcd serves clients over TLS and requires
a client certificate signed by the cluster CA (``--client-cert-auth``):

* etcd's Secret ``<broker>-etcd-certs`` holds ``server.crt``/``server.key`` (issued by the
  cluster CA with ``server_sans``: the client Service and every member's stable name) and
  ``ca.crt``, the cluster CAs only (``CaState.trusted``: not the clients CA, so a Kafka
  client's certificate does not open etcd). ``etcd_certs.ensure`` writes it, re-issuing with
  the broker certificates' rules (``ca_rotation.plan_broker_certs``);
* the brokers present the client certificate they already have (``tls.crt``/``tls.key`` of
  ``<broker>-broker-certs``, mounted at ``builders.TLS_DIR``) and trust its ``ca.crt``:
  ``broker_settings`` are the ``metadata.store.ssl.*`` configs, and the URL is ``etcds://``;
* etcd re-reads its server certificate on each connection but its ``--trusted-ca-file`` only
  at start: the pod template carries a digest of ``ca.crt`` (``TRUST_HASH_ANNOTATION``), so a
  cluster CA rotation rolls the members (the StatefulSet's RollingUpdate, one at a time);
* etcd's ``/health`` moves to a plain-HTTP metrics listener (``ETCD_METRICS_PORT``) for the
  readiness probe, since the client port now wants a certificate.

Peer traffic between etcd members stays plain HTTP inside the namespace (a change of the
peer URLs of a running etcd needs its member API).
"""

from __future__ import annotations

from typing import Final

from strata.operator.model import BrokerNames, BrokerSpec
from strata.operator.tls_spec import OPERATOR

ETCD_TLS_DIR: Final = "/etc/etcd/tls"
ETCD_METRICS_PORT: Final = 2381
TRUST_HASH_ANNOTATION: Final = "strata.dev/etcd-trust-hash"
BROKER_TLS_DIR: Final = "/etc/strata/tls"  # builders.TLS_DIR: the broker certificates Secret


def enabled(spec: BrokerSpec) -> bool:
    """The managed etcd uses TLS and client certificates."""
    return spec.metadata.managed and spec.certificates.source == OPERATOR


def secret_name(names: BrokerNames) -> str:
    return f"{names.name}-etcd-certs"


def server_sans(names: BrokerNames, replicas: int) -> list[str]:
    """Every name a client may reach an etcd member by (brokers use the member names)."""
    service, peers = names.service_dns(names.etcd), names.service_dns(names.etcd_peers)
    return [names.etcd, service, f"{service}.cluster.local",
            *(f"{names.etcd}-{i}.{peers}" for i in range(replicas)),
            f"*.{peers}", "localhost", "127.0.0.1"]


def etcd_flags() -> list[str]:
    """etcd's command-line flags for TLS on the client port (``ETCD_TLS_DIR`` mounted)."""
    return [f"--cert-file={ETCD_TLS_DIR}/server.crt",
            f"--key-file={ETCD_TLS_DIR}/server.key",
            "--client-cert-auth",
            f"--trusted-ca-file={ETCD_TLS_DIR}/ca.crt",
            f"--listen-metrics-urls=http://0.0.0.0:{ETCD_METRICS_PORT}"]


def client_scheme(spec: BrokerSpec) -> str:
    return "https" if enabled(spec) else "http"


def store_scheme(spec: BrokerSpec) -> str:
    """The ``metadata.store`` URL scheme of a Broker's etcd (given endpoints: plain)."""
    return "etcds" if enabled(spec) else "etcd"


def broker_settings(spec: BrokerSpec) -> dict[str, str]:
    """The brokers' ``metadata.store.ssl.*`` configs (empty without etcd TLS)."""
    if not enabled(spec):
        return {}
    return {"metadata.store.ssl.cafile": f"{BROKER_TLS_DIR}/ca.crt",
            "metadata.store.ssl.certfile": f"{BROKER_TLS_DIR}/tls.crt",
            "metadata.store.ssl.keyfile": f"{BROKER_TLS_DIR}/tls.key"}


def broker_env(spec: BrokerSpec) -> list[dict[str, str]]:
    """The same settings as ``STRATA_*`` variables, for ``strata users create`` in the
    entrypoint (the CLI reads them; the broker reads them too, with the same values)."""
    return [{"name": "STRATA_" + key.upper().replace(".", "_"), "value": value}
            for key, value in broker_settings(spec).items()]

