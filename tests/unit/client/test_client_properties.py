"""librdkafka-style properties to ``ClientSecurity``: protocols, mechanisms, TLS from files or
PEM text (the operator's form), and the errors that name the property at fault."""

from __future__ import annotations

import ssl
import subprocess
import tempfile
from pathlib import Path

import pytest

from strata.client.client_properties import ClientPropertiesError, client_security


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA and a client certificate signed by it, as PEM files."""
    d = tmp_path_factory.mktemp("pem")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=ca",
             "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"))
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=operator",
             "-keyout", str(d / "tls.key"), "-out", str(d / "tls.csr"))
    _openssl("x509", "-req", "-in", str(d / "tls.csr"), "-CA", str(d / "ca.crt"),
             "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "1",
             "-out", str(d / "tls.crt"))
    return {name: d / name for name in ("ca.crt", "tls.crt", "tls.key")}


def test_plaintext_is_no_security() -> None:
    assert client_security({}) is None
    assert client_security({"security.protocol": "plaintext"}) is None


def test_sasl_mechanism_and_credentials() -> None:
    security = client_security({"security.protocol": "sasl_plaintext",
                                "sasl.mechanisms": "scram-sha-256",  # librdkafka's alias
                                "sasl.username": "op", "sasl.password": "pw"})
    assert security is not None and security.ssl_context is None
    assert (security.sasl_mechanism, security.username, security.password) == (
        "SCRAM-SHA-256", "op", "pw")


def test_ca_as_pem_text_verifies_brokers_by_host(pem: dict[str, Path]) -> None:
    security = client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                "ssl.ca.pem": pem["ca.crt"].read_text()})
    assert security is not None and security.ssl_context is not None
    context = security.ssl_context
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "ca"),),)]


def test_client_certificate_from_files_or_pem_text_leaves_no_file(
        pem: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    from_files = client_security({"security.protocol": "SSL",
                                  "ssl.ca.location": str(pem["ca.crt"]),
                                  "ssl.certificate.location": str(pem["tls.crt"]),
                                  "ssl.key.location": str(pem["tls.key"])})
    from_text = client_security({"security.protocol": "SSL",
                                 "ssl.ca.pem": pem["ca.crt"].read_text(),
                                 "ssl.certificate.pem": pem["tls.crt"].read_text(),
                                 "ssl.key.pem": pem["tls.key"].read_text()})
    assert from_files is not None and from_text is not None
    assert from_text.ssl_context is not None and from_text.sasl_mechanism is None
    assert list(tmp_path.iterdir()) == []  # the key's temporary file is gone
    with pytest.raises(ClientPropertiesError, match=r"ssl\.certificate\.pem with ssl\.key\.pem"):
        client_security({"security.protocol": "SSL",
                         "ssl.certificate.pem": pem["tls.crt"].read_text(),
                         "ssl.key.pem": "-----BEGIN PRIVATE KEY-----\nbroken\n"})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("properties", "named"), [
    ({"security.protocol": "KERBEROS"}, "security.protocol=KERBEROS"),
    ({"security.protocol": "SASL_SSL"}, "sasl.mechanism=GSSAPI"),
    ({"security.protocol": "SSL", "ssl.ca.pem": "not a certificate"}, "CA of ssl.ca.pem"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/no/ca.pem"}, "CA of /no/ca.pem"),
    ({"security.protocol": "SSL", "ssl.certificate.location": "/no/such.pem"},
     "cannot load /no/such.pem"),
])
def test_unusable_properties_are_named(properties: dict[str, str], named: str) -> None:
    with pytest.raises(ClientPropertiesError, match=named):
        client_security(properties)


def test_login_kind_names_the_protocol_and_mechanism_without_reading_any_file() -> None:
    from strata.client.client_properties import UnsupportedLogin, login_kind

    missing_ca = {"ssl.ca.location": "/nonexistent/ca.pem"}
    assert login_kind({}) == ("PLAINTEXT", None)
    assert login_kind({"security.protocol": "ssl", **missing_ca}) == ("SSL", None)
    assert login_kind({"security.protocol": "SASL_SSL", "sasl.mechanisms": "scram-sha-256",
                       **missing_ca}) == ("SASL_SSL", "SCRAM-SHA-256")
    with pytest.raises(UnsupportedLogin, match=r"sasl\.mechanism=GSSAPI"):
        login_kind({"security.protocol": "SASL_PLAINTEXT"})  # librdkafka's default mechanism
    with pytest.raises(UnsupportedLogin, match=r"security\.protocol=KERBEROS"):
        login_kind({"security.protocol": "kerberos"})
    with pytest.raises(ClientPropertiesError, match="nonexistent"):  # files: client_security
        client_security({"security.protocol": "SSL", **missing_ca})
