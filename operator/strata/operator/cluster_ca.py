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

from strata.operator import builders, ca_rotation, certificates, events
from strata.operator.cert_manager import broker_common_name, build_certificate
from strata.operator.kube import Kube, Obj
from strata.operator.model import BrokerNames, BrokerSpec
from strata.operator.tls_spec import CERT_MANAGER, OPERATOR, generated_secret_name

logger = logging.getLogger(__name__)

CA_CERTIFICATES_ISSUED: Final = "CertificatesIssued"
CA_ROTATION: Final = "CaRotation"


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


def _write_ca(kube: Kube, body: Mapping[str, Any], names: BrokerNames,
              state: ca_rotation.CaState, live: Obj | None) -> None:
    write_secret(kube, body, names, cluster_ca_secret(names), state.data,
                 {ca_rotation.STAGE_ANNOTATION: state.stage or None}, live)


def _new_ca(common_name: str, validity: datetime.timedelta,
            now: Callable[[], datetime.datetime]) -> certificates.KeyPair:
    return certificates.new_ca(common_name, now(), validity)


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
    cluster_new_ca = functools.partial(_new_ca, f"{names.name} cluster CA", certs.ca_validity,
                                       now)
    state, live = _read_ca(kube, body, names, cluster_ca_secret(names), cluster_new_ca)
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    forced = annotations.get(ca_rotation.FORCE_RENEW_ANNOTATION) == "true"
    if ca_rotation.should_start(state, forced, now(), certs.renewal):
        state = ca_rotation.advance(state, cluster_new_ca)
        _write_ca(kube, body, names, state, live)
        why = "asked by strata.dev/force-renew-ca" if forced else "the CA is near its end"
        events.record(kube, body, events.NORMAL, CA_ROTATION,
                      f"{ca_rotation.stage_message(state.stage)}; {why}")
    if forced:
        kube.patch("Broker", names.namespace, names.name, {"metadata": {"annotations": {
            ca_rotation.FORCE_RENEW_ANNOTATION: None}}})
    trusted = list(state.trusted)
    if any(lst.authentication == "tls" for lst in spec.listeners.values()):
        clients, _ = _read_ca(kube, body, names, clients_ca_secret(names), functools.partial(
            _new_ca, f"{names.name} clients CA", certs.ca_validity, now))
        trusted.append(clients.data["ca.crt"])
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
    return Prepared(state, plan.changed)


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
    if state.stage != ca_rotation.IDLE and settled and not prepared.changed:
        live = kube.read("Secret", names.namespace, cluster_ca_secret(names))
        state = ca_rotation.advance(state, functools.partial(
            _new_ca, f"{names.name} cluster CA", spec.certificates.ca_validity, now))
        _write_ca(kube, body, names, state, live)
        reason = ca_rotation.COMPLETE if state.stage == ca_rotation.IDLE else CA_ROTATION
        events.record(kube, body, events.NORMAL, reason, ca_rotation.stage_message(state.stage))
    # "" when idle, never absent: a merge patch would leave the last stage in place.
    return {"source": OPERATOR,
            "caNotAfter": certificates.not_after(state.data["ca.crt"]).isoformat(),
            "caRotation": state.stage}
