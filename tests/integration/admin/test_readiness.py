"""``strata admin`` with no reachable broker: alive (/healthz 200) but not ready (/readyz 503),
and Kafka-backed routes answer 503 problem+json naming the address instead of hanging."""

from __future__ import annotations

import httpx
import pytest

from ..broker_process import free_port
from .admin_process import running_admin

pytestmark = pytest.mark.integration


def test_not_ready_without_a_broker(tmp_path_factory: pytest.TempPathFactory) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    with running_admin(tmp_path_factory.mktemp("admin"), nowhere, wait_ready=False,
                       timeout_s=1.0) as admin, httpx.Client(base_url=admin.url,
                                                             timeout=30.0) as api:
        assert api.get("/healthz").status_code == 200
        ready = api.get("/readyz")
        assert ready.status_code == 503
        assert ready.headers["content-type"] == "application/problem+json"
        assert ready.json()["title"] == "CLUSTER_UNREACHABLE"
        topics = api.get("/v1/topics")
        assert topics.status_code == 503
        assert nowhere in topics.json()["detail"]
        assert "strata_admin_kafka_unreachable_total 1.0" in api.get("/metrics").text
