"""The real ``strata admin`` with authentication on, served over HTTPS with a test CA, in front of
a real broker: 401 without or with wrong credentials (bearer and basic), 200 with right ones,
the health endpoints open, plain HTTP refused, and a client certificate required when asked.

Authorization here is ``--authorization none`` (the module's broker has no authorizer); the
ACL decisions against a broker with ACLs are in ``tests/integration/security``.
"""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from strata.admin import credentials as creds

from ..broker_process import BrokerProcess
from ..security.certs import Issued, Pki
from .admin_process import AdminProcess, running_admin

pytestmark = pytest.mark.integration

TOKEN = "integration-token-0123456789"
PASSWORD = "carol-password"


def write_auth_file(path: Path, tokens: dict[str, str], users: dict[str, str]) -> Path:
    path.write_text(json.dumps({
        "v": 1,
        "users": [{"username": u, "password": creds.hash_password(p, 1000)}
                  for u, p in users.items()],
        "tokens": [{"username": u, "sha256": creds.hash_token(t)} for u, t in tokens.items()],
    }))
    return path


def basic(user: str, password: str) -> dict[str, str]:
    value = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {value}"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Pki, Issued, Issued]:
    ca = Pki(tmp_path_factory.mktemp("admin-pki"), "admin")
    return (ca, ca.issue("admin-server", "/CN=localhost/O=Strata", server=True),
            ca.issue("admin-client", "/CN=ops/O=Strata"))


@pytest.fixture(scope="module")
def secure_admin(tmp_path_factory: pytest.TempPathFactory, admin_broker: BrokerProcess,
                 pki: tuple[Pki, Issued, Issued]) -> Iterator[AdminProcess]:
    ca, server, _ = pki
    workdir = tmp_path_factory.mktemp("secure-admin")
    auth = write_auth_file(workdir / "auth.json", {"alice": TOKEN}, {"carol": PASSWORD})
    with running_admin(workdir, admin_broker.bootstrap, ca=ca.ca_cert,
                       args=["--auth-file", str(auth), "--authorization", "none"],
                       env={"STRATA_ADMIN_SSL_CERTFILE": str(server.cert),
                            "STRATA_ADMIN_SSL_KEYFILE": str(server.key)}) as started:
        yield started


def test_https_with_tokens_and_basic_users(secure_admin: AdminProcess) -> None:
    with httpx.Client(base_url=secure_admin.url, verify=secure_admin.verify,
                      timeout=30.0) as api:
        for headers in ({}, {"Authorization": "Bearer not-the-token"},
                        basic("carol", "wrong"), basic("mallory", PASSWORD)):
            response = api.get("/v1/topics", headers=headers)
            assert response.status_code == 401, response.text
            assert response.headers["content-type"] == "application/problem+json"
            challenges = response.headers.get_list("www-authenticate")
            assert {c.split()[0] for c in challenges} == {"Bearer", "Basic"}
        created = api.post("/v1/topics", json={"name": "secured", "partitions": 1},
                           headers={"Authorization": f"Bearer {TOKEN}"})
        assert created.status_code == 201, created.text
        listed = api.get("/v1/topics", headers=basic("carol", PASSWORD))
        assert listed.status_code == 200
        assert "secured" in [t["name"] for t in listed.json()]
        for path in ("/healthz", "/readyz", "/metrics"):
            assert api.get(path).status_code == 200, path
    with pytest.raises(httpx.HTTPError):  # the port speaks TLS only
        httpx.get(f"http://127.0.0.1:{secure_admin.port}/healthz", timeout=5.0)
    with pytest.raises(httpx.ConnectError):  # a client that does not trust the test CA
        httpx.get(f"{secure_admin.url}/healthz", timeout=5.0)


def test_client_certificates_when_required(tmp_path: Path, admin_broker: BrokerProcess,
                                           pki: tuple[Pki, Issued, Issued]) -> None:
    ca, server, client = pki
    auth = write_auth_file(tmp_path / "auth.json", {"alice": TOKEN}, {})
    args = ["--auth-file", str(auth), "--authorization", "none",
            "--ssl-certfile", str(server.cert), "--ssl-keyfile", str(server.key),
            "--ssl-ca-certs", str(ca.ca_cert), "--ssl-client-auth", "required"]
    admin = AdminProcess(tmp_path / "mtls-admin", admin_broker.bootstrap, args=args,
                         ca=ca.ca_cert, client_cert=(client.cert, client.key))
    admin.start()
    try:
        response = httpx.get(f"{admin.url}/v1/cluster", verify=admin.verify, timeout=30.0,
                             headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 200, response.text
        without_cert = ssl.create_default_context(cafile=str(ca.ca_cert))
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{admin.url}/healthz", verify=without_cert, timeout=5.0)
    finally:
        assert admin.stop() == 0, admin.log_tail()


def test_bad_security_options_are_usage_errors(tmp_path: Path,
                                               admin_broker: BrokerProcess) -> None:
    bad = tmp_path / "auth.json"
    bad.write_text('{"users": [{"username": "a", "password": "plain"}]}')
    admin = AdminProcess(tmp_path / "bad", admin_broker.bootstrap, args=["--auth-file", str(bad)])
    with pytest.raises(RuntimeError, match="exited with 2") as caught:
        admin.start()
    assert "pbkdf2-sha256" in str(caught.value)
