"""How the operator and the admin service reach a Broker's cluster: librdkafka properties.

Pure. Both connect to the inter-broker listener (``BrokerSpec.inter_broker_listener``) as the
inter-broker user, a super user when authorization is on (``builders.super_users``):

* ``security.protocol`` is the listener's (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL);
* TLS: the CA of the TLS Secret verifies the brokers; for a listener with ``authentication:
  tls`` the brokers' own certificate and key are the client certificate (its subject DN is the
  principal, so list it in ``authorization.superUsers``);
* SASL: ``sasl.mechanism`` from the listener, ``sasl.username`` from ``interBroker.username``.
  The password is never returned here: the admin Deployment takes it from the Secret
  (``secretKeyRef``), the operator reads the Secret when it connects.

``client_properties`` names files (the admin pod's mounts); the operator, which has no files,
passes PEM text instead (``ssl.ca.pem``...): ``pem`` holds the Secret's ``ca.crt``, ``tls.crt``
and ``tls.key``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from strata.operator.model import BrokerSpec

TLS_KEYS: Final = ("ca.crt", "tls.crt", "tls.key")


def client_properties(spec: BrokerSpec, tls_dir: str | None = None,
                      pem: Mapping[str, str] | None = None) -> dict[str, str]:
    """The non-secret librdkafka properties for the inter-broker listener; TLS material as
    files under ``tls_dir`` or as PEM text from ``pem`` (the TLS Secret's data)."""
    listener = spec.inter_broker_listener
    props = {"security.protocol": listener.protocol}
    if listener.protocol in ("SSL", "SASL_SSL"):
        client_cert = listener.authentication == "tls"
        if pem is not None:
            props["ssl.ca.pem"] = pem.get("ca.crt", "")
            if client_cert:
                props["ssl.certificate.pem"] = pem.get("tls.crt", "")
                props["ssl.key.pem"] = pem.get("tls.key", "")
        elif tls_dir is not None:
            props["ssl.ca.location"] = f"{tls_dir}/ca.crt"
            if client_cert:
                props["ssl.certificate.location"] = f"{tls_dir}/tls.crt"
                props["ssl.key.location"] = f"{tls_dir}/tls.key"
    if listener.mechanism:
        props["sasl.mechanism"] = listener.mechanism
        props["sasl.username"] = spec.security.inter_broker_username or ""
    return props
