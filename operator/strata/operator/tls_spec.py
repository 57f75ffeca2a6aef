"""Where a Broker's TLS certificates come from: ``spec.tls``, parsed.

Pure. Three sources, decided once here (``CertificatesSpec.source``):

* ``secret``: ``tls.secretName`` names a Secret the user keeps (``tls.crt``, ``tls.key``,
  ``ca.crt``: cert-manager's layout); the operator only reads it.
* ``cert-manager``: ``tls.certManager.issuerRef`` is set; the operator writes one cert-manager
  ``Certificate`` (``cert_manager.py``) whose Secret is ``<broker>-broker-certs``.
* ``operator``: a listener needs TLS and neither is set; the operator keeps a cluster CA and
  per-broker certificates itself (``cluster_ca.py``, ``ca_rotation.py``) in
  ``<broker>-broker-certs``, and, when a listener authenticates clients by certificate, a
  clients CA that signs the certificates of ``User`` resources with ``authentication: tls``.
* ``none``: no listener uses TLS.

Validity and renewal windows (days) apply to what the operator or cert-manager issues:
``validityDays`` (365) and ``renewalDays`` (30) for broker and user certificates,
``caValidityDays`` (1825) for the CAs; a CA within ``renewalDays`` of its end is rotated.
``alternativeNames`` are extra subject alternative names of every broker certificate (a
load balancer's name, or ``127.0.0.1`` for a port-forward).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

SECRET: Final = "secret"
CERT_MANAGER: Final = "cert-manager"
OPERATOR: Final = "operator"
NONE: Final = "none"
ISSUER_KINDS: Final = ("Issuer", "ClusterIssuer")


class TlsSpecError(ValueError):
    """A ``spec.tls`` value the CRD schema would have refused."""


@dataclass(frozen=True, slots=True)
class IssuerRef:
    """cert-manager's ``issuerRef``."""

    name: str
    kind: str = "Issuer"
    group: str = "cert-manager.io"


@dataclass(frozen=True, slots=True)
class CertificatesSpec:
    source: str = NONE
    issuer: IssuerRef | None = None
    alternative_names: tuple[str, ...] = ()
    validity_days: int = 365
    renewal_days: int = 30
    ca_validity_days: int = 1825

    @property
    def validity(self) -> datetime.timedelta:
        return datetime.timedelta(days=self.validity_days)

    @property
    def renewal(self) -> datetime.timedelta:
        return datetime.timedelta(days=self.renewal_days)

    @property
    def ca_validity(self) -> datetime.timedelta:
        return datetime.timedelta(days=self.ca_validity_days)

    @property
    def generated(self) -> bool:
        """The operator or cert-manager makes the Secret (``<broker>-broker-certs``)."""
        return self.source in (OPERATOR, CERT_MANAGER)


def _days(raw: Mapping[str, Any], key: str, default: int) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise TlsSpecError(f"tls.{key} must be an integer >= 1, got {value!r}")
    return value


def parse_certificates(raw: Any, tls_needed: bool) -> CertificatesSpec:
    """``spec.tls`` as a ``CertificatesSpec``; ``tls_needed``: some listener uses TLS."""
    tls = raw if isinstance(raw, Mapping) else {}
    issuer_raw = (tls.get("certManager") or {}).get("issuerRef")
    issuer = None
    if issuer_raw:
        if not issuer_raw.get("name"):
            raise TlsSpecError("tls.certManager.issuerRef.name is required")
        kind = str(issuer_raw.get("kind", "Issuer"))
        if kind not in ISSUER_KINDS:
            raise TlsSpecError(f"tls.certManager.issuerRef.kind must be one of "
                               f"{', '.join(ISSUER_KINDS)}")
        issuer = IssuerRef(str(issuer_raw["name"]), kind,
                           str(issuer_raw.get("group", "cert-manager.io")))
    if tls.get("secretName") and issuer is not None:
        raise TlsSpecError("set either tls.secretName or tls.certManager, not both")
    if tls.get("secretName"):
        source = SECRET
    elif issuer is not None:
        source = CERT_MANAGER
    else:
        source = OPERATOR if tls_needed else NONE
    spec = CertificatesSpec(
        source=source, issuer=issuer,
        alternative_names=tuple(str(n) for n in tls.get("alternativeNames") or ()),
        validity_days=_days(tls, "validityDays", 365),
        renewal_days=_days(tls, "renewalDays", 30),
        ca_validity_days=_days(tls, "caValidityDays", 1825),
    )
    if spec.renewal_days >= spec.validity_days:
        raise TlsSpecError("tls.renewalDays must be less than tls.validityDays")
    return spec


def generated_secret_name(broker: str) -> str:
    """The Secret the operator (or cert-manager) keeps the broker certificates in."""
    return f"{broker}-broker-certs"
