"""Which client properties the direct Fetch path honours itself, and which leave a read to
librdkafka (``strata.spark.broker_connection.supported``)."""

from __future__ import annotations

import pytest

from strata.client.client_properties import ClientPropertiesError
from strata.spark.broker_connection import security_of, supported

SCRAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
         "sasl.username": "alice", "sasl.password": "secret"}


@pytest.mark.parametrize("config", [
    {},
    {"security.protocol": "plaintext", "client.id": "job-7", "fetch.wait.max.ms": "50"},
    {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none"},
    SCRAM,
    {**SCRAM, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN"},
    {"security.protocol": "SSL", "ssl.certificate.location": "c.pem",
     "ssl.key.location": "k.pem", "ssl.key.password": "p", "ssl.ca.location": "ca.pem"},
], ids=["default", "plaintext", "ssl", "sasl-ssl-scram", "sasl-plain", "mutual-tls"])
def test_logins_it_can_do_itself(config: dict[str, str]) -> None:
    assert supported(config)


@pytest.mark.parametrize("config", [
    {**SCRAM, "sasl.mechanism": "GSSAPI"},
    {**SCRAM, "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.config": "x"},
    {"security.protocol": "SASL_SSL"},  # librdkafka's default mechanism is GSSAPI
    {"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"},
    {"security.protocol": "SSL", "ssl.keystore.location": "client.p12",
     "ssl.keystore.password": "p"},
    {"security.protocol": "SSL", "ssl.crl.location": "crl.pem"},
    {"security.protocol": "SSL", "ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256"},
    {"security.protocol": "KERBEROS"},
], ids=["gssapi", "oauthbearer", "default-mechanism", "no-verification", "pkcs12",
        "crl", "ciphers", "unknown-protocol"])
def test_anything_else_stays_with_librdkafka(config: dict[str, str]) -> None:
    assert not supported(config)


def test_a_property_it_knows_but_cannot_use_is_an_error_naming_it() -> None:
    config = {"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}
    assert supported(config)
    with pytest.raises(ClientPropertiesError, match=r"/nonexistent/ca\.pem"):
        security_of(config)
