"""The admin API's transaction routes against a real broker and confluent-kafka's
transactional producer: an open transaction listed and filtered, described, its partition's
producers listed, not reported hanging (its coordinator tracks it), aborted by its
start offset (the partition's last stable offset then reaches the high watermark), and the
refusals as problem+json titled with Kafka's error name."""

from __future__ import annotations

import time
import uuid
from typing import Final

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ..broker_process import BrokerProcess
from .test_topics_api import problem

pytestmark = pytest.mark.integration

STEP_S: Final = 15.0


def last_stable_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txapi-lso",
                         "isolation.level": "read_committed"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), STEP_S)[1])
    finally:
        consumer.close()


def test_list_describe_and_abort(api: httpx.Client, admin_broker: BrokerProcess) -> None:
    bootstrap = admin_broker.bootstrap
    topic = f"txapi.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(STEP_S)
    tid = f"txapi-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                         "transaction.timeout.ms": 120_000})
    producer.init_transactions(STEP_S)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    producer.produce(topic, b"open", partition=0)
    assert producer.flush(STEP_S) == 0
    assert last_stable_offset(bootstrap, topic) == 0

    listed = api.get("/v1/transactions")
    assert listed.status_code == 200, listed.text
    [row] = [t for t in listed.json() if t["transactional_id"] == tid]
    assert row["state"] == "Ongoing" and row["coordinator"] == 1
    assert tid in {t["transactional_id"] for t in api.get(
        "/v1/transactions", params={"state": "Ongoing", "producer_id": row["producer_id"]}
    ).json()}
    assert tid not in {t["transactional_id"] for t in api.get(
        "/v1/transactions", params={"state": ["CompleteCommit", "CompleteAbort"]}).json()}
    assert tid not in {t["transactional_id"] for t in api.get(
        "/v1/transactions", params={"duration_ms": 3_600_000}).json()}

    described = api.get(f"/v1/transactions/{tid}")
    assert described.status_code == 200, described.text
    body = described.json()
    assert (body["state"], body["producer_id"], body["transaction_timeout_ms"]) == (
        "Ongoing", row["producer_id"], 120_000)
    assert body["partitions"] == [{"topic": topic, "partition": 0}]
    assert body["transaction_duration_ms"] >= 0

    producers = api.get("/v1/transactions/producers", params={"topic": topic, "partition": 0})
    assert producers.status_code == 200, producers.text
    [active] = producers.json()
    assert (active["producer_id"], active["current_txn_start_offset"]) == (
        row["producer_id"], 0)
    # Open, but its coordinator tracks it on this partition: not hanging (Kafka's rule).
    hanging = api.get("/v1/transactions/hanging",
                      params={"topic": topic, "max_transaction_timeout_ms": 0})
    assert (hanging.status_code, hanging.json()) == (200, [])

    aborted = api.post("/v1/transactions/abort",
                       json={"topic": topic, "partition": 0, "start_offset": 0})
    assert aborted.status_code == 200, aborted.text
    assert aborted.json()["producer_id"] == row["producer_id"]
    deadline = time.monotonic() + STEP_S
    while last_stable_offset(bootstrap, topic) != 3:  # 2 records and the ABORT marker
        assert time.monotonic() < deadline, "the LSO did not move past the aborted transaction"
        time.sleep(0.1)
    again = api.post("/v1/transactions/abort",
                     json={"topic": topic, "partition": 0, "start_offset": 0})
    assert problem(again, 400, "INVALID_REQUEST")["detail"] == (
        f"could not find any open transaction starting at offset 0 on partition {topic}-0")


def test_refusals(api: httpx.Client) -> None:
    problem(api.get("/v1/transactions/no-such-id"), 404, "TRANSACTIONAL_ID_NOT_FOUND")
    problem(api.get("/v1/transactions", params={"state": "Sleeping"}), 400, "INVALID_REQUEST")
    problem(api.get("/v1/transactions/hanging"), 400, "INVALID_REQUEST")
    problem(api.get("/v1/transactions/hanging", params={"topic": "t", "broker_id": 1}), 400,
            "INVALID_REQUEST")
    problem(api.get("/v1/transactions/hanging", params={"partition": 0, "broker_id": 1}), 400,
            "INVALID_REQUEST")
    problem(api.get("/v1/transactions/producers", params={"topic": "no.such.topic",
                                                          "partition": 0}),
            404, "UNKNOWN_TOPIC_OR_PARTITION")
    problem(api.get("/v1/transactions/producers", params={"topic": "t"}), 422,
            "VALIDATION_ERROR")
    problem(api.post("/v1/transactions/abort",
                     json={"topic": "no.such.topic", "partition": 0, "start_offset": 0}),
            404, "UNKNOWN_TOPIC_OR_PARTITION")
    for body in ({"topic": "t", "partition": -1, "start_offset": 0},
                 {"topic": "t", "partition": 0},
                 {"topic": "t", "partition": 0, "start_offset": 0, "producer_id": 1}):
        problem(api.post("/v1/transactions/abort", json=body), 422, "VALIDATION_ERROR")
