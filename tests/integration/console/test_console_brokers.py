"""A broker's page in a real Chromium against a real 3-broker cluster: its own charts (bytes,
requests, under-replicated partitions, disk) drawn from the sampled series, its configs as
Kafka's admin client describes them; a dynamic config set on the broker and as the cluster
default, then reset, each seen by DescribeConfigs; a read-only config and a bad value refused
with Kafka's INVALID_CONFIG shown; a user without AlterConfigs on the cluster sees no form
(nor the configs, without DescribeConfigs) and gets 403 posting anyway."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import ConfigResource
from playwright.sync_api import Page

from strata.client.kafka_admin import config_source_name

from .conftest import ConsoleStack, poll, visit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _broker_config(stack: ConsoleStack, broker: str, key: str) -> tuple[str | None, str]:
    resource = ConfigResource("broker", broker)
    admin = stack.cluster.admin()
    entries = admin.describe_configs([resource], request_timeout=30)[resource].result(timeout=30)
    entry = entries.get(key)
    if entry is None:  # a key with no value anywhere is not described
        return None, "absent"
    return entry.value, config_source_name(entry.source)


def test_a_brokers_page_charts_its_own_series(console_stack: ConsoleStack, ops: Page,
                                              shots: Path) -> None:
    url = f"{console_stack.url}/console/"
    visit(ops, url)
    ops.click("#brokers a.broker-link >> nth=1")
    ops.wait_for_url(f"{console_stack.url}/console/brokers/1")
    assert ops.inner_text("#broker-id") == "1"
    for chart in ("#broker-bytes-chart", "#broker-requests-chart", "#broker-urp-chart",
                  "#broker-disk-chart"):
        ops.wait_for_selector(f"{chart} polyline", state="attached")
    series = ops.request.get(f"{console_stack.url}/console/series",
                             params={"key": "broker:1:requests"}).json()["series"]
    assert series["broker:1:requests"] and series["broker:1:requests"][-1][1] > 0
    poll(ops, lambda: ops.inner_text("#broker-requests") not in ("\u2013", ""), "a request rate")
    assert ops.inner_text("#broker-under-replicated") == "0"
    row = ops.locator("#broker-configs tr[data-config='log.dirs']")
    assert "read-only" in row.locator(".source").inner_text()
    ops.screenshot(path=str(shots / "broker.png"), full_page=True)


def test_a_dynamic_broker_config_is_set_refused_and_reset(console_stack: ConsoleStack,
                                                          ops: Page, viewer: Page) -> None:
    url = f"{console_stack.url}/console/brokers/2"
    visit(ops, url)
    ops.fill("#broker-config-form input[name=set_name]", "log.retention.ms")
    ops.fill("#broker-config-form input[name=set_value]", "3600000")
    ops.click("#broker-config-form button[type=submit]")
    assert "log.retention.ms set to 3600000 on broker 2" in ops.inner_text("#change-done")
    assert _broker_config(console_stack, "2", "log.retention.ms") == (
        "3600000", "DYNAMIC_BROKER_CONFIG")
    row = ops.locator("#broker-configs tr[data-config='log.retention.ms']")
    assert row.locator(".value").inner_text() == "3600000"

    ops.fill("#broker-config-form input[name=set_name]", "log.cleaner.threads")
    ops.fill("#broker-config-form input[name=set_value]", "2")
    ops.select_option("#broker-config-form select[name=scope]", "default")
    ops.click("#broker-config-form button[type=submit]")
    assert "every broker (default)" in ops.inner_text("#change-done")
    assert _broker_config(console_stack, "2", "log.cleaner.threads") == (
        "2", "DYNAMIC_DEFAULT_BROKER_CONFIG")

    for key, value in (("log.dirs", "/elsewhere"), ("log.retention.ms", "soon")):
        ops.fill("#broker-config-form input[name=set_name]", key)
        ops.fill("#broker-config-form input[name=set_value]", value)
        with ops.expect_response(f"{url}/configs") as answer:
            ops.click("#broker-config-form button[type=submit]")
        assert answer.value.status == 400
        assert "INVALID_CONFIG" in ops.inner_text("#change-error")
    assert _broker_config(console_stack, "2", "log.retention.ms")[0] == "3600000"

    visit(viewer, url)  # Cluster Describe only: the charts, no configs, no form; POST: 403
    assert viewer.locator("#configs-hidden").count() == 1
    assert viewer.locator("#broker-config-form, #broker-configs tr[data-config]").count() == 0
    token = viewer.get_attribute("input[name=csrf_token]", "value") or ""
    refused = viewer.request.post(f"{url}/configs", form={
        "csrf_token": token, "set_name": "log.retention.ms", "set_value": "1"})
    assert refused.status == 403 and "CLUSTER_AUTHORIZATION_FAILED" in refused.text()

    for key in ("log.retention.ms", "log.cleaner.threads"):
        ops.once("dialog", lambda dialog: dialog.accept())
        ops.click(f"#broker-configs tr[data-config='{key}'] button")
        assert f"{key} reset" in ops.inner_text("#change-done")
        assert not _broker_config(console_stack, "2", key)[1].startswith("DYNAMIC")
