"""TLS contexts from Kafka's ``ssl.*`` settings, PEM only, stdlib ``ssl``.

Owns how a listener's server context and the inter-broker client context are built:

* ``ssl.keystore.type`` must be ``PEM`` (JKS and PKCS12 need a JVM keystore reader);
* our certificate and key: ``ssl.keystore.location`` (one PEM file holding the chain and the
  key, Kafka's PEM keystore file), or ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``
  (the PEM *text*, as in Kafka); ``ssl.key.password`` decrypts an encrypted key;
* trusted CAs: ``ssl.truststore.location`` (a PEM file) or ``ssl.truststore.certificates`` (PEM
  text); used to verify client certificates (server side) and the leader (client side);
* ``ssl.client.auth``: ``required`` (CERT_REQUIRED), ``requested`` (CERT_OPTIONAL), ``none``;
* client side: ``ssl.endpoint.identification.algorithm`` ``https`` (Kafka's default) checks the
  leader's host name against its certificate; empty turns the check off.

Every key may be set per listener as ``listener.name.<name>.<key>``. A bad file or value is a
``ConfigError`` at startup, never a failure at the first connection.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator

from strata.broker.config import BrokerConfig, ConfigError
from strata.broker.network.listeners import listener_value

CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
               "none": ssl.CERT_NONE}


@contextlib.contextmanager
def _pem_files(chain: str, key: str) -> Iterator[tuple[str, str]]:
    """PEM text in private temporary files (``load_cert_chain`` only reads files)."""
    with tempfile.TemporaryDirectory(prefix="strata-tls-") as tmp:
        paths = []
        for name, text in (("chain.pem", chain), ("key.pem", key)):
            path = os.path.join(tmp, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(text)
            paths.append(path)
        yield paths[0], paths[1]


def _load_keystore(context: ssl.SSLContext, config: BrokerConfig, listener: str,
                   required: bool) -> None:
    kind = (listener_value(config, listener, "ssl.keystore.type") or "PEM").upper()
    if kind != "PEM":
        raise ConfigError(f"ssl.keystore.type={kind}: Strata reads PEM keystores only")
    password = listener_value(config, listener, "ssl.key.password") or None
    location = listener_value(config, listener, "ssl.keystore.location")
    chain = listener_value(config, listener, "ssl.keystore.certificate.chain")
    key = listener_value(config, listener, "ssl.keystore.key")
    try:
        if location:
            context.load_cert_chain(location, password=password)
        elif chain and key:
            with _pem_files(chain, key) as (chain_path, key_path):
                context.load_cert_chain(chain_path, key_path, password=password)
        elif required:
            raise ConfigError(f"listener {listener} uses TLS but neither ssl.keystore.location "
                              "nor ssl.keystore.certificate.chain + ssl.keystore.key is set")
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"listener {listener}: cannot load the keystore: {exc}") from exc


def _load_truststore(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> bool:
    kind = (listener_value(config, listener, "ssl.truststore.type") or "PEM").upper()
    if kind != "PEM":
        raise ConfigError(f"ssl.truststore.type={kind}: Strata reads PEM truststores only")
    location = listener_value(config, listener, "ssl.truststore.location")
    certificates = listener_value(config, listener, "ssl.truststore.certificates")
    try:
        if location:
            context.load_verify_locations(cafile=location)
        elif certificates:
            context.load_verify_locations(cadata=certificates)
        else:
            return False
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"listener {listener}: cannot load the truststore: {exc}") from exc
    return True


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_keystore(context, config, listener, required=True)
    client_auth = (listener_value(config, listener, "ssl.client.auth") or "none").lower()
    if client_auth not in CLIENT_AUTH:
        raise ConfigError(f"ssl.client.auth={client_auth!r}: one of required, requested, none")
    has_trust = _load_truststore(context, config, listener)
    if client_auth != "none" and not has_trust:
        raise ConfigError(f"ssl.client.auth={client_auth} on listener {listener} needs "
                          "ssl.truststore.location to verify client certificates")
    context.verify_mode = CLIENT_AUTH[client_auth]
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_truststore(context, config, listener):
        context.load_default_certs()
    _load_keystore(context, config, listener, required=False)
    algorithm = listener_value(config, listener, "ssl.endpoint.identification.algorithm")
    context.check_hostname = (algorithm if algorithm is not None else "https").lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context
