"""Consumer groups in the console, in a real Chromium against a real 3-broker cluster: a
group's type, group protocol and assignor as DescribeGroups reports them; its lag over time
(sampled from the coordinator's metrics) ending at the lag the page shows; the cluster's
sampled "messages out" counting the records a commit moved past; deleting it refused
with NON_EMPTY_GROUP while a consumer is in it, allowed once it left (gone for Kafka's admin
client), and not offered to a user without Delete."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from playwright.sync_api import Page

from .conftest import GRAFANA_URL, ConsoleStack, poll, visit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

GROUP = "ledger"
TOPIC = "ledger-in"
RECORDS = 30
COMMITTED = 10


def _points(page: Page, stack: ConsoleStack, key: str) -> list[list[float]]:
    answer = page.request.get(f"{stack.url}/console/series", params={"key": key})
    assert answer.ok, answer.text()
    body: dict[str, Any] = answer.json()
    points: list[list[float]] = body["series"][key]
    return points


def _lag_points(page: Page, stack: ConsoleStack) -> list[list[float]]:
    return _points(page, stack, f"group:{GROUP}:lag")


def _consumed(page: Page, stack: ConsoleStack) -> float:
    """The records the sampled "messages out" rate says the groups committed past."""
    points = _points(page, stack, "cluster:records_out")
    return sum(rate * (t - before) for (before, _), (t, rate) in itertools.pairwise(points))


def _groups(stack: ConsoleStack) -> set[str]:
    listed = stack.cluster.admin().list_consumer_groups(request_timeout=30).result(timeout=30)
    return {g.group_id for g in listed.valid}


def test_a_group_shows_its_kind_and_lag_chart_and_is_deleted_only_when_empty(
        console_stack: ConsoleStack, ops: Page, viewer: Page, shots: Path) -> None:
    console_stack.create_topic(TOPIC, 1, 3)
    producer = Producer({"bootstrap.servers": console_stack.bootstrap, "acks": "all",
                         "log_level": 0})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": console_stack.bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "log_level": 0})
    try:
        consumer.subscribe([TOPIC])
        deadline_polls = 0
        while not consumer.assignment() and deadline_polls < 60:
            consumer.poll(0.5)
            deadline_polls += 1
        assert consumer.assignment(), "the consumer joined no group"
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, COMMITTED)], asynchronous=False)
        url = f"{console_stack.url}/console/groups/{GROUP}"
        visit(ops, url, shots, "group-lag")
        assert ops.inner_text("#group-state") == "STABLE"
        assert ops.inner_text("#group-type") == "consumer"
        assert ops.inner_text("#group-protocol") == "classic"
        assert ops.inner_text("#group-assignor") == "range"
        assert int(ops.inner_text("#total-lag")) == RECORDS - COMMITTED
        assert ops.get_attribute("#grafana-link", "href") == \
            f"{GRAFANA_URL}/d/strata-consumer-groups?var-group={GROUP}"
        poll(ops, lambda: bool(_lag_points(ops, console_stack))
             and _lag_points(ops, console_stack)[-1][1] == RECORDS - COMMITTED,
             "the sampled lag reaches the page's total lag")
        ops.wait_for_selector("#lag-chart polyline", state="attached")
        legend = ops.locator(f"#lag-chart .legend span[data-key='group:{GROUP}:lag']")
        assert float(legend.get_attribute("data-last") or "nan") == RECORDS - COMMITTED
        ops.screenshot(path=str(shots / "group-lag.png"), full_page=True)
        consumed = _consumed(ops, console_stack)
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, RECORDS)], asynchronous=False)
        poll(ops, lambda: round(_consumed(ops, console_stack) - consumed) == RECORDS - COMMITTED,
             "the sampled messages out count the records committed past")

        ops.once("dialog", lambda dialog: dialog.accept())
        with ops.expect_response(f"{url}/delete") as answer:
            ops.click("#delete-group-button")
        assert answer.value.status == 409
        assert "NON_EMPTY_GROUP" in ops.inner_text("#change-error")
        assert GROUP in _groups(console_stack)
    finally:
        consumer.close()

    visit(viewer, url)
    assert viewer.locator("#delete-group-button").count() == 0
    token = viewer.get_attribute("input[name=csrf_token]", "value") or ""
    refused = viewer.request.post(f"{url}/delete", form={"csrf_token": token})
    assert refused.status == 403 and "GROUP_AUTHORIZATION_FAILED" in refused.text()

    ops.goto(url)
    poll(ops, lambda: ops.inner_text("#group-state") == "EMPTY", "the group is empty")
    ops.once("dialog", lambda dialog: dialog.accept())
    ops.click("#delete-group-button")
    ops.wait_for_url(f"{console_stack.url}/console/groups?deleted={GROUP}")
    assert GROUP in ops.inner_text("#group-deleted")
    assert ops.locator(f"#groups tr[data-group='{GROUP}']").count() == 0
    assert GROUP not in _groups(console_stack)
