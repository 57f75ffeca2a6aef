"""The admin API's cluster, broker, topic and record routes against a real broker, over HTTP.

Every route with good input (the shapes of docs/admin-api.md) and with bad input: the status and
the problem+json body carrying Kafka's error name.
"""

from __future__ import annotations

import base64
import time

import httpx
import pytest

from .admin_process import AdminProcess

pytestmark = pytest.mark.integration

PROBLEM = "application/problem+json"


def problem(response: httpx.Response, status: int, title: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, object] = response.json()
    assert body["title"] == title, body
    assert body["status"] == status
    assert isinstance(body["detail"], str) and body["detail"]
    return body


def test_health_metrics_and_openapi(api: httpx.Client) -> None:
    assert api.get("/healthz").json() == {"status": "ok", "detail": None}
    assert api.get("/readyz").status_code == 200
    spec = api.get("/openapi.json").json()
    for path in ("/v1/cluster", "/v1/brokers", "/v1/brokers/{broker_id}", "/v1/topics",
                 "/v1/topics/{name}", "/v1/topics/{name}/configs",
                 "/v1/topics/{name}/partitions", "/v1/topics/{name}/records", "/v1/groups",
                 "/v1/groups/{group_id}", "/v1/groups/{group_id}/offsets/reset", "/healthz",
                 "/readyz", "/metrics"):
        assert path in spec["paths"], path
    assert "swagger-ui" in api.get("/docs").text
    metrics = api.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    assert 'strata_admin_requests_total{method="GET",route="/openapi.json",status="200"}' \
        in metrics.text
    problem(api.get("/v1/nothing-here"), 404, "NOT_FOUND")
    problem(api.put("/v1/topics"), 405, "METHOD_NOT_ALLOWED")


def test_cluster_and_brokers(api: httpx.Client, admin_service: AdminProcess) -> None:
    cluster = api.get("/v1/cluster").json()
    assert cluster["cluster_id"]
    assert cluster["controller"] == 1
    port = int(admin_service.bootstrap.rsplit(":", 1)[1])
    assert cluster["brokers"] == [{"id": 1, "host": "127.0.0.1", "port": port, "rack": None}]
    assert api.get("/v1/brokers").json() == cluster["brokers"]
    broker = api.get("/v1/brokers/1").json()
    assert broker["id"] == 1
    assert broker["configs"]["num.partitions"]["value"] == "3"
    assert broker["configs"]["num.partitions"]["source"] == "STATIC_BROKER_CONFIG"
    problem(api.get("/v1/brokers/42"), 404, "BROKER_NOT_FOUND")
    problem(api.get("/v1/brokers/one"), 422, "VALIDATION_ERROR")
    problem(api.get("/v1/brokers/-1"), 422, "VALIDATION_ERROR")


def test_topic_lifecycle(api: httpx.Client) -> None:
    created = api.post("/v1/topics", json={"name": "orders", "partitions": 2,
                                           "replication_factor": 1,
                                           "configs": {"retention.ms": "3600000"}})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body == {
        "name": "orders",
        "partitions": [{"partition": p, "leader": 1, "replicas": [1], "isr": [1],
                        "log_start_offset": 0, "high_watermark": 0} for p in (0, 1)],
        "configs": {"retention.ms": "3600000"},
    }
    problem(api.post("/v1/topics", json={"name": "orders"}), 409, "TOPIC_ALREADY_EXISTS")
    defaults = api.post("/v1/topics", json={"name": "defaults"})
    assert defaults.status_code == 201
    assert len(defaults.json()["partitions"]) == 3  # num.partitions

    listed = {t["name"]: t for t in api.get("/v1/topics").json()}
    assert listed["orders"] == {"name": "orders", "partitions": 2, "replication_factor": 1,
                                "internal": False}
    assert all(not t["internal"] for t in api.get(
        "/v1/topics", params={"include_internal": "false"}).json())
    every = api.get("/v1/topics/orders", params={"all_configs": "true"}).json()["configs"]
    assert every["retention.ms"] == "3600000" and "cleanup.policy" in every

    patched = api.patch("/v1/topics/orders/configs",
                        json={"set": {"cleanup.policy": "compact"}, "delete": ["retention.ms"]})
    assert patched.status_code == 200, patched.text
    assert patched.json() == {"name": "orders", "configs": {"cleanup.policy": "compact"}}
    assert api.get("/v1/topics/orders").json()["configs"] == {"cleanup.policy": "compact"}

    grown = api.post("/v1/topics/orders/partitions", json={"count": 4})
    assert grown.status_code == 200, grown.text
    assert [p["partition"] for p in grown.json()["partitions"]] == [0, 1, 2, 3]
    problem(api.post("/v1/topics/orders/partitions", json={"count": 2}), 400,
            "INVALID_PARTITIONS")

    assert api.delete("/v1/topics/defaults").status_code == 204
    deadline = time.monotonic() + 30
    while api.get("/v1/topics/defaults").status_code != 404:
        assert time.monotonic() < deadline, "deleted topic still described"
        time.sleep(0.1)
    problem(api.delete("/v1/topics/defaults"), 404, "UNKNOWN_TOPIC_OR_PARTITION")


