"""The console's topic changes, sizes, rates and charts in a real Chromium, against a real
3-broker cluster: configs set and reset (IncrementalAlterConfigs, seen by a Kafka admin client)
and a bad value shown with Kafka's error name; partitions added (CreatePartitions) and a
decrease refused; a topic's size (DescribeLogDirs) on the list and its page; the rates the
console samples from the brokers' own metrics adding up to the records produced; the overview's
charts and disk use per log dir; the Grafana links.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import ConfigResource, ResourceType
from playwright.sync_api import Page

from .conftest import GRAFANA_URL, ConsoleStack, poll, visit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

RECORDS = 200
VALUE = b"v" * 100


def _series(page: Page, stack: ConsoleStack, key: str) -> list[list[float]]:
    answer = page.request.get(f"{stack.url}/console/series", params={"key": key})
    assert answer.ok, answer.text()
    body: dict[str, Any] = answer.json()
    points: list[list[float]] = body["series"][key]
    return points


def _topic_configs(stack: ConsoleStack, name: str) -> dict[str, str]:
    admin = stack.cluster.admin()
    resource = ConfigResource(ResourceType.TOPIC, name)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {key: entry.value for key, entry in entries.items()}


def test_configs_are_set_and_reset_and_a_bad_value_shows_kafkas_error(
        console_stack: ConsoleStack, ops: Page, viewer: Page, shots: Path) -> None:
    console_stack.create_topic("tuned", 1, 3)
    url = f"{console_stack.url}/console/topics/tuned"
    visit(ops, url, shots, "topic")
    assert ops.get_attribute("#grafana-link", "href") == \
        f"{GRAFANA_URL}/d/strata-topics?var-topic=tuned"
    ops.fill("#config-form input[name=set_name]", "retention.ms")
    ops.fill("#config-form input[name=set_value]", "3600000")
    ops.click("#config-form button[type=submit]")
    assert "retention.ms set to 3600000" in ops.inner_text("#change-done")
    assert ops.inner_text("#configs tr[data-config='retention.ms'] .value") == "3600000"
    assert _topic_configs(console_stack, "tuned")["retention.ms"] == "3600000"

    ops.fill("#config-form input[name=set_name]", "retention.ms")
    ops.fill("#config-form input[name=set_value]", "soon")
    with ops.expect_response(f"{url}/configs") as answer:
        ops.click("#config-form button[type=submit]")
    assert answer.value.status == 400
    assert "INVALID_CONFIG" in ops.inner_text("#change-error")
    ops.screenshot(path=str(shots / "topic-config-error.png"), full_page=True)
    assert _topic_configs(console_stack, "tuned")["retention.ms"] == "3600000"
    ops.goto(f"{console_stack.url}/console/topics?q=tuned")  # the list shows the override
    assert "retention.ms=3600000" in ops.inner_text("#topics tr[data-name='tuned'] .overrides")
    ops.goto(url)

    ops.once("dialog", lambda dialog: dialog.accept())
    ops.click("#configs tr[data-config='retention.ms'] button")
    assert "retention.ms reset to its default" in ops.inner_text("#change-done")
    assert ops.locator("#configs tr[data-config='retention.ms']").count() == 0
    assert _topic_configs(console_stack, "tuned")["retention.ms"] == "604800000"

    visit(viewer, url)  # no AlterConfigs, no Alter: no forms; a POST anyway is 403
    assert viewer.locator("#config-form, #partitions-form").count() == 0
    token = viewer.get_attribute("input[name=csrf_token]", "value")
    refused = viewer.request.post(f"{url}/configs", form={
        "csrf_token": token or "", "set_name": "retention.ms", "set_value": "1"})
    assert refused.status == 403 and "TOPIC_AUTHORIZATION_FAILED" in refused.text()


def test_partitions_are_added_and_a_decrease_is_refused(console_stack: ConsoleStack,
                                                       ops: Page) -> None:
    console_stack.create_topic("growing", 1, 3)
    ops.goto(f"{console_stack.url}/console/topics/growing")
    ops.fill("#partitions-form input[name=count]", "3")
    ops.once("dialog", lambda dialog: dialog.accept())
    ops.click("#partitions-form button[type=submit]")
    assert "growing has 3 partitions now" in ops.inner_text("#change-done")
    assert ops.inner_text("#partition-total") == "3"
    assert len(console_stack.cluster.metadata().topics["growing"].partitions) == 3

    ops.fill("#partitions-form input[name=count]", "2")
    ops.evaluate("() => document.querySelector('#partitions-form input[name=count]')"
                 ".removeAttribute('min')")
    ops.once("dialog", lambda dialog: dialog.accept())
    ops.click("#partitions-form button[type=submit]")
    assert "INVALID_PARTITIONS" in ops.inner_text("#change-error")
    assert len(console_stack.cluster.metadata().topics["growing"].partitions) == 3


def test_sizes_and_sampled_rates_match_what_was_produced(
        console_stack: ConsoleStack, ops: Page, shots: Path) -> None:
    console_stack.create_topic("metered", 1, 3)
    base = f"{console_stack.url}/console"
    ops.goto(f"{base}/topics/metered")  # starts the sampler; the topic's series appears
    key = "topic:metered:records_in"
    poll(ops, lambda: len(_series(ops, console_stack, "cluster:records_in")) >= 1,
         "a first sampled rate")
    producer = Producer({"bootstrap.servers": console_stack.bootstrap, "acks": "all",
                         "log_level": 0})
    for i in range(RECORDS):
        producer.produce("metered", key=str(i).encode(), value=VALUE)
    assert producer.flush(30) == 0

    def counted() -> float:
        points = _series(ops, console_stack, key)
        return sum(rate * (t - before) for (before, _), (t, rate)
                   in itertools.pairwise(points))

    poll(ops, lambda: round(counted()) == RECORDS, f"the rates of metered add up to {RECORDS}")
    poll(ops, lambda: ops.get_attribute("#topic-size", "data-bytes") not in ("", "0")
         and int(ops.get_attribute("#topic-size", "data-bytes") or 0) >= 3 * RECORDS * 100,
         "metered's three replicas hold the values")
    ops.wait_for_selector("#topic-chart polyline", state="attached")
    ops.screenshot(path=str(shots / "topic-charts.png"), full_page=True)

    ops.goto(f"{base}/topics?q=metered")
    row = ops.locator("#topics tbody tr[data-name='metered']")
    assert int(row.locator(".size").get_attribute("data-bytes") or 0) >= 3 * RECORDS * 100

    visit(ops, f"{base}/", shots, "overview-charts")
    ops.wait_for_selector("#bytes-chart polyline", state="attached")
    ops.wait_for_selector("#disk-chart polyline", state="attached")
    assert ops.locator("#log-dirs tbody tr").count() == 3
    assert sorted(ops.locator("#log-dirs tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.broker)")) == ["0", "1", "2"]
    assert all(int(v) > 0 for v in ops.locator("#log-dirs .data").evaluate_all(
        "cells => cells.map(c => c.dataset.bytes)"))
    assert max(v for _, v in _series(ops, console_stack, "cluster:bytes_in")) > 0
    assert ops.get_attribute("#grafana-link", "href") == f"{GRAFANA_URL}/d/strata-cluster-overview"
    ops.screenshot(path=str(shots / "overview-charts.png"), full_page=True)
