"""ACLs in a 3-broker cluster (SQLite metadata store): a change made on one broker (CreateAcls,
DeleteAcls) or by ``strata acls --metadata-store`` is enforced by every broker.

Each broker serves PLAINTEXT (clients of the test helpers and the inter-broker listener: the
brokers' own principal is ``User:ANONYMOUS``, which is therefore in ``super.users`` — the rule
the DESIGN notes give) and SASL_PLAINTEXT for the SCRAM users ``admin`` (super user) and
``alice``. Replication working at all shows the brokers' ClusterAction is allowed. Each broker
is asked on its own SASL port with Strata's ``BrokerClient``, so the view of every broker is
checked, not just the one a client happens to pick.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from strata.client.broker_client import BrokerClient
from strata.client.security import ClientSecurity
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode

from ..broker_process import STRATA, create_user, free_port
from ..cluster.cluster_processes import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(180)]

TIMEOUT_S = 30.0
ALICE = ClientSecurity(None, "SCRAM-SHA-512", "alice", "alice-secret")
ADMIN = ClientSecurity(None, "SCRAM-SHA-512", "admin", "admin-secret")


def _request(port: int, security: ClientSecurity, api_key: int, version: int,
             fields: dict[str, Any]) -> Any:
    async def send() -> Any:
        client = BrokerClient("127.0.0.1", port, client_id="acl-test",
                              request_timeout_s=10.0, security=security)
        try:
            return await client.request(api_key, version, fields)
        finally:
            await client.close()

    return asyncio.run(send())


def _topic_error(port: int, topic: str) -> int:
    """The error alice's Metadata request for ``topic`` gets from the broker on ``port``."""
    response = _request(port, ALICE, ApiKey.METADATA, 8, {
        "topics": [{"name": topic}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    return int(response.topics[0].error_code)


def _wait_all(ports: list[int], topic: str, expected: int, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    last: list[int] = []
    while time.monotonic() < deadline:
        last = [_topic_error(p, topic) for p in ports]
        if last == [expected] * len(ports):
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}: errors {last} after {TIMEOUT_S}s, wanted {expected}")


def _acl(**fields: Any) -> dict[str, Any]:
    return {"resource_type": 2, "resource_name": "shared", "resource_pattern_type": 3,
            "principal": "User:alice", "host": "*", "operation": 8, "permission_type": 3,
            **fields}


def test_acl_changes_reach_every_broker(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'meta.db'}"
    for user in ("admin", "alice"):
        create_user(user, f"{user}-secret", "--mechanism", "SCRAM-SHA-512",
                    "--metadata-store", store_url)
    cluster = ClusterProcesses(tmp_path, store_url, 3, {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS"})
    sasl_ports = []
    for broker in cluster.brokers:
        sasl_ports.append(port := free_port())
        listeners = f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{port}"
        broker.config.update({"listeners": listeners, "advertised.listeners": listeners})
    try:
        cluster.start()
        cluster.create_topic("shared", 1, 3)  # waits for leaders: replication is authorized
        _wait_all(sasl_ports, "shared", ErrorCode.topic_authorization_failed, "no ACL yet")

        created = _request(sasl_ports[0], ADMIN, ApiKey.CREATE_ACLS, 1,
                           {"creations": [_acl()]})
        assert [r.error_code for r in created.results] == [ErrorCode.none]
        _wait_all(sasl_ports, "shared", ErrorCode.none, "Describe created on broker 0")

        refused = _request(sasl_ports[1], ALICE, ApiKey.CREATE_ACLS, 1,
                           {"creations": [_acl(operation=2)]})
        assert [r.error_code for r in refused.results] == [ErrorCode.cluster_authorization_failed]

        described = _request(sasl_ports[2], ADMIN, ApiKey.DESCRIBE_ACLS, 1, {
            "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": "User:alice", "host_filter": None, "operation": 1,
            "permission_type": 1})
        assert [(r.resource_name, [a.operation for a in r.acls])
                for r in described.resources] == [("shared", [8])]

        deleted = _request(sasl_ports[1], ADMIN, ApiKey.DELETE_ACLS, 1, {"filters": [{
            "resource_type_filter": 2, "resource_name_filter": "shared",
            "pattern_type_filter": 3, "principal_filter": None, "host_filter": None,
            "operation": 1, "permission_type": 1}]})
        assert [len(r.matching_acls) for r in deleted.filter_results] == [1]
        _wait_all(sasl_ports, "shared", ErrorCode.topic_authorization_failed,
                  "Describe deleted on broker 1")

        done = subprocess.run([str(STRATA), "acls", "add", "--principal", "User:alice",
                               "--operation", "Read", "--topic", "sha", "--pattern-type",
                               "prefixed", "--metadata-store", store_url],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        _wait_all(sasl_ports, "shared", ErrorCode.none, "Read (implies Describe) from the CLI")
    finally:
        cluster.stop()