@pytest.mark.parametrize(("body", "where"), [
    ({"name": "bad name!"}, "name"),
    ({"name": ""}, "name"),
    ({"name": "x" * 250}, "name"),
    ({"name": ".."}, ""),
    ({"name": "ok", "partitions": 0}, ""),
    ({"name": "ok", "partitions": -2}, "partitions"),
    ({"name": "ok", "replication_factor": 0}, ""),
    ({"name": "ok", "configs": {"retention.ms": 5}}, "configs"),
    ({"name": "ok", "surprise": 1}, "surprise"),
    ({}, "name"),
])
def test_create_topic_validation(api: httpx.Client, body: dict[str, object], where: str) -> None:
    found = problem(api.post("/v1/topics", json=body), 422, "VALIDATION_ERROR")
    assert where in str(found["detail"])
    assert found["errors"]


def test_topic_errors_from_the_broker(api: httpx.Client) -> None:
    problem(api.post("/v1/topics", json={"name": "rf", "replication_factor": 3}), 400,
            "INVALID_REPLICATION_FACTOR")
    problem(api.post("/v1/topics", json={"name": "cfg", "configs": {"retention.ms": "soon"}}),
            400, "INVALID_CONFIG")
    problem(api.post("/v1/topics", json={"name": "cfg", "configs": {"no.such.config": "1"}}),
            400, "INVALID_CONFIG")
    assert api.post("/v1/topics", json={"name": "cfg", "partitions": 1}).status_code == 201
    problem(api.patch("/v1/topics/cfg/configs", json={"set": {"no.such.config": "1"}}), 400,
            "INVALID_CONFIG")
    problem(api.patch("/v1/topics/cfg/configs", json={"set": {"retention.ms": "soon"}}), 400,
            "INVALID_CONFIG")
    problem(api.get("/v1/topics/missing"), 404, "UNKNOWN_TOPIC_OR_PARTITION")
    problem(api.get("/v1/topics/bad%20name"), 422, "VALIDATION_ERROR")
    problem(api.patch("/v1/topics/missing/configs", json={"set": {"retention.ms": "1"}}), 404,
            "UNKNOWN_TOPIC_OR_PARTITION")
    problem(api.patch("/v1/topics/missing/configs", json={}), 422, "VALIDATION_ERROR")
    problem(api.patch("/v1/topics/missing/configs",
                      json={"set": {"a": "1"}, "delete": ["a"]}), 422, "VALIDATION_ERROR")
    problem(api.post("/v1/topics/missing/partitions", json={"count": 3}), 404,
            "UNKNOWN_TOPIC_OR_PARTITION")
    problem(api.post("/v1/topics/missing/partitions", json={"count": 0}), 422,
            "VALIDATION_ERROR")
    problem(api.post("/v1/topics", content=b"{not json", headers={
        "content-type": "application/json"}), 422, "VALIDATION_ERROR")


