"""The staged rotation of the operator's CAs and what the broker certificates Secret must hold.

Pure: Secret data in (decoded PEM text), Secret data out; ``now`` is injected, and so is the
maker of a new CA (``new_ca``), the one source of randomness.

The cluster CA Secret ``<broker>-cluster-ca`` holds ``ca.crt`` + ``ca.key`` (the CA that
issues), and during a rotation ``next.crt`` + ``next.key`` (the new CA, trusted but not yet
issuing) or ``previous.crt`` (the old CA, still trusted, its key gone). Its annotation
``strata.dev/ca-rotation`` names the stage; written with the keys in one update, so the stage
and the material never disagree, and an operator restarted mid-rotation resumes from it (the
Broker's ``status.certificates.caRotation`` mirrors it). Stages, in order — each one changes
the broker certificates Secret, which changes the pods' config hash, so each is one gated
rolling restart (``rolling.decide_roll``), and the next stage starts only once that roll is
done (every pod current and ready):

1. ``TrustNewCa``: a new CA is made; brokers and clients trust both (``ca.crt`` of the broker
   Secret is the bundle old + new); certificates are still the old CA's.
2. ``ReissueCertificates``: the new CA issues: every broker certificate (and the operator's
   client certificate) is re-issued; the old CA is still trusted, so peers not yet restarted
   and clients that only trust the old CA keep working for this roll.
3. ``DropOldCa``: the old CA leaves the bundle.

Then idle again (no annotation). A rotation starts on the Broker annotation
``strata.dev/force-renew-ca: "true"`` (removed when the rotation starts) or when the CA is
within ``tls.renewalDays`` of its end.

The clients CA (``<broker>-clients-ca``, which signs TLS users' certificates and joins the
brokers' bundle) rotates through the same stages and the same Secret layout (``CaKind``
``CLIENTS``: ``strata.dev/force-renew-clients-ca``, Events ``ClientsCaRotation``): stage 1
rolls the brokers to trust old + new; at stage 2 the new CA issues, so every TLS user's
certificate is re-issued (``tls_users``: not signed by ``ca.crt``) — no roll, the brokers'
bundle is ordered by age (``trusted_by_age``) and so unchanged — and stage 3 waits for every
TLS user's Secret to hold a certificate of the new CA (``may_advance``) before its roll drops
the old one.

``plan_broker_certs`` decides the broker certificates Secret ``<broker>-broker-certs``:
``ca.crt`` (the trust bundle: cluster CAs, then the clients CA if any), ``tls.crt`` +
``tls.key`` (the operator's and admin service's client certificate, subject
``CN=<broker>-broker,O=strata.dev`` like the brokers'), and ``<pod>.crt`` + ``<pod>.key`` per
broker pod (SANs: the pod's DNS names, the bootstrap Service's, ``tls.alternativeNames``). A
certificate of the wrong issuer, near its end or with other SANs re-issues them all (one roll);
a new pod's certificate is only added (a scale-up rolls nobody).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from strata.operator import certificates
from strata.operator.certificates import KeyPair

IDLE: Final = ""
TRUST_NEW_CA: Final = "TrustNewCa"
REISSUE_CERTIFICATES: Final = "ReissueCertificates"
DROP_OLD_CA: Final = "DropOldCa"
STAGES: Final = (TRUST_NEW_CA, REISSUE_CERTIFICATES, DROP_OLD_CA)
STAGE_ANNOTATION: Final = "strata.dev/ca-rotation"
FORCE_RENEW_ANNOTATION: Final = "strata.dev/force-renew-ca"
COMPLETE: Final = "CaRotationComplete"

NewCa = Callable[[], KeyPair]


@dataclass(frozen=True, slots=True)
class CaKind:
    """Which CA rotates: what starts it, its Events, and its stages in words."""

    force_annotation: str
    event_reason: str
    complete_reason: str
    messages: Mapping[str, str]  # stage -> Event message (IDLE: the end)


CLUSTER: Final = CaKind(FORCE_RENEW_ANNOTATION, "CaRotation", COMPLETE, {
    TRUST_NEW_CA: "CA rotation 1/3: brokers and clients trust the old and the new cluster "
                  "CA (rolling restart)",
    REISSUE_CERTIFICATES: "CA rotation 2/3: broker certificates re-issued by the new "
                          "cluster CA (rolling restart)",
    DROP_OLD_CA: "CA rotation 3/3: the old cluster CA is no longer trusted "
                 "(rolling restart)",
    IDLE: "CA rotation complete: the new cluster CA alone is trusted",
})
CLIENTS: Final = CaKind("strata.dev/force-renew-clients-ca", "ClientsCaRotation",
                        "ClientsCaRotationComplete", {
    TRUST_NEW_CA: "Clients CA rotation 1/3: the brokers trust the old and the new clients CA "
                  "(rolling restart)",
    REISSUE_CERTIFICATES: "Clients CA rotation 2/3: TLS users' certificates are re-issued by "
                          "the new clients CA (no restart; the old one is still trusted)",
    DROP_OLD_CA: "Clients CA rotation 3/3: the old clients CA is no longer trusted "
                 "(rolling restart)",
    IDLE: "Clients CA rotation complete: the new clients CA alone is trusted",
})


@dataclass(frozen=True, slots=True)
class CaState:
    """The cluster CA Secret, decoded: its data and the rotation stage."""

    data: Mapping[str, str]
    stage: str = IDLE

    @property
    def issuer(self) -> KeyPair:
        return KeyPair(self.data["ca.crt"], self.data["ca.key"])

    @property
    def trusted(self) -> list[str]:
        """The cluster CAs to trust, the issuing one first."""
        return [self.data[k] for k in ("ca.crt", "next.crt", "previous.crt") if k in self.data]

    @property
    def trusted_by_age(self) -> list[str]:
        """The CAs to trust, the oldest first: the same list in stages 1 and 2."""
        return [self.data[k] for k in ("previous.crt", "ca.crt", "next.crt") if k in self.data]


def initial(new_ca: NewCa) -> CaState:
    ca = new_ca()
    return CaState({"ca.crt": ca.cert, "ca.key": ca.key})


def should_start(state: CaState, forced: bool, now: datetime.datetime,
                 renewal: datetime.timedelta) -> bool:
    """Start a rotation: asked for, or the CA is near its end (never while one runs)."""
    return state.stage == IDLE and (
        forced or certificates.needs_renewal(state.data["ca.crt"], now, renewal))


def advance(state: CaState, new_ca: NewCa) -> CaState:
    """The next stage's CA Secret (from idle: the first stage; from the last: idle)."""
    data = dict(state.data)
    if state.stage == IDLE:
        ca = new_ca()
        return CaState({**data, "next.crt": ca.cert, "next.key": ca.key}, TRUST_NEW_CA)
    if state.stage == TRUST_NEW_CA:
        return CaState({"ca.crt": data["next.crt"], "ca.key": data["next.key"],
                        "previous.crt": data["ca.crt"]}, REISSUE_CERTIFICATES)
    if state.stage == REISSUE_CERTIFICATES:
        return CaState({"ca.crt": data["ca.crt"], "ca.key": data["ca.key"]}, DROP_OLD_CA)
    return CaState({"ca.crt": data["ca.crt"], "ca.key": data["ca.key"]}, IDLE)


