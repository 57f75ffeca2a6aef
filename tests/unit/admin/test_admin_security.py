"""The admin API's security without a broker: the credentials file and its hashes, the
``Authorization`` header rules (401 + ``WWW-Authenticate``), the route → ACL mapping decided by
the brokers' own pure authorizer (403 with Kafka's error names), the ACL conversion from
confluent-kafka, the Kafka client properties and the HTTPS options.

The ACLs come from an ``AclCache`` fed by a local list instead of DescribeAcls (the cache's
injected source); routes that a caller *may* use then go on to an unreachable cluster, which
is never reached here: only refusals (401/403) are asserted in this file, the allowed paths
against a real broker in ``tests/integration/admin/test_admin_security.py``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AclBinding as KafkaAclBinding
from confluent_kafka.admin import AclOperation as KafkaAclOperation
from confluent_kafka.admin import AclPermissionType as KafkaAclPermissionType
from confluent_kafka.admin import ResourcePatternType as KafkaPatternType
from confluent_kafka.admin import ResourceType as KafkaResourceType
from fastapi import FastAPI

from strata.admin import credentials as creds
from strata.admin.app import create_app
from strata.admin.authentication import (
    AuthenticationError,
    AuthorizationMode,
    AuthSettings,
    authenticate,
)
from strata.admin.authorization import AclCache, from_kafka
from strata.admin.kafka_gateway import AdminSettings, kafka_client_config
from strata.admin.problems import PROBLEM_MEDIA_TYPE, status_for
from strata.admin.server import ServerTls
from strata.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

FAST = 1000  # PBKDF2 iterations in tests (the default is 600,000)
TOKENS = {"alice": "alice-token", "bob": "bob-token"}


def _credentials() -> creds.AdminCredentials:
    return creds.AdminCredentials.parse({
        "v": 1,
        "users": [{"username": "carol", "password": creds.hash_password("carol-pw", FAST)}],
        "tokens": [{"username": u, "sha256": creds.hash_token(t)} for u, t in TOKENS.items()],
    })


def _allow(principal: str, operation: AclOperation, resource_type: ResourceType, name: str,
           pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW))


# ------------------------------------------------------------------------------ credentials
def test_passwords_are_salted_pbkdf2_and_tokens_sha256() -> None:
    password = "correct horse battery"
    first, second = creds.hash_password(password, FAST), creds.hash_password(password, FAST)
    assert first != second and first.startswith("pbkdf2-sha256$1000$")
    assert password not in first
    parsed = creds.PasswordHash.parse(first, "x")
    assert parsed.matches(password) and not parsed.matches(password.upper())
    known = _credentials()
    assert known.check_token("alice-token") == "User:alice"
    assert known.check_token("alice-token ") is None and known.check_token("") is None
    assert known.check_password("carol", "carol-pw") == "User:carol"
    assert known.check_password("carol", "carol-pw") == "User:carol"  # remembered: same answer
    assert known.check_password("carol", "wrong") is None
    assert known.check_password("nobody", "carol-pw") is None


@pytest.mark.parametrize(("document", "message"), [
    ([], "JSON object"),
    ({"v": 2}, "format version"),
    ({"users": [{"username": "a"}]}, "password"),
    ({"users": [{"username": "a", "password": "plain-text"}]}, "pbkdf2-sha256"),
    ({"users": [{"username": "a:b", "password": "x"}]}, "without ':'"),
    ({"tokens": [{"username": "a", "sha256": "abc"}]}, "hex SHA-256"),
    ({"tokens": {"a": "b"}}, "list of objects"),
])
def test_malformed_credentials_are_refused_with_the_place(document: Any, message: str) -> None:
    with pytest.raises(creds.CredentialsError, match=message):
        creds.AdminCredentials.parse(document)


def test_credentials_tool_writes_hashes_only(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "auth.json"
    monkeypatch.setenv("STRATA_ADMIN_PASSWORD", "s3cret-pw")
    assert creds.main(["add-user", str(path), "dave", "--iterations", str(FAST)]) == 0
    assert creds.main(["add-token", str(path), "ci"]) == 0
    token = capsys.readouterr().out.strip()
    text = path.read_text()
    assert "s3cret-pw" not in text and token not in text
    assert path.stat().st_mode & 0o077 == 0
    loaded = creds.AdminCredentials.load(path)
    assert loaded.check_password("dave", "s3cret-pw") == "User:dave"
    assert loaded.check_token(token) == "User:ci"
    path.write_text("{not json")
    assert creds.main(["add-token", str(path), "ci"]) == 1
    assert "not JSON" in capsys.readouterr().err
    with pytest.raises(creds.CredentialsError, match="not JSON"):
        creds.AdminCredentials.load(path)


# ------------------------------------------------------------------------ Authorization header
def _auth_settings() -> AuthSettings:
    return AuthSettings(_credentials(), super_users=frozenset({"User:root"}))


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_authenticate_header_rules() -> None:
    settings = _auth_settings()
    assert authenticate(None, None) is None  # auth off: nobody is asked anything
    assert authenticate(settings, "Bearer alice-token") == "User:alice"
    assert authenticate(settings, "bearer   bob-token") == "User:bob"
    assert authenticate(settings, _basic("carol", "carol-pw")) == "User:carol"
    cases = [(None, "AUTHENTICATION_REQUIRED"), ("", "AUTHENTICATION_REQUIRED"),
             ("Bearer nope", "AUTHENTICATION_FAILED"), ("Bearer", "AUTHENTICATION_FAILED"),
             (_basic("carol", "nope"), "AUTHENTICATION_FAILED"),
             ("Basic !!!notbase64", "AUTHENTICATION_FAILED"),
             ("Digest abc", "AUTHENTICATION_REQUIRED")]
    for header, title in cases:
        with pytest.raises(AuthenticationError) as caught:
            authenticate(settings, header)
        assert caught.value.status == 401 and caught.value.title == title, header
        assert any(c.startswith("Bearer realm=") for c in caught.value.challenges)
        assert any(c.startswith("Basic realm=") for c in caught.value.challenges)
    with pytest.raises(AuthenticationError) as caught:
        authenticate(settings, "Bearer nope")
    assert 'error="invalid_token"' in caught.value.challenges[0]


# ------------------------------------------------------------------------------ the app
def _app(bindings: list[AclBinding]) -> FastAPI:
    settings = _auth_settings()
    app = create_app(AdminSettings("127.0.0.1:1", 1.0, auth=settings))

    async def fetch() -> list[AclBinding]:
        return bindings

    app.state.acl_cache = AclCache(fetch, settings)
    return app


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    bindings = [
        _allow("User:alice", AclOperation.ALL, ResourceType.TOPIC, "*"),
        _allow("User:bob", AclOperation.READ, ResourceType.TOPIC, "public-", PatternType.PREFIXED),
        _allow("User:bob", AclOperation.DESCRIBE, ResourceType.GROUP, "other"),
        _allow("User:bob", AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME),
    ]
    app = _app(bindings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://admin.test") as test_client:
        test_client.app = app  # type: ignore[attr-defined]
        yield test_client


def _operations(app: FastAPI) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for path, methods in app.openapi()["paths"].items():
        for method, operation in methods.items():
            out.append((method.upper(), path, operation))
    return out


def _concrete(path: str) -> str:
    return (path.replace("{name}", "orders").replace("{group_id}", "g1")
            .replace("{broker_id}", "0"))


async def test_every_v1_route_needs_credentials_and_health_stays_open(
        client: httpx.AsyncClient) -> None:
    operations = _operations(client.app)  # type: ignore[arg-type]
    v1 = [(m, p, o) for m, p, o in operations if p.startswith("/v1/")]
    assert len(v1) >= 15
    for method, path, operation in v1:
        assert {"bearerToken": []} in operation["security"], (method, path)
        assert {"basicAuth": []} in operation["security"], (method, path)
        assert "401" in operation["responses"] and "403" in operation["responses"]
        for headers in ({}, {"Authorization": "Bearer wrong"},
                        {"Authorization": _basic("carol", "wrong")}):
            response = await client.request(method, _concrete(path), headers=headers, json={})
            assert response.status_code == 401, (method, path, headers, response.text)
            assert response.headers["content-type"] == PROBLEM_MEDIA_TYPE
            assert response.json()["title"] in ("AUTHENTICATION_REQUIRED",
                                                "AUTHENTICATION_FAILED")
            challenges = response.headers.get_list("www-authenticate")
            assert any(c.startswith("Bearer") for c in challenges), challenges
            assert any(c.startswith("Basic") for c in challenges), challenges
    for path in ("/healthz", "/metrics", "/openapi.json"):
        assert (await client.get(path)).status_code == 200, path


@pytest.mark.parametrize(("method", "path", "body", "title", "needed"), [
    ("GET", "/v1/cluster", None, "CLUSTER_AUTHORIZATION_FAILED", None),
    ("GET", "/v1/brokers/0", None, "CLUSTER_AUTHORIZATION_FAILED", "DescribeConfigs Cluster"),
    ("POST", "/v1/topics", {"name": "orders"}, "TOPIC_AUTHORIZATION_FAILED",
     "Create Topic 'orders'"),
    ("GET", "/v1/topics/orders", None, "TOPIC_AUTHORIZATION_FAILED", "Describe Topic"),
    ("GET", "/v1/topics/public-x", None, "TOPIC_AUTHORIZATION_FAILED", "DescribeConfigs"),
    ("DELETE", "/v1/topics/public-x", None, "TOPIC_AUTHORIZATION_FAILED", "Delete Topic"),
    ("PATCH", "/v1/topics/public-x/configs", {"set": {"retention.ms": "1"}},
     "TOPIC_AUTHORIZATION_FAILED", "AlterConfigs Topic"),
    ("POST", "/v1/topics/public-x/partitions", {"count": 3}, "TOPIC_AUTHORIZATION_FAILED",
     "Alter Topic"),
    ("POST", "/v1/topics/public-x/records", [{"value": "v"}], "TOPIC_AUTHORIZATION_FAILED",
     "Write Topic"),
    ("GET", "/v1/topics/orders/records", None, "TOPIC_AUTHORIZATION_FAILED", "Read Topic"),
    ("GET", "/v1/groups/g1", None, "GROUP_AUTHORIZATION_FAILED", "Describe Group 'g1'"),
    ("POST", "/v1/groups/other/offsets/reset", {"to": "earliest"},
     "GROUP_AUTHORIZATION_FAILED", "Read Group 'other'"),
    ("DELETE", "/v1/groups/other", None, "GROUP_AUTHORIZATION_FAILED", "Delete Group"),
])
async def test_a_caller_without_the_right_gets_403_with_kafkas_name(
        client: httpx.AsyncClient, method: str, path: str, body: Any, title: str,
        needed: str | None) -> None:
    """carol (basic, no ACL at all) and bob (token, a few ACLs, none for this) are refused;
    bob's answer names the operation he lacks."""
    callers = [_basic("carol", "carol-pw")] + (["Bearer bob-token"] if needed else [])
    for who in callers:
        response = await client.request(method, path, headers={"Authorization": who},
                                        json=body)
        assert response.status_code == 403, (who, response.text)
        problem = response.json()
        assert response.headers["content-type"] == PROBLEM_MEDIA_TYPE
        assert problem["title"] == title
        if who.startswith("Bearer"):
            assert problem["detail"].startswith("User:bob is not allowed to "), problem
            assert needed is not None and needed in problem["detail"], problem


