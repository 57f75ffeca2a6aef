"""The admin API's consumer-group routes against a real broker and a real confluent-kafka
consumer group: describe with lag, 409 while members are active, reset, delete."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest
from confluent_kafka import Consumer

from .admin_process import AdminProcess
from .test_topics_api import problem

pytestmark = pytest.mark.integration

GROUP = "billing"
TOPIC = "payments"


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0,
             poll: Callable[[], object] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        if poll is not None:
            poll()
        else:
            time.sleep(0.05)


def test_group_lifecycle(api: httpx.Client, admin_service: AdminProcess) -> None:
    assert api.post("/v1/topics", json={"name": TOPIC, "partitions": 2}).status_code == 201
    sent = api.post(f"/v1/topics/{TOPIC}/records",
                    json=[{"value": f"v{i}", "partition": i % 2} for i in range(10)])
    assert sent.status_code == 200
    first_timestamp = api.get(f"/v1/topics/{TOPIC}/records",
                              params={"partition": 0}).json()[0]["timestamp"]

    consumer = Consumer({"bootstrap.servers": admin_service.bootstrap, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                         "client.id": "billing-1"})
    try:
        consumer.subscribe([TOPIC])
        seen: list[int] = []

        def consume() -> None:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(message.offset())

        wait_for(lambda: len(seen) >= 10, "10 records consumed", poll=consume)
        consumer.commit(asynchronous=False)

        listed = {g["group_id"]: g for g in api.get("/v1/groups").json()}
        assert listed[GROUP] == {"group_id": GROUP, "state": "STABLE", "type": "consumer",
                                 "group_type": "classic"}
        described = api.get(f"/v1/groups/{GROUP}").json()
        assert described["state"] == "STABLE" and described["protocol"] == "range"
        assert described["group_type"] == "classic"
        assert described["coordinator"] == 1
        [member] = described["members"]
        assert member["client_id"] == "billing-1"
        assert member["assignment"] == [{"topic": TOPIC, "partition": 0},
                                        {"topic": TOPIC, "partition": 1}]
        assert described["offsets"] == [
            {"topic": TOPIC, "partition": p, "committed_offset": 5, "log_end_offset": 5,
             "lag": 0, "member_id": member["member_id"]} for p in (0, 1)]

        problem(api.post(f"/v1/groups/{GROUP}/offsets/reset", json={"to": "earliest"}), 409,
                "NON_EMPTY_GROUP")
        problem(api.delete(f"/v1/groups/{GROUP}"), 409, "NON_EMPTY_GROUP")
    finally:
        consumer.close()
    wait_for(lambda: api.get(f"/v1/groups/{GROUP}").json()["state"] == "EMPTY",
             "the group to be empty")

    reset = api.post(f"/v1/groups/{GROUP}/offsets/reset", json={"to": "earliest"})
    assert reset.status_code == 200, reset.text
    assert reset.json() == {"group_id": GROUP, "offsets": [
        {"topic": TOPIC, "partition": p, "committed_offset": 0, "log_end_offset": 5, "lag": 5,
         "member_id": None} for p in (0, 1)]}
    lagging = api.get(f"/v1/groups/{GROUP}").json()["offsets"]
    assert [(o["committed_offset"], o["lag"]) for o in lagging] == [(0, 5), (0, 5)]

    one = api.post(f"/v1/groups/{GROUP}/offsets/reset",
                   json={"to": "offset", "offset": 3,
                         "topics": [{"topic": TOPIC, "partitions": [1]}]}).json()
    assert [(o["partition"], o["committed_offset"]) for o in one["offsets"]] == [(1, 3)]
    clamped = api.post(f"/v1/groups/{GROUP}/offsets/reset",
                       json={"to": "offset", "offset": 99}).json()
    assert [o["committed_offset"] for o in clamped["offsets"]] == [5, 5]
    by_time = api.post(f"/v1/groups/{GROUP}/offsets/reset",
                       json={"to": "timestamp", "timestamp": first_timestamp,
                             "topics": [{"topic": TOPIC}]}).json()
    offsets_by_time = {o["partition"]: o["committed_offset"] for o in by_time["offsets"]}
    assert offsets_by_time[0] == 0 and 0 <= offsets_by_time[1] <= 5
    latest = api.post(f"/v1/groups/{GROUP}/offsets/reset", json={"to": "latest"}).json()
    assert [o["lag"] for o in latest["offsets"]] == [0, 0]

    problem(api.post(f"/v1/groups/{GROUP}/offsets/reset",
                     json={"to": "offset", "topics": [{"topic": TOPIC}]}), 422,
            "VALIDATION_ERROR")
    problem(api.post(f"/v1/groups/{GROUP}/offsets/reset", json={"to": "timestamp"}), 422,
            "VALIDATION_ERROR")
    problem(api.post(f"/v1/groups/{GROUP}/offsets/reset", json={"to": "yesterday"}), 422,
            "VALIDATION_ERROR")
    problem(api.post(f"/v1/groups/{GROUP}/offsets/reset",
                     json={"to": "earliest", "topics": [{"topic": "nope"}]}), 404,
            "UNKNOWN_TOPIC_OR_PARTITION")
    problem(api.post(f"/v1/groups/{GROUP}/offsets/reset",
                     json={"to": "earliest", "topics": [{"topic": TOPIC, "partitions": [7]}]}),
            404, "UNKNOWN_TOPIC_OR_PARTITION")

    assert api.delete(f"/v1/groups/{GROUP}").status_code == 204
    problem(api.get(f"/v1/groups/{GROUP}"), 404, "GROUP_ID_NOT_FOUND")
    problem(api.delete(f"/v1/groups/{GROUP}"), 404, "GROUP_ID_NOT_FOUND")
    assert GROUP not in {g["group_id"] for g in api.get("/v1/groups").json()}
    problem(api.post(f"/v1/groups/{GROUP}/offsets/reset", json={"to": "earliest"}), 404,
            "GROUP_ID_NOT_FOUND")


def test_consumer_protocol_group_reports_group_type_consumer(
        api: httpx.Client, admin_service: AdminProcess) -> None:
    """KIP-848: a ``group.protocol=consumer`` member's group is ``group_type`` consumer (Kafka's
    admin ``GroupType.CONSUMER``), its ``type`` still ``consumer`` (not offsets-only)."""
    topic, group = "kip848-orders", "kip848-group"
    assert api.post("/v1/topics", json={"name": topic, "partitions": 1}).status_code == 201
    consumer = Consumer({"bootstrap.servers": admin_service.bootstrap, "group.id": group,
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        listed: dict[str, dict[str, str]] = {}

        def refresh() -> None:
            consumer.poll(0.2)
            listed.update({g["group_id"]: g for g in api.get("/v1/groups").json()})

        wait_for(lambda: listed.get(group, {}).get("state") == "STABLE",
                 "the KIP-848 group to be stable", poll=refresh)
        assert listed[group]["group_type"] == "consumer"
        assert listed[group]["type"] == "consumer"
        described = api.get(f"/v1/groups/{group}").json()
        assert described["group_type"] == "consumer"
    finally:
        consumer.close()


def test_group_configs_route(api: httpx.Client) -> None:
    """``/v1/groups/{id}/configs``: KIP-848 group configs with their source; PATCH sets and
    deletes; a value outside the broker's bounds is 400 INVALID_CONFIG with Kafka's message."""
    shown = api.get("/v1/groups/cfg-rest/configs")
    assert shown.status_code == 200, shown.text
    assert shown.json()["configs"]["consumer.session.timeout.ms"] == {
        "value": "45000", "source": "DEFAULT_CONFIG", "read_only": False, "sensitive": False}
    changed = api.patch("/v1/groups/cfg-rest/configs",
                        json={"set": {"consumer.session.timeout.ms": "50000"}})
    assert changed.status_code == 200, changed.text
    assert changed.json()["configs"]["consumer.session.timeout.ms"]["source"] == "GROUP_CONFIG"
    body = problem(api.patch("/v1/groups/cfg-rest/configs",
                             json={"set": {"consumer.heartbeat.interval.ms": "99999"}}),
                   400, "INVALID_CONFIG")
    assert "consumer.heartbeat.interval.ms must be less than or equal to " \
           "group.consumer.max.heartbeat.interval.ms" in str(body["detail"])
    back = api.patch("/v1/groups/cfg-rest/configs",
                     json={"delete": ["consumer.session.timeout.ms"]})
    assert back.json()["configs"]["consumer.session.timeout.ms"] == {
        "value": "45000", "source": "DEFAULT_CONFIG", "read_only": False, "sensitive": False}
