"""The Broker reconcile's certificates step: the I/O around ``ca_rotation`` and
``cert_manager`` (which decide), for Brokers whose certificates are not the user's.

Two calls per pass, around the rolling restart (``broker._reconcile``):

* ``prepare`` (before the config hash is computed): for ``tls_spec.CERT_MANAGER``, apply the
  ``Certificate``; for ``tls_spec.OPERATOR``, read or create the cluster CA Secret
  ``<broker>-cluster-ca`` (and, when a listener authenticates clients by certificate, the
  clients CA ``<broker>-clients-ca``), start a CA rotation when asked
  (``strata.dev/force-renew-ca: "true"``, removed at once) or due, and write the broker
  certificates Secret ``<broker>-broker-certs`` that ``ca_rotation.plan_broker_certs`` asks
  for. A change there changes the pods' config hash: the usual gated roll follows.
* ``finish`` (after the roll decision): with a rotation under way, its current stage written
  in an earlier pass and the roll settled (every broker current and ready), move to the next
  stage (``ca_rotation.advance``), post its Event, and return ``status.certificates``.

The clients CA rotates the same way and independently (``ca_rotation.CLIENTS``: started by
``strata.dev/force-renew-clients-ca: "true"`` or near its end; ``status.certificates.
clientsCaRotation``); its ``ReissueCertificates`` stage ends once no TLS user of the Broker
(``User`` with ``authentication.type: tls``, its Secret owned by it) holds a certificate of
the old clients CA (``pending_users``; the User reconcile re-issues it, ``tls_users``).

Every Secret written here is owned by the Broker (garbage-collected with it). Keys removed
from a Secret are removed with an explicit ``null`` in the merge patch (``Kube.apply`` only
adds). The clock is ``now()``, injectable.
"""

from __future__ import annotations

import base64
import datetime
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from strata.operator import builders, ca_rotation, certificates, events, user_sync
from strata.operator.cert_manager import broker_common_name, build_certificate
from strata.operator.kube import Kube, Obj
from strata.operator.model import BrokerNames, BrokerSpec
from strata.operator.tls_spec import CERT_MANAGER, OPERATOR, generated_secret_name

logger = logging.getLogger(__name__)

CA_CERTIFICATES_ISSUED: Final = "CertificatesIssued"
CA_ROTATION: Final = ca_rotation.CLUSTER.event_reason
CLIENTS_CA_ROTATION: Final = ca_rotation.CLIENTS.event_reason
USER_CERT_KEY: Final = "user.crt"  # tls_users.CERT_KEY (tls_users imports this module)


def cluster_ca_secret(names: BrokerNames) -> str:
    return f"{names.name}-cluster-ca"


def clients_ca_secret(names: BrokerNames) -> str:
    return f"{names.name}-clients-ca"


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True, slots=True)
class Prepared:
    """What ``prepare`` found and did, for ``finish``."""

    ca: ca_rotation.CaState
    changed: bool  # the broker certificates Secret was written in this pass
    clients: ca_rotation.CaState | None = None  # with a listener ``authentication: tls``


def decoded(secret: Mapping[str, Any] | None) -> dict[str, str]:
    return {k: base64.b64decode(v).decode("utf-8")
            for k, v in ((secret or {}).get("data") or {}).items()}


def _encoded(data: Mapping[str, str]) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}


def write_secret(kube: Kube, body: Mapping[str, Any], names: BrokerNames, name: str,
                 data: Mapping[str, str], annotations: Mapping[str, str | None],
                 live: Obj | None) -> None:
    """Create the Secret, or patch it to exactly ``data`` (keys it no longer has: null)."""
    if live is None:
        obj: Obj = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {**builders.meta(names, name, "certificates"),
                                 "annotations": {k: v for k, v in annotations.items()
                                                 if v is not None}},
                    "data": _encoded(data)}
        kube.create(builders.owned([obj], body)[0])
        return
    old = (live.get("data") or {})
    patch_data: dict[str, str | None] = {**_encoded(data),
                                         **{k: None for k in old if k not in data}}
    kube.patch("Secret", names.namespace, name, {"metadata": {"annotations": dict(annotations)},
                                                 "data": patch_data})