async def test_allowed_callers_pass_authorization(client: httpx.AsyncClient) -> None:
    """Past the ACL check the request goes to the (here unreachable) cluster: 503, not 403."""
    alice = {"Authorization": "Bearer alice-token"}
    bob = {"Authorization": "Bearer bob-token"}
    root_checks = [("GET", "/v1/topics/orders", alice), ("GET", "/v1/cluster", bob)]
    for method, path, headers in root_checks:
        response = await client.request(method, path, headers=headers)
        assert response.status_code == 503, response.text
        assert response.json()["title"] == "CLUSTER_UNREACHABLE"


def test_acl_cache_refetches_after_its_ttl() -> None:
    fetched: list[int] = []
    now = [100.0]
    bindings: list[AclBinding] = []

    async def fetch() -> list[AclBinding]:
        fetched.append(1)
        return list(bindings)

    cache = AclCache(fetch, AuthSettings(_credentials(), acl_cache_s=5.0), lambda: now[0])

    async def decide() -> bool:
        authorizer = await cache.authorizer()
        return authorizer.authorize("User:bob", "*", AclOperation.READ, ResourceType.TOPIC, "t")

    assert asyncio.run(decide()) is False
    bindings.append(_allow("User:bob", AclOperation.READ, ResourceType.TOPIC, "t"))
    now[0] += 4.9
    assert asyncio.run(decide()) is False and len(fetched) == 1  # still cached
    now[0] += 0.2
    assert asyncio.run(decide()) is True and len(fetched) == 2


