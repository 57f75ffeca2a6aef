"""The managed etcd's certificates Secret ``<broker>-etcd-certs`` (I/O around ``etcd_tls``).

``ensure`` runs in each Broker reconcile right after ``cluster_ca.prepare`` (which read or
made the cluster CA): with etcd TLS on (``etcd_tls.enabled``) it issues etcd's server
certificate from the current cluster CA and writes it with the trusted cluster CAs, re-issuing
when the CA changes, the SANs change (more members) or the certificate nears its end — the
broker certificates' rules (``ca_rotation.plan_broker_certs``). It returns what the etcd
StatefulSet needs (``etcd_tls.EtcdCerts``): the digest of the trusted CAs and the peer mode.
The Secret is owned by the Broker. The clock is injectable.

The peer mode is decided once and recorded on the Secret (``etcd_tls.PEER_TLS_ANNOTATION``),
since etcd cannot switch a running member's peer scheme by a restart; it is copied onto the
claim ``data-<broker>-etcd-0`` too, which outlives the Broker (a Broker re-created over the
claims takes the mode of the etcd data they hold):

* ``"true"``: the Secret was made before the etcd existed (no StatefulSet ``<broker>-etcd``,
  no claim ``data-<broker>-etcd-0``): its members are created with peer TLS;
* ``"false"``: the etcd was there first (an operator upgrade, a first TLS listener, a Secret
  from an operator without peer TLS): its peers stay plain HTTP (Event ``EtcdPeersPlain``);
* ``"kept"``: the operator's certificates were turned off on a peer-TLS etcd: the client port
  goes plain but the peers keep TLS with the certificate last issued, no longer renewed
  (Warning Event ``EtcdPeerTlsKept``, once); turning them on again renews it.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any, Final

from strata.operator import builders, ca_rotation, certificates, cluster_ca, etcd_tls, events
from strata.operator.kube import Kube, Obj
from strata.operator.model import BrokerNames, BrokerSpec

PEER_TLS: Final = "true"
PEERS_PLAIN: Final = "false"
PEER_TLS_KEPT: Final = "kept"


def plan(existing: Mapping[str, str], ca: ca_rotation.CaState, names: BrokerNames,
         spec: BrokerSpec, now: datetime.datetime) -> ca_rotation.BrokerCertsPlan:
    """The Secret's data: ``server.crt``/``server.key`` and ``ca.crt`` (pure)."""
    sans = etcd_tls.server_sans(names, spec.metadata.managed_replicas)
    return ca_rotation.plan_broker_certs(
        existing, certificates.bundle(ca.trusted), ca.issuer, {"server": sans}, names.etcd,
        now, spec.certificates.validity, spec.certificates.renewal)


def ensure(kube: Kube, body: Mapping[str, Any], names: BrokerNames, spec: BrokerSpec,
           prepared: cluster_ca.Prepared | None,
           now: Callable[[], datetime.datetime] = cluster_ca.utc_now) -> etcd_tls.EtcdCerts:
    """Write ``<broker>-etcd-certs`` when it is missing or stale; the trust digest
    (``builders.SecretDigests.etcd``; "" without etcd TLS) and the peer mode."""
    if not spec.metadata.managed:
        return etcd_tls.PLAIN
    name = etcd_tls.secret_name(names)
    live = kube.read("Secret", names.namespace, name)
    recorded = _annotations(live).get(etcd_tls.PEER_TLS_ANNOTATION)
    if prepared is None or not etcd_tls.enabled(spec):
        return _without_tls(kube, body, names, live, recorded)
    peer_tls = recorded in (PEER_TLS, PEER_TLS_KEPT) if recorded is not None else (
        _peer_tls_for_new(kube, body, names, live))
    mode = PEER_TLS if peer_tls else PEERS_PLAIN
    planned = plan(cluster_ca.decoded(live), prepared.ca, names, spec, now())
    if planned.changed or recorded != mode:
        cluster_ca.write_secret(kube, body, names, name, planned.data,
                                {etcd_tls.PEER_TLS_ANNOTATION: mode}, live)
    _mark_claim(kube, names, mode)
    return etcd_tls.EtcdCerts(builders.digest(planned.data["ca.crt"]), peer_tls)


def _mark_claim(kube: Kube, names: BrokerNames, mode: str) -> None:
    """Copy the peer mode onto member 0's claim once the StatefulSet controller made it."""
    claim = kube.read("PersistentVolumeClaim", names.namespace, first_claim(names))
    if claim is not None and _annotations(claim).get(etcd_tls.PEER_TLS_ANNOTATION) != mode:
        kube.patch("PersistentVolumeClaim", names.namespace, first_claim(names),
                   {"metadata": {"annotations": {etcd_tls.PEER_TLS_ANNOTATION: mode}}})


def first_claim(names: BrokerNames) -> str:
    """The claim of member 0 (``volumeClaimTemplates`` ``data``): the etcd's data exists."""
    return f"data-{names.etcd}-0"


def _annotations(obj: Obj | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def _peer_tls_for_new(kube: Kube, body: Mapping[str, Any], names: BrokerNames,
                      live: Obj | None) -> bool:
    """No mode on the Secret: the claim's (a re-created Broker), else TLS peers only for an
    etcd not created yet."""
    claim_name = first_claim(names)
    claim = kube.read("PersistentVolumeClaim", names.namespace, claim_name)
    if _annotations(claim).get(etcd_tls.PEER_TLS_ANNOTATION) in (PEER_TLS, PEER_TLS_KEPT):
        return True
    if live is None and claim is None \
            and kube.read("StatefulSet", names.namespace, names.etcd) is None:
        return True
    why = ("its certificates Secret predates peer TLS" if live is not None
           else f"the etcd (StatefulSet {names.etcd} or claim {claim_name}) existed before TLS")
    events.record(kube, body, events.NORMAL, etcd_tls.PEERS_PLAIN,
                  f"the managed etcd's members keep plain HTTP between them: {why}, and a "
                  "running member's peer URLs change only through etcd's member API; its "
                  "client port uses TLS")
    return False


def _without_tls(kube: Kube, body: Mapping[str, Any], names: BrokerNames, live: Obj | None,
                 recorded: str | None) -> etcd_tls.EtcdCerts:
    """Client TLS off: a peer-TLS etcd keeps its peer TLS (and the Secret) all the same."""
    if live is None or recorded not in (PEER_TLS, PEER_TLS_KEPT):
        return etcd_tls.PLAIN
    if recorded == PEER_TLS:
        kube.patch("Secret", names.namespace, etcd_tls.secret_name(names), {"metadata": {
            "annotations": {etcd_tls.PEER_TLS_ANNOTATION: PEER_TLS_KEPT}}})
        events.record(kube, body, events.WARNING, etcd_tls.PEER_TLS_KEPT,
                      "the operator no longer makes this Broker's certificates: the managed "
                      "etcd's clients go plain, its members keep TLS between them with the "
                      "certificate last issued, which is no longer renewed")
    _mark_claim(kube, names, PEER_TLS)
    trust = cluster_ca.decoded(live).get("ca.crt", "")
    return etcd_tls.EtcdCerts(builders.digest(trust), peer_tls=True)