def may_advance(state: CaState, settled: bool, changed: bool,
                pending_users: Sequence[str] = ()) -> bool:
    """Move on to the next stage: one is under way, its roll is done (every pod current and
    ready, nothing written in this pass) and, at ``ReissueCertificates``, no certificate of
    the old CA is left to re-issue (``pending_users``: the clients CA's TLS users)."""
    return (state.stage != IDLE and settled and not changed
            and not (state.stage == REISSUE_CERTIFICATES and pending_users))


def stage_message(stage: str, kind: CaKind = CLUSTER) -> str:
    return kind.messages[stage]


@dataclass(frozen=True, slots=True)
class BrokerCertsPlan:
    data: dict[str, str]
    changed: bool
    reissued: tuple[str, ...]  # certificate names (``tls``, ``<pod>``) issued by this plan


def pod_sans(pod: str, headless_dns: str, bootstrap_service: str, bootstrap_dns: str,
             extra: Sequence[str]) -> list[str]:
    """A broker pod's names: its stable DNS name (``<pod>.<headless>.<ns>.svc`` and the
    ``cluster.local`` form), the bootstrap Service's, and ``tls.alternativeNames``."""
    return [f"{pod}.{headless_dns}", f"{pod}.{headless_dns}.cluster.local",
            bootstrap_dns, f"{bootstrap_dns}.cluster.local", bootstrap_service, *extra]


def _valid(data: Mapping[str, str], name: str, issuer: KeyPair, now: datetime.datetime,
           renewal: datetime.timedelta, sans: Sequence[str] | None) -> bool:
    cert = data.get(f"{name}.crt")
    if not cert or not data.get(f"{name}.key"):
        return False
    try:
        return (certificates.issued_by(cert, issuer.cert)
                and not certificates.needs_renewal(cert, now, renewal)
                and (sans is None or sorted(set(certificates.sans_of(cert))) == sorted(set(sans))))
    except ValueError:  # not PEM
        return False


def plan_broker_certs(existing: Mapping[str, str], trust: str, issuer: KeyPair,
                      pods: Mapping[str, Sequence[str]], subject_cn: str,
                      now: datetime.datetime, validity: datetime.timedelta,
                      renewal: datetime.timedelta) -> BrokerCertsPlan:
    """The broker certificates Secret's data. ``pods``: pod name -> its SANs; ``trust``: the
    ``ca.crt`` bundle; ``subject_cn``: the common name of every certificate here."""
    data = dict(existing)
    issued: list[str] = []

    def issue(name: str, sans: Sequence[str]) -> None:
        pair = certificates.issue(issuer, subject_cn, now, validity, sans=sans,
                                  server=bool(sans), client=True)
        data[f"{name}.crt"], data[f"{name}.key"] = pair.cert, pair.key
        issued.append(name)

    present = [p for p in pods if f"{p}.crt" in existing]
    stale = not _valid(existing, "tls", issuer, now, renewal, None) or not all(
        _valid(existing, p, issuer, now, renewal, pods[p]) for p in present)
    if stale:
        issue("tls", ())
    for pod, sans in pods.items():
        if stale or pod not in present:
            issue(pod, sans)
    data["ca.crt"] = trust
    return BrokerCertsPlan(data, data != dict(existing), tuple(issued))
