"""``--command-config``: a Kafka client properties file, as Kafka's own tools take it.

Owns turning the file a Kafka user already has for ``kafka-topics.sh --command-config`` into
librdkafka properties for the CLI's confluent-kafka clients. Pure: text in, properties out.

The file is Java ``.properties`` (``strata.storage.meta_properties.parse_properties``). Keys
librdkafka shares with the Java client (``security.protocol``, ``sasl.mechanism``,
``ssl.key.password``, ``ssl.endpoint.identification.algorithm`` ...) pass through unchanged, as do
librdkafka's own (``sasl.username``, ``ssl.ca.location``); librdkafka itself rejects a key it does
not know, and the CLI names the file in that error. The Java-only keys a SASL/TLS client needs
are translated:

* ``sasl.jaas.config`` (``...LoginModule required username="..." password="...";``) becomes
  ``sasl.username`` and ``sasl.password``;
* ``ssl.truststore.location`` / ``ssl.truststore.certificates`` with
  ``ssl.truststore.type=PEM`` become ``ssl.ca.location`` / ``ssl.ca.pem``;
* ``ssl.keystore.location`` with ``ssl.keystore.type=PEM`` (one file holding the private key
  and the certificate chain) becomes ``ssl.certificate.location`` and ``ssl.key.location``;
  ``ssl.keystore.key`` / ``ssl.keystore.certificate.chain`` become ``ssl.key.pem`` /
  ``ssl.certificate.pem``;
* an empty ``ssl.endpoint.identification.algorithm`` (Java's "off") becomes ``none``.

Invariant: a store type other than PEM (JKS, PKCS12) or a JAAS line without both username and
password is a ``CommandConfigError`` naming the key, never a silently weaker connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from strata.broker.network.listeners import parse_jaas
from strata.storage.meta_properties import parse_properties

_STORE_TYPE_KEYS: Final = ("ssl.truststore.type", "ssl.keystore.type")


class CommandConfigError(ValueError):
    """The properties cannot be used; the message names the key."""


def client_properties(text: str) -> dict[str, str]:
    """librdkafka properties for the Java client properties ``text``."""
    props = parse_properties(text)
    out: dict[str, str] = {}
    for key in _STORE_TYPE_KEYS:
        store_type = props.pop(key, "PEM").strip().upper()
        if store_type != "PEM":
            raise CommandConfigError(
                f"{key}={store_type}: only PEM stores are supported (convert it with "
                f"openssl and set {key}=PEM)")
    jaas = props.pop("sasl.jaas.config", None)
    if jaas is not None:
        options = parse_jaas(jaas)
        if "username" not in options or "password" not in options:
            raise CommandConfigError(
                'sasl.jaas.config must give username="..." and password="..."')
        out["sasl.username"] = options["username"]
        out["sasl.password"] = options["password"]
    renames = {
        "ssl.truststore.location": "ssl.ca.location",
        "ssl.truststore.certificates": "ssl.ca.pem",
        "ssl.keystore.key": "ssl.key.pem",
        "ssl.keystore.certificate.chain": "ssl.certificate.pem",
    }
    for key, value in props.items():
        if key == "ssl.keystore.location":
            out["ssl.certificate.location"] = value
            out["ssl.key.location"] = value
        elif key == "ssl.endpoint.identification.algorithm" and not value.strip():
            out[key] = "none"
        else:
            out[renames.get(key, key)] = value
    return out


def load_client_properties(path: Path) -> dict[str, str]:
    """``client_properties`` of the file at ``path``; ``CommandConfigError`` naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return client_properties(text)
    except CommandConfigError as exc:
        raise CommandConfigError(f"{path}: {exc}") from None
