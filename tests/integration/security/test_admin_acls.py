"""The admin API authorized by the brokers' own ACLs, end to end.

A real broker with SASL/SCRAM and ``authorizer.class.name=strata.acl`` (``super.users``: the
``admin`` user the admin service logs in as, and ANONYMOUS for the test harness's plaintext
port); ACLs are created over the Kafka protocol with confluent-kafka's ``create_acls``. The
real ``strata admin`` fetches them with DescribeAcls (``--acl-cache 0``: every request sees
the current ACLs) and decides each REST call for the caller's principal: alice (token) may do
everything on topics prefixed ``alice-`` and describe the cluster; bob (basic) has no ACL.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from ..admin.admin_process import running_admin
from ..admin.test_admin_security import write_auth_file
from ..broker_process import BrokerProcess, create_user, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ADMIN_PASSWORD = "admin-secret"
ALICE = {"Authorization": "Bearer alice-token-0123456789"}
BOB = {"Authorization": "Basic " + base64.b64encode(b"bob:bob-password").decode()}


def _sasl(port: int) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
            "sasl.password": ADMIN_PASSWORD}


@pytest.fixture(scope="module")
def acl_setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    workdir = tmp_path_factory.mktemp("acl-broker")
    sasl_port = free_port()
    broker = BrokerProcess(workdir)
    listeners = f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    broker.config.update({
        "listeners": listeners, "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "strata.acl", "super.users": "User:admin;User:ANONYMOUS",
        "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1"})
    create_user("admin", ADMIN_PASSWORD, "--log-dir", str(broker.data_dir))
    broker.start()
    try:
        admin = AdminClient(_sasl(sasl_port))
        acls = [
            AclBinding(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED,
                       "User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW),
            AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                       "User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW),
        ]
        for future in admin.create_acls(acls, request_timeout=20).values():
            future.result(timeout=30)
        admin.create_topics([NewTopic("others-topic", 1, 1)])["others-topic"].result(timeout=30)
        auth = write_auth_file(workdir / "auth.json", {"alice": ALICE["Authorization"][7:]},
                               {"bob": "bob-password"})
        properties = workdir / "client.properties"
        properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                              f"sasl.username=admin\nsasl.password={ADMIN_PASSWORD}\n")
        with running_admin(workdir / "admin", f"127.0.0.1:{sasl_port}",
                           args=["--auth-file", str(auth), "--super-users", "User:admin",
                                 "--acl-cache", "0", "--client-properties",
                                 str(properties)]) as service:
            yield service.url, sasl_port
    finally:
        code = broker.stop()
    assert code == 0, broker.log_tail()


def test_rest_calls_are_decided_by_the_brokers_acls(acl_setup: tuple[str, int]) -> None:
    url, _ = acl_setup
    with httpx.Client(base_url=url, timeout=30.0) as api:
        assert api.get("/v1/topics").status_code == 401
        created = api.post("/v1/topics", json={"name": "alice-orders", "partitions": 1},
                           headers=ALICE)
        assert created.status_code == 201, created.text
        refused = api.post("/v1/topics", json={"name": "alice-more"}, headers=BOB)
        assert refused.status_code == 403
        assert refused.json()["title"] == "TOPIC_AUTHORIZATION_FAILED"
        outside = api.post("/v1/topics", json={"name": "bobs-topic"}, headers=ALICE)
        assert outside.status_code == 403, outside.text
        alice_sees = [t["name"] for t in api.get("/v1/topics", headers=ALICE).json()]
        assert "alice-orders" in alice_sees and "others-topic" not in alice_sees
        bob_sees = api.get("/v1/topics", headers=BOB)
        assert bob_sees.status_code == 200 and bob_sees.json() == []
        assert api.get("/v1/topics/alice-orders", headers=ALICE).status_code == 200
        assert api.get("/v1/topics/alice-orders", headers=BOB).status_code == 403
        produced = api.post("/v1/topics/alice-orders/records", json=[{"value": "v1"}],
                            headers=ALICE)
        assert produced.status_code == 200, produced.text
        browsed = api.get("/v1/topics/alice-orders/records", headers=ALICE)
        assert [r["value"] for r in browsed.json()] == ["v1"]
        assert api.get("/v1/topics/alice-orders/records", headers=BOB).status_code == 403
        assert api.get("/v1/cluster", headers=ALICE).status_code == 200
        denied = api.get("/v1/cluster", headers=BOB)
        assert denied.status_code == 403
        assert denied.json()["title"] == "CLUSTER_AUTHORIZATION_FAILED"
        assert api.get("/v1/brokers/1", headers=ALICE).status_code == 403  # DescribeConfigs
        assert api.delete("/v1/topics/alice-orders", headers=BOB).status_code == 403


def test_a_new_acl_takes_effect_on_the_next_request(acl_setup: tuple[str, int]) -> None:
    url, sasl_port = acl_setup
    with httpx.Client(base_url=url, timeout=30.0) as api:
        assert api.get("/v1/topics/others-topic", headers=BOB).status_code == 403
        admin = AdminClient(_sasl(sasl_port))
        grants = [AclBinding(ResourceType.TOPIC, "others-topic", ResourcePatternType.LITERAL,
                             "User:bob", "*", operation, AclPermissionType.ALLOW)
                  for operation in (AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)]
        for future in admin.create_acls(grants, request_timeout=20).values():
            future.result(timeout=30)
        described = api.get("/v1/topics/others-topic", headers=BOB)
        assert described.status_code == 200, described.text
        assert [t["name"] for t in api.get("/v1/topics", headers=BOB).json()] == [
            "others-topic"]
