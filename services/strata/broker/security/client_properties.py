"""A Kafka client's security from librdkafka-style properties: ``ClientSecurity`` for Strata's own
Kafka protocol client (``strata.broker.network.broker_client.BrokerClient``).

Whoever reaches brokers with both librdkafka and our codec describes the login once, with
librdkafka's names (the CLI's ``--command-config``, the operator's client settings), and this
module turns the same properties into what ``BrokerClient`` needs:

* ``security.protocol``: PLAINTEXT (no ``ClientSecurity``: None), SSL, SASL_PLAINTEXT, SASL_SSL;
  any case. Anything else is refused.
* SASL: ``sasl.mechanism`` (librdkafka's alias ``sasl.mechanisms`` too; default GSSAPI, as
  librdkafka's, which Strata does not serve: refused), ``sasl.username``, ``sasl.password``.
* TLS: the brokers are verified against ``ssl.ca.location`` (a PEM file) or ``ssl.ca.pem`` (PEM
  text), else the system's CAs; ``ssl.endpoint.identification.algorithm=none`` turns off the
  host name check (librdkafka's default ``https`` checks it). A client certificate is
  ``ssl.certificate.location`` + ``ssl.key.location`` (+ ``ssl.key.password``), or
  ``ssl.certificate.pem`` + ``ssl.key.pem`` as text: Python's ``ssl`` loads a certificate only
  from a file, so PEM text is written to a private temporary file (mode 0600) that is removed
  as soon as it is loaded — the one I/O here besides reading the named files.

Errors: ``ClientPropertiesError`` (a ``ValueError``) naming the property, or its subclass
``UnsupportedLogin`` for a protocol or mechanism Strata's client does not speak (checked by
:func:`login_kind` without reading any file); callers add where the properties came from (the
CLI: ``--command-config``). :data:`PROPERTIES` lists every property read here.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from typing import Final

from strata.broker.network.listeners import SUPPORTED_MECHANISMS, ClientSecurity

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Every property client_security() reads; a caller that must honour a client's whole login
# (strata.spark.broker_connection) leaves any other security property to librdkafka.
PROPERTIES: Final = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
    "ssl.ca.location", "ssl.ca.pem", "ssl.endpoint.identification.algorithm",
    "ssl.certificate.location", "ssl.key.location", "ssl.key.password", "ssl.certificate.pem",
    "ssl.key.pem",
})


class ClientPropertiesError(ValueError):
    """A property that cannot be used to connect (unknown value, unreadable file)."""


class UnsupportedLogin(ClientPropertiesError):
    """A ``security.protocol`` or SASL mechanism Strata's own client does not speak."""


def login_kind(properties: Mapping[str, str]) -> tuple[str, str | None]:
    """``(security.protocol, SASL mechanism or None)``, upper-cased, without reading any file;
    ``UnsupportedLogin`` names what Strata's client does not speak."""
    protocol = properties.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise UnsupportedLogin(f"security.protocol={protocol} is not one of "
                               f"{', '.join(PROTOCOLS)}")
    if not protocol.startswith("SASL"):
        return protocol, None
    mechanism = (properties.get("sasl.mechanism") or properties.get("sasl.mechanisms")
                 or "GSSAPI").strip().upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise UnsupportedLogin(f"sasl.mechanism={mechanism} is not one of "
                               f"{', '.join(SUPPORTED_MECHANISMS)}")
    return protocol, mechanism


def client_security(properties: Mapping[str, str]) -> ClientSecurity | None:
    """The ``ClientSecurity`` for librdkafka-style ``properties`` (None for PLAINTEXT)."""
    protocol, mechanism = login_kind(properties)
    if protocol == "PLAINTEXT":
        return None
    context = ssl_context(properties) if protocol.endswith("SSL") else None
    if mechanism is None:
        return ClientSecurity(ssl_context=context)
    return ClientSecurity(context, mechanism, properties.get("sasl.username", ""),
                          properties.get("sasl.password", ""))


def ssl_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    """The client TLS context the ``ssl.*`` properties describe."""
    ca_pem = properties.get("ssl.ca.pem")
    try:
        context = ssl.create_default_context(cafile=properties.get("ssl.ca.location") or None,
                                             cadata=ca_pem or None)
    except (OSError, ssl.SSLError) as exc:
        where = "ssl.ca.pem" if ca_pem else properties.get("ssl.ca.location")
        raise ClientPropertiesError(f"cannot load the CA of {where}: {exc}") from None
    if properties.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    certificate = properties.get("ssl.certificate.location")
    password = properties.get("ssl.key.password")
    if certificate:
        try:
            context.load_cert_chain(certificate, properties.get("ssl.key.location") or None,
                                    password)
        except (OSError, ssl.SSLError) as exc:
            raise ClientPropertiesError(f"cannot load {certificate}: {exc}") from None
    elif properties.get("ssl.certificate.pem"):
        _load_pem_chain(context, properties["ssl.certificate.pem"],
                        properties.get("ssl.key.pem", ""), password)
    return context


def _load_pem_chain(context: ssl.SSLContext, certificate: str, key: str,
                    password: str | None) -> None:
    """Load a certificate and key given as PEM text (through a private temporary file)."""
    descriptor, path = tempfile.mkstemp(prefix="strata-client-", suffix=".pem")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:  # mkstemp: mode 0600
            out.write(certificate.rstrip("\n") + "\n" + key)
        context.load_cert_chain(path, None, password)
    except (OSError, ssl.SSLError) as exc:
        raise ClientPropertiesError(
            f"cannot load ssl.certificate.pem with ssl.key.pem: {exc}") from None
    finally:
        os.unlink(path)