def _read_ca(kube: Kube, body: Mapping[str, Any], names: BrokerNames, name: str,
             new_ca: ca_rotation.NewCa) -> tuple[ca_rotation.CaState, Obj | None]:
    live = kube.read("Secret", names.namespace, name)
    data = decoded(live)
    if "ca.crt" in data and "ca.key" in data:
        stage = ((live or {}).get("metadata") or {}).get("annotations", {}).get(
            ca_rotation.STAGE_ANNOTATION) or ca_rotation.IDLE
        return ca_rotation.CaState(data, stage), live
    state = ca_rotation.initial(new_ca)
    write_secret(kube, body, names, name, state.data, {}, live)
    logger.info("Secret %s/%s: a new CA", names.namespace, name)
    return state, kube.read("Secret", names.namespace, name)


def _write_ca(kube: Kube, body: Mapping[str, Any], names: BrokerNames, name: str,
              state: ca_rotation.CaState, live: Obj | None) -> None:
    write_secret(kube, body, names, name, state.data,
                 {ca_rotation.STAGE_ANNOTATION: state.stage or None}, live)


def _start_rotation(kube: Kube, body: Mapping[str, Any], names: BrokerNames,
                    kind: ca_rotation.CaKind, name: str, state: ca_rotation.CaState,
                    live: Obj | None, now: datetime.datetime, renewal: datetime.timedelta,
                    new_ca: ca_rotation.NewCa) -> ca_rotation.CaState:
    """Stage 1 of ``kind``'s rotation when asked (its Broker annotation) or due."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    forced = annotations.get(kind.force_annotation) == "true"
    if not ca_rotation.should_start(state, forced, now, renewal):
        return state
    state = ca_rotation.advance(state, new_ca)
    _write_ca(kube, body, names, name, state, live)
    why = f"asked by {kind.force_annotation}" if forced else "the CA is near its end"
    events.record(kube, body, events.NORMAL, kind.event_reason,
                  f"{ca_rotation.stage_message(state.stage, kind)}; {why}")
    return state


def _advance(kube: Kube, body: Mapping[str, Any], names: BrokerNames,
             kind: ca_rotation.CaKind, name: str, state: ca_rotation.CaState,
             new_ca: ca_rotation.NewCa) -> ca_rotation.CaState:
    """The next stage written to the CA Secret, and its Event."""
    live = kube.read("Secret", names.namespace, name)
    state = ca_rotation.advance(state, new_ca)
    _write_ca(kube, body, names, name, state, live)
    reason = kind.complete_reason if state.stage == ca_rotation.IDLE else kind.event_reason
    events.record(kube, body, events.NORMAL, reason, ca_rotation.stage_message(state.stage, kind))
    return state


def pending_users(kube: Kube, names: BrokerNames, clients: ca_rotation.CaState) -> list[str]:
    """The TLS users of this Broker whose own Secret holds a certificate the clients CA's
    issuing certificate (``ca.crt``) did not sign: still to re-issue."""
    pending = []
    for user in kube.list("User", names.namespace):
        spec = user.get("spec") or {}
        if spec.get("broker") != names.name or \
                (spec.get("authentication") or {}).get("type") != "tls":
            continue
        live = kube.read("Secret", names.namespace, user_sync.secret_name(user))
        cert = decoded(live).get(USER_CERT_KEY)
        if live is not None and user_sync.owned_by(live, user) and cert and \
                not certificates.issued_by(cert, clients.data["ca.crt"]):
            pending.append(str(user["metadata"]["name"]))
    return sorted(pending)


def _new_ca(common_name: str, validity: datetime.timedelta,
            now: Callable[[], datetime.datetime]) -> certificates.KeyPair:
    return certificates.new_ca(common_name, now(), validity)


def _ca_maker(names: BrokerNames, which: str, spec: BrokerSpec,
              now: Callable[[], datetime.datetime]) -> ca_rotation.NewCa:
    """The maker of a new ``which`` (cluster, clients) CA of this Broker."""
    return functools.partial(_new_ca, f"{names.name} {which} CA", spec.certificates.ca_validity,
                             now)


def prepare(kube: Kube, body: Mapping[str, Any], names: BrokerNames, spec: BrokerSpec,
            pod_count: int, now: Callable[[], datetime.datetime] = utc_now) -> Prepared | None:
    """Before the roll: the Certificate, or the CAs and the broker certificates Secret."""
    source = spec.certificates.source
    if source == CERT_MANAGER:
        kube.apply(builders.owned([build_certificate(names, spec)], body)[0])
        return None
    if source != OPERATOR:
        return None
    certs = spec.certificates
    state, live = _read_ca(kube, body, names, cluster_ca_secret(names),
                           _ca_maker(names, "cluster", spec, now))
    state = _start_rotation(kube, body, names, ca_rotation.CLUSTER, cluster_ca_secret(names),
                            state, live, now(), certs.renewal,
                            _ca_maker(names, "cluster", spec, now))
    trusted = list(state.trusted)
    clients: ca_rotation.CaState | None = None
    if any(lst.authentication == "tls" for lst in spec.listeners.values()):
        clients, live = _read_ca(kube, body, names, clients_ca_secret(names),
                                 _ca_maker(names, "clients", spec, now))
        clients = _start_rotation(kube, body, names, ca_rotation.CLIENTS,
                                  clients_ca_secret(names), clients, live, now(),
                                  certs.renewal, _ca_maker(names, "clients", spec, now))
        trusted += clients.trusted_by_age  # stages 1 and 2 alike: no roll at stage 2
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    asked = {kind.force_annotation: None for kind in (ca_rotation.CLUSTER, ca_rotation.CLIENTS)
             if annotations.get(kind.force_annotation) == "true"}
    if asked:  # taken: a rotation started, or one runs already (or no clients CA to renew)
        kube.patch("Broker", names.namespace, names.name, {"metadata": {"annotations": asked}})
    headless = names.service_dns(names.headless_service)
    bootstrap = names.service_dns(names.client_service)
    pods = {names.pod(i): ca_rotation.pod_sans(names.pod(i), headless, names.client_service,
                                               bootstrap, certs.alternative_names)
            for i in range(pod_count)}
    secret_name = generated_secret_name(names.name)
    live_certs = kube.read("Secret", names.namespace, secret_name)
    plan = ca_rotation.plan_broker_certs(decoded(live_certs), certificates.bundle(trusted),
                                         state.issuer, pods, broker_common_name(names), now(),
                                         certs.validity, certs.renewal)
    if plan.changed:
        write_secret(kube, body, names, secret_name, plan.data, {}, live_certs)
        if plan.reissued:
            events.record(kube, body, events.NORMAL, CA_CERTIFICATES_ISSUED,
                          f"certificates issued by the cluster CA for {', '.join(plan.reissued)}")
    return Prepared(state, plan.changed, clients)


def finish(kube: Kube, body: Mapping[str, Any], names: BrokerNames, spec: BrokerSpec,
           prepared: Prepared | None, settled: bool,
           now: Callable[[], datetime.datetime] = utc_now) -> Obj | None:
    """After the roll decision: the next rotation stage once this one's roll is done; the
    new ``status.certificates`` (None: the operator makes no certificates)."""
    if prepared is None:
        if spec.certificates.source == CERT_MANAGER:
            return {"source": CERT_MANAGER}
        return None
    state = prepared.ca
    if ca_rotation.may_advance(state, settled, prepared.changed):
        state = _advance(kube, body, names, ca_rotation.CLUSTER, cluster_ca_secret(names), state,
                         _ca_maker(names, "cluster", spec, now))
    # "" when idle, never absent: a merge patch would leave the last stage in place.
    status: Obj = {"source": OPERATOR,
                   "caNotAfter": certificates.not_after(state.data["ca.crt"]).isoformat(),
                   "caRotation": state.stage, "clientsCaRotation": "",
                   "clientsCaWaitingFor": []}
    clients = prepared.clients
    if clients is not None:
        pending = (pending_users(kube, names, clients)
                   if clients.stage == ca_rotation.REISSUE_CERTIFICATES else [])
        if pending:
            logger.info("clients CA rotation of %s/%s: waiting for the certificates of %s",
                        names.namespace, names.name, ", ".join(pending))
        if ca_rotation.may_advance(clients, settled, prepared.changed, pending):
            clients = _advance(kube, body, names, ca_rotation.CLIENTS, clients_ca_secret(names),
                               clients, _ca_maker(names, "clients", spec, now))
        status["clientsCaNotAfter"] = certificates.not_after(clients.data["ca.crt"]).isoformat()
        status["clientsCaRotation"] = clients.stage
        if clients.stage == ca_rotation.REISSUE_CERTIFICATES:
            status["clientsCaWaitingFor"] = pending
    return status