def test_acls_from_confluent_kafka_keep_kafkas_codes() -> None:
    bindings = from_kafka([
        KafkaAclBinding(KafkaResourceType.TOPIC, "pay-", KafkaPatternType.PREFIXED, "User:a",
                        "*", KafkaAclOperation.WRITE, KafkaAclPermissionType.ALLOW),
        KafkaAclBinding(KafkaResourceType.BROKER, "kafka-cluster", KafkaPatternType.LITERAL,
                        "User:b", "10.0.0.1", KafkaAclOperation.ALTER_CONFIGS,
                        KafkaAclPermissionType.DENY),
    ])
    assert bindings == [
        AclBinding(ResourcePattern(ResourceType.TOPIC, "pay-", PatternType.PREFIXED),
                   AccessControlEntry("User:a", "*", AclOperation.WRITE,
                                      AclPermissionType.ALLOW)),
        AclBinding(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL),
                   AccessControlEntry("User:b", "10.0.0.1", AclOperation.ALTER_CONFIGS,
                                      AclPermissionType.DENY)),
    ]


# ------------------------------------------------------------------------------ settings
def test_kafka_client_config_from_file_then_environment() -> None:
    properties = "# the brokers' security\nsecurity.protocol=SASL_SSL\n\nsasl.mechanism = PLAIN\n"
    env = {"STRATA_ADMIN_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
           "STRATA_ADMIN_KAFKA_SASL_PASSWORD": "pw", "STRATA_OTHER": "x"}
    assert kafka_client_config(env, properties) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.password": "pw"}
    with pytest.raises(ValueError, match="line 1"):
        kafka_client_config({}, "no equals sign")
    with pytest.raises(ValueError, match=r"bootstrap\.servers"):
        kafka_client_config({}, "bootstrap.servers=x:1")


def test_server_tls_options(tmp_path: Path) -> None:
    tls = ServerTls(tmp_path / "c.pem", tmp_path / "k.pem", tmp_path / "ca.pem", "required")
    assert tls.uvicorn_options()["ssl_cert_reqs"] == ssl.CERT_REQUIRED
    with pytest.raises(ValueError, match="CA"):
        ServerTls(tmp_path / "c.pem", tmp_path / "k.pem", None, "optional").uvicorn_options()
    with pytest.raises(ValueError, match="one of"):
        ServerTls(tmp_path / "c.pem", tmp_path / "k.pem", None, "maybe").uvicorn_options()


def test_authorization_errors_are_403_and_mode_parses() -> None:
    for name in ("TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED",
                 "CLUSTER_AUTHORIZATION_FAILED"):
        assert status_for(name) == 403
    assert AuthorizationMode("none") is AuthorizationMode.NONE
    assert json.loads(json.dumps({"mode": AuthorizationMode.ACL}))["mode"] == "acl"