def test_produce_and_browse_records(api: httpx.Client) -> None:
    assert api.post("/v1/topics", json={"name": "events", "partitions": 2}).status_code == 201
    sent = api.post("/v1/topics/events/records", json=[
        {"key": "k0", "value": "v0", "partition": 1,
         "headers": [{"key": "source", "value": "rest"}, {"key": "empty", "value": None}]},
        {"key": None, "value": "v1", "partition": 1},
        {"value": "héllo", "partition": 1},
    ])
    assert sent.status_code == 200, sent.text
    assert sent.json() == [{"partition": 1, "offset": o} for o in (0, 1, 2)]

    records = api.get("/v1/topics/events/records", params={"partition": 1}).json()
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [
        (0, "k0", "v0"), (1, None, "v1"), (2, None, "héllo")]
    assert records[0]["headers"] == [{"key": "source", "value": "rest"},
                                     {"key": "empty", "value": None}]
    assert records[0]["timestamp_type"] == "CreateTime" and records[0]["timestamp"] > 0
    assert records[0]["topic"] == "events" and records[0]["partition"] == 1

    page = api.get("/v1/topics/events/records",
                   params={"partition": 1, "offset": 1, "limit": 1}).json()
    assert [r["offset"] for r in page] == [1]
    since = api.get("/v1/topics/events/records",
                    params={"partition": 1, "timestamp": records[2]["timestamp"]}).json()
    assert since and since[-1]["offset"] == 2
    assert api.get("/v1/topics/events/records",
                   params={"partition": 1, "timestamp": 2**62}).json() == []
    assert api.get("/v1/topics/events/records", params={"partition": 0}).json() == []
    assert api.get("/v1/topics/events/records",
                   params={"partition": 1, "offset": 99}).json() == []

    raw = bytes(range(256))
    encoded = base64.b64encode(raw).decode()
    sent = api.post("/v1/topics/events/records", params={"format": "base64"},
                    json=[{"key": base64.b64encode(b"\x00k").decode(), "value": encoded,
                           "partition": 0}])
    assert sent.json() == [{"partition": 0, "offset": 0}]
    back = api.get("/v1/topics/events/records",
                   params={"partition": 0, "format": "base64"}).json()
    assert back[0]["value"] == encoded and base64.b64decode(back[0]["key"]) == b"\x00k"
    as_text = api.get("/v1/topics/events/records", params={"partition": 0}).json()
    assert as_text[0]["value"].startswith("\x00\x01\x02")  # invalid UTF-8 replaced, not failed

    unpinned = api.post("/v1/topics/events/records", json=[{"key": "any", "value": "x"}])
    assert unpinned.status_code == 200 and unpinned.json()[0]["partition"] in (0, 1)


def test_record_errors(api: httpx.Client) -> None:
    assert api.post("/v1/topics", json={"name": "small", "partitions": 1}).status_code == 201
    problem(api.post("/v1/topics/small/records", json=[{"value": "x", "partition": 5}]), 404,
            "UNKNOWN_TOPIC_OR_PARTITION")
    problem(api.post("/v1/topics/nowhere/records", json=[{"value": "x"}]), 404,
            "UNKNOWN_TOPIC_OR_PARTITION")
    problem(api.post("/v1/topics/small/records", params={"format": "base64"},
                     json=[{"value": "not base64!"}]), 422, "VALIDATION_ERROR")
    problem(api.post("/v1/topics/small/records", json=[]), 422, "VALIDATION_ERROR")
    too_large = api.post("/v1/topics/small/records", json=[{"value": "x" * 1_100_000}])
    assert too_large.status_code == 400, too_large.text
    assert too_large.json()["title"] in ("MSG_SIZE_TOO_LARGE", "MESSAGE_TOO_LARGE")
    problem(api.post("/v1/topics/small/records", json={"value": "x"}), 422, "VALIDATION_ERROR")
    problem(api.post("/v1/topics/small/records", params={"format": "hex"},
                     json=[{"value": "x"}]), 422, "VALIDATION_ERROR")
    problem(api.get("/v1/topics/small/records", params={"partition": 3}), 404,
            "UNKNOWN_TOPIC_OR_PARTITION")
    problem(api.get("/v1/topics/small/records", params={"offset": 0, "timestamp": 0}), 422,
            "VALIDATION_ERROR")
    problem(api.get("/v1/topics/small/records", params={"limit": 100000}), 422,
            "VALIDATION_ERROR")
    problem(api.get("/v1/topics/small/records", params={"offset": -1}), 422,
            "VALIDATION_ERROR")
