"""Client certificates of ``User`` resources with ``authentication.type: tls``.

``plan_certificate`` is pure (``now`` injected): the User's Secret data — ``user.crt`` +
``user.key`` (subject ``CN=<userName>``, client auth only, ``tls.validityDays``) and ``ca.crt``
(the brokers' trust bundle, so the client verifies the brokers) — re-issued when missing, not
signed by the current clients CA, or within ``tls.renewalDays`` of its end; None when nothing
changes. "The current clients CA" is the clients CA Secret's ``ca.crt`` + ``ca.key``, the
issuing CA of ``ca_rotation``'s Secret layout, so a clients CA rotation is followed without a
stage check here: at ``TrustNewCa`` the new CA is only ``next.crt`` (nothing re-issued), at
``ReissueCertificates`` it becomes ``ca.crt`` and every TLS user's next reconcile re-issues
(the Broker's reconcile waits for that, ``cluster_ca.pending_users``, before dropping the old
CA). With Kafka's default ``ssl.principal.mapping.rules`` the broker names the client
``User:CN=<userName>``, which is the principal the User's ACLs are written for
(``UserSpec.principal``): no broker change is needed.

``ensure_certificate`` is the I/O: it reads the Broker's clients CA Secret
(``<broker>-clients-ca``, made by the Broker's reconcile when a listener has
``authentication: tls`` and the operator makes the certificates, ``cluster_ca.py``) and the
brokers' Secret for the bundle, and creates or patches the User's Secret (named after the
User, owned by it, so deleted with it; a Secret of that name the User does not own is
``SecretConflict``, never overwritten).
"""

from __future__ import annotations

import base64
import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from strata.operator import certificates, user_sync
from strata.operator.certificates import KeyPair
from strata.operator.cluster_ca import clients_ca_secret, decoded, utc_now
from strata.operator.kube import Kube
from strata.operator.model import BrokerNames, BrokerSpec, SpecError
from strata.operator.tls_spec import OPERATOR, CertificatesSpec, generated_secret_name
from strata.operator.user_spec import UserSpec

logger = logging.getLogger(__name__)

CERT_KEY: Final = "user.crt"
KEY_KEY: Final = "user.key"
CA_KEY: Final = "ca.crt"
CLIENTS_CA_NOT_FOUND: Final = "ClientsCaNotFound"
SECRET_CONFLICT: Final = "SecretConflict"  # as user.py says it of a password Secret


def plan_certificate(existing: Mapping[str, str], clients_ca: KeyPair, trust: str,
                     user_name: str, now: datetime.datetime,
                     certs: CertificatesSpec) -> dict[str, str] | None:
    """The User Secret's new data, or None when it is current."""
    cert = existing.get(CERT_KEY, "")
    current = bool(cert and existing.get(KEY_KEY)) and \
        certificates.issued_by(cert, clients_ca.cert) and \
        not certificates.needs_renewal(cert, now, certs.renewal) and \
        certificates.subject_of(cert) == f"CN={user_name}"
    data = dict(existing)
    if not current:
        pair = certificates.issue(clients_ca, user_name, now, certs.validity,
                                  organization=None, server=False, client=True)
        data[CERT_KEY], data[KEY_KEY] = pair.cert, pair.key
    data[CA_KEY] = trust
    return None if data == dict(existing) else data


def ensure_certificate(kube: Kube, body: Mapping[str, Any], spec: UserSpec,
                       broker: Mapping[str, Any],
                       now: Callable[[], datetime.datetime] = utc_now) -> tuple[str, str]:
    """(the User's Secret name, "" or ``Reason:message``)."""
    namespace = body["metadata"]["namespace"]
    names = BrokerNames(str(broker["metadata"]["name"]), namespace)
    name = user_sync.secret_name(body)
    try:
        broker_spec = BrokerSpec.parse(broker.get("spec") or {}, names.name)
    except SpecError as exc:
        return name, f"{CLIENTS_CA_NOT_FOUND}:Broker {names.name}: {exc}"
    if broker_spec.certificates.source != OPERATOR or not any(
            lst.authentication == "tls" for lst in broker_spec.listeners.values()):
        return name, (f"{CLIENTS_CA_NOT_FOUND}:Broker {names.name} has no listener with "
                      "authentication: tls and operator-made certificates")
    ca = decoded(kube.read("Secret", namespace, clients_ca_secret(names)))
    trust = decoded(kube.read("Secret", namespace, generated_secret_name(names.name)))
    if "ca.crt" not in ca or "ca.key" not in ca or "ca.crt" not in trust:
        return name, (f"{CLIENTS_CA_NOT_FOUND}:the clients CA of Broker {names.name} is not "
                      "made yet")
    live = kube.read("Secret", namespace, name)
    if live is not None and not user_sync.owned_by(live, body):
        return name, f"{SECRET_CONFLICT}:Secret {name} exists and is not this User's"
    data = plan_certificate(decoded(live), KeyPair(ca["ca.crt"], ca["ca.key"]),
                            trust["ca.crt"], spec.user_name, now(),
                            broker_spec.certificates)
    if data is None:
        return name, ""
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    if live is None:
        secret = user_sync.generated_secret(body, spec, "")
        secret["data"] = encoded
        kube.create(secret)
    else:
        kube.patch("Secret", namespace, name, {"data": encoded})
    logger.info("User %s/%s: client certificate CN=%s written to Secret %s", namespace,
                body["metadata"]["name"], spec.user_name, name)
    return name, ""

