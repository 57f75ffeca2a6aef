"""How `strata cluster reassign` logs in: `--command-config` properties to ClientSecurity."""

from __future__ import annotations

import pytest

from strata.cli.errors import CliError
from strata.cli.protocol_client import client_security


def test_plaintext_needs_nothing() -> None:
    assert client_security({}) is None
    assert client_security({"security.protocol": "plaintext"}) is None


def test_sasl_plaintext_logs_in_with_the_properties_credentials() -> None:
    security = client_security({"security.protocol": "SASL_PLAINTEXT",
                                "sasl.mechanism": "scram-sha-512",
                                "sasl.username": "alice", "sasl.password": "pw"})
    assert security is not None and security.ssl_context is None
    assert (security.sasl_mechanism, security.username, security.password) == (
        "SCRAM-SHA-512", "alice", "pw")


def test_sasl_ssl_verifies_the_broker_unless_told_not_to() -> None:
    security = client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"})
    assert security is not None and security.ssl_context is not None
    assert security.ssl_context.check_hostname
    relaxed = client_security({"security.protocol": "SSL",
                               "ssl.endpoint.identification.algorithm": "none"})
    assert relaxed is not None and relaxed.ssl_context is not None
    assert not relaxed.ssl_context.check_hostname and relaxed.sasl_mechanism is None


@pytest.mark.parametrize(("properties", "named"), [
    ({"security.protocol": "KERBEROS"}, "security.protocol=KERBEROS"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism=GSSAPI"),
    ({"security.protocol": "SSL", "ssl.certificate.location": "/no/such.pem"},
     "cannot load /no/such.pem"),
])
def test_unusable_properties_are_named(properties: dict[str, str], named: str) -> None:
    with pytest.raises(CliError, match=named):
        client_security(properties)
