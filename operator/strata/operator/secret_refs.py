"""The Secrets a Broker's pods are started from, and the digest that rolls them on rotation.

Pure. A broker pod reads its TLS Secret (``tls.crt``, ``tls.key``, ``ca.crt``) and the
inter-broker password (a ``secretKeyRef``) only at start; the admin pod reads those plus its own
credentials file (``auth.json``) and HTTPS Secret. So the data of exactly those keys is folded
into the pods' identity: the broker pod template's ``strata.dev/config-hash`` (a rotated
Secret makes every broker outdated: the operator's one-at-a-time rolling restart follows) and
the admin pod template's ``strata.dev/secrets-hash`` (the Deployment rolls itself). Other keys
of the same Secrets do not count, and a Broker without Secrets gets the digest ``""``, which
leaves the hashes what they were before Secrets counted.

The digest is the first 16 hex digits of a SHA-256 over the referenced values (base64, as the
API returns them), as Strimzi's ``strimzi.io/auth-hash``; a missing Secret or key counts as
absent, so its creation rolls the pods too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from strata.operator.builders import digest
from strata.operator.client_security import TLS_KEYS
from strata.operator.model import BrokerSpec

SecretRefs = tuple[tuple[str, tuple[str, ...]], ...]  # (Secret name, keys), in a stable order

ADMIN_AUTH_KEYS: Final = ("auth.json",)
ADMIN_TLS_KEYS: Final = ("tls.crt", "tls.key")


def broker_secret_refs(spec: BrokerSpec) -> SecretRefs:
    refs: list[tuple[str, tuple[str, ...]]] = []
    if spec.security.tls_secret:
        refs.append((spec.security.tls_secret, TLS_KEYS))
    password = spec.security.inter_broker_password
    if spec.inter_broker_listener.mechanism and password is not None:
        refs.append((password.name, (password.key,)))
    return tuple(refs)


def admin_secret_refs(spec: BrokerSpec) -> SecretRefs:
    refs = list(broker_secret_refs(spec))
    if spec.security.admin_auth_secret:
        refs.append((spec.security.admin_auth_secret, ADMIN_AUTH_KEYS))
    if spec.security.admin_tls_secret:
        refs.append((spec.security.admin_tls_secret, ADMIN_TLS_KEYS))
    return tuple(refs)


def secrets_digest(refs: SecretRefs, data: Mapping[str, Mapping[str, str] | None]) -> str:
    """``data``: each referenced Secret's ``data`` (None: the Secret is missing)."""
    if not refs:
        return ""
    values = [[name, key, (data.get(name) or {}).get(key)] for name, keys in refs for key in keys]
    return digest(values)
