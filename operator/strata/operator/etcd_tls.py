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

Peer TLS (``EtcdCerts.peer_tls``, decided by ``etcd_certs.ensure``): the members talk https
to each other and require a peer certificate from the same cluster CAs
(``--peer-client-cert-auth``); each presents ``server.crt``, which already names every
member (``server_sans``) and has both serverAuth and clientAuth usages (a peer connection
uses it both ways). etcd keeps a member's peer URLs in its data dir and ignores
``--initial-*`` flags on restart, so a running etcd's peers cannot switch scheme by a roll
(it needs ``etcdctl member update`` per member while the others still dial the old URL):
peer TLS is only for an etcd created with TLS on, and once on it stays on for the etcd's
life — an etcd that predates TLS keeps plain peers (``PEERS_PLAIN``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from strata.operator.model import BrokerNames, BrokerSpec
from strata.operator.tls_spec import OPERATOR

ETCD_TLS_DIR: Final = "/etc/etcd/tls"
ETCD_METRICS_PORT: Final = 2381
TRUST_HASH_ANNOTATION: Final = "strata.dev/etcd-trust-hash"
# On ``<broker>-etcd-certs``: the peer mode, decided once ("true" | "false").
PEER_TLS_ANNOTATION: Final = "strata.dev/etcd-peer-tls"
PEERS_PLAIN: Final = "EtcdPeersPlain"  # Event reason: an existing etcd keeps plain peers
PEER_TLS_KEPT: Final = "EtcdPeerTlsKept"  # Event reason: TLS off, peer TLS kept
BROKER_TLS_DIR: Final = "/etc/strata/tls"  # builders.TLS_DIR: the broker certificates Secret


@dataclass(frozen=True, slots=True)
class EtcdCerts:
    """What ``etcd_certs.ensure`` decided for the etcd StatefulSet: the digest of the CAs
    etcd trusts (the pod template annotation; "" without a certificates Secret) and whether
    the members talk TLS to each other."""

    trust_digest: str = ""
    peer_tls: bool = False


PLAIN: Final = EtcdCerts()  # no certificates Secret: plain client port and peers


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


def peer_flags() -> list[str]:
    """etcd's flags for TLS between members: ``server.crt`` as the peer certificate (client
    and server), a peer certificate from the cluster CAs required."""
    return [f"--peer-cert-file={ETCD_TLS_DIR}/server.crt",
            f"--peer-key-file={ETCD_TLS_DIR}/server.key",
            "--peer-client-cert-auth",
            f"--peer-trusted-ca-file={ETCD_TLS_DIR}/ca.crt"]


def peer_scheme(peer_tls: bool) -> str:
    return "https" if peer_tls else "http"


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

