"""The admin service's own Kafka clients log in with the brokers' security settings.

The real ``strata admin`` reaches the package's ``secure_broker`` only through its SASL_SSL
listener, configured the way a pod is (``STRATA_ADMIN_KAFKA_*`` variables from a Secret plus a
``--client-properties`` file): with the right SCRAM password it is ready and serves topics; with a
wrong one ``/readyz`` says why (503) and the broker keeps serving.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ..admin.admin_process import AdminProcess, running_admin
from .conftest import USERS, SecureBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _client_properties(path: Path, broker: SecureBroker) -> Path:
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"ssl.ca.location={broker.pki.ca.ca_cert}\n")
    return path


def test_admin_over_sasl_ssl(tmp_path: Path, secure_broker: SecureBroker) -> None:
    bootstrap = f"127.0.0.1:{secure_broker.sasl_ssl}"
    properties = _client_properties(tmp_path / "client.properties", secure_broker)
    env = {"STRATA_ADMIN_KAFKA_SASL_USERNAME": "alice",
           "STRATA_ADMIN_KAFKA_SASL_PASSWORD": USERS["alice"]}
    with running_admin(tmp_path / "admin", bootstrap, env=env,
                       args=["--client-properties", str(properties)]) as admin:
        created = httpx.post(f"{admin.url}/v1/topics", json={"name": "over-sasl"},
                             timeout=30.0)
        assert created.status_code == 201, created.text
        cluster = httpx.get(f"{admin.url}/v1/cluster", timeout=30.0).json()
        assert [b["port"] for b in cluster["brokers"]] == [secure_broker.sasl_ssl]


def test_wrong_password_is_reported_by_readyz(tmp_path: Path,
                                              secure_broker: SecureBroker) -> None:
    bootstrap = f"127.0.0.1:{secure_broker.sasl_ssl}"
    properties = _client_properties(tmp_path / "client.properties", secure_broker)
    admin = AdminProcess(tmp_path / "admin", bootstrap, timeout_s=3.0,
                         args=["--client-properties", str(properties)],
                         env={"STRATA_ADMIN_KAFKA_SASL_USERNAME": "alice",
                              "STRATA_ADMIN_KAFKA_SASL_PASSWORD": "not-alices"})
    admin.start(wait_ready=False)
    try:
        ready = httpx.get(f"{admin.url}/readyz", timeout=30.0)
        assert ready.status_code == 503
        assert ready.json()["title"] == "CLUSTER_UNREACHABLE"
        assert "uthentication" in ready.json()["detail"], ready.json()
    finally:
        assert admin.stop() == 0, admin.log_tail()
    assert secure_broker.process.process is not None
    assert secure_broker.process.process.poll() is None  # the broker keeps serving
