"""The console's pages in a real Chromium against a real 3-broker cluster, checked against
what the CLI and the clients see: the overview's brokers, a topic created in the console and
listed by ``strata topic list`` (and one deleted, gone from it), record 17 of 20 found by
offset and by key, a group's lag equal to ``strata groups describe``'s, offsets reset through
the console (dry run first) seen by a client, and every page's first paint measured and
printed with a 1,000-partition topic in the cluster (figures, not a timed assertion).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from playwright.sync_api import Page

from ..broker_process import STRATA
from .conftest import PAINT_BUDGET_MS, ConsoleStack, visit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

RECORDS = 20
GROUP = "billing"
COMMITTED = 12


def _cli(stack: ConsoleStack, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run([str(STRATA), *args, "--format", "json", "-b", stack.bootstrap],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def orders(console_stack: ConsoleStack) -> str:
    """``orders``: 20 records (key ``key-<i>``, a JSON value) from confluent-kafka; the group
    ``billing`` has committed offset 12 and has no members."""
    console_stack.create_topic("orders", 1, 3)
    producer = Producer({"bootstrap.servers": console_stack.bootstrap, "acks": "all",
                         "log_level": 0})
    for i in range(RECORDS):
        producer.produce("orders", key=f"key-{i}".encode(),
                         value=json.dumps({"n": i, "item": f"item-{i}"}).encode(),
                         headers=[("source", b"test")])
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": console_stack.bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("orders", 0, COMMITTED)], asynchronous=False)
    finally:
        consumer.close()
    return "orders"


def _committed(stack: ConsoleStack) -> int:
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": GROUP})
    try:
        [tp] = consumer.committed([TopicPartition("orders", 0)], timeout=30)
        return int(tp.offset)
    finally:
        consumer.close()


def test_the_overview_shows_the_brokers_racks_and_controller(
        console_stack: ConsoleStack, ops: Page, shots: Path) -> None:
    visit(ops, f"{console_stack.url}/console/", shots, "overview")
    rows = [r.split("\t") for r in ops.locator("#brokers tbody tr").all_inner_texts()]
    assert [r[0] for r in rows] == ["0", "1", "2"]
    assert [r[3] for r in rows] == ["rack-0", "rack-1", "rack-2"]
    controller = console_stack.cluster.controller()
    assert [r[4].strip() for r in rows] == ["✔" if i == controller else "" for i in range(3)]
    assert int(ops.inner_text("#offline")) == 0


def test_a_topic_created_in_the_console_is_listed_by_the_cli(
        console_stack: ConsoleStack, ops: Page, shots: Path) -> None:
    visit(ops, f"{console_stack.url}/console/topics", shots, "topics")
    ops.fill("#create-topic input[name=name]", "made-in-console")
    ops.fill("#create-topic input[name=partitions]", "3")
    ops.fill("#create-topic input[name=replication_factor]", "3")
    ops.click("#create-topic button[type=submit]")
    ops.wait_for_url(f"{console_stack.url}/console/topics/made-in-console")
    assert ops.locator("#partitions tbody tr").count() == 3
    listed = {t["name"]: t for t in _cli(console_stack, "topic", "list")}
    assert listed["made-in-console"]["partitions"] == 3
    ops.goto(f"{console_stack.url}/console/topics?q=made-in")
    assert ops.locator("#topics tbody tr").all_inner_texts()[0].startswith("made-in-console")


def test_a_topic_deleted_in_the_console_is_gone_for_the_cli(console_stack: ConsoleStack,
                                                            ops: Page) -> None:
    console_stack.create_topic("doomed", 1, 3)
    ops.goto(f"{console_stack.url}/console/topics/doomed")
    ops.fill("#delete-topic input[name=confirm]", "doomed")
    ops.once("dialog", lambda dialog: dialog.accept())
    ops.click("#delete-button")
    ops.wait_for_url(f"{console_stack.url}/console/topics")
    assert "doomed" not in {t["name"] for t in _cli(console_stack, "topic", "list")}


def test_record_17_is_found_by_offset_and_by_key(console_stack: ConsoleStack, orders: str,
                                                 ops: Page, shots: Path) -> None:
    base = f"{console_stack.url}/console/topics/{orders}/records"
    visit(ops, base, shots, "records")
    ops.fill("#seek-form input[name=offset]", "17")
    ops.fill("#seek-form input[name=limit]", "1")
    ops.select_option("#seek-form select[name=view]", "json")
    ops.click("#seek-form button[type=submit]")
    ops.wait_for_url("**offset=17**")
    rows = ops.locator("#records tbody tr")
    assert rows.count() == 1 and rows.get_attribute("data-offset") == "17"
    assert '"n": 17' in rows.inner_text() and "key-17" in rows.inner_text()
    ops.goto(f"{base}?key=key-17&view=hex")
    rows = ops.locator("#records tbody tr")
    assert rows.count() == 1 and rows.get_attribute("data-offset") == "17"
    assert b"key-17".hex(" ") in rows.inner_text()
    ops.goto(f"{base}?seek=end&limit=3")
    assert [r.get_attribute("data-offset") for r in ops.locator("#records tbody tr").all()] \
        == ["17", "18", "19"]


def test_a_record_produced_in_the_console_is_read_back(console_stack: ConsoleStack,
                                                       orders: str, ops: Page) -> None:
    ops.goto(f"{console_stack.url}/console/topics/{orders}/records")
    ops.fill("#produce-form input[name=key]", "from-console")
    ops.fill("#produce-form textarea[name=value]", '{"n": "console"}')
    ops.fill("#produce-form textarea[name=headers]", "origin=browser")
    ops.click("#produce-form button[type=submit]")
    ops.wait_for_url(f"**/records?partition=0&offset={RECORDS}")
    row = ops.locator(f"#records tbody tr[data-offset='{RECORDS}']")
    assert "from-console" in row.inner_text() and "origin=browser" in row.inner_text()


def test_the_group_lag_equals_the_cli_and_a_reset_moves_the_offsets(
        console_stack: ConsoleStack, orders: str, ops: Page, shots: Path) -> None:
    [described] = _cli(console_stack, "groups", "describe", GROUP)
    cli_lag = sum(p["lag"] for p in described["partitions"])
    visit(ops, f"{console_stack.url}/console/groups", shots, "groups")
    ops.click(f"#groups a:text-is('{GROUP}')")
    ops.wait_for_url(f"**/console/groups/{GROUP}")
    assert int(ops.inner_text("#total-lag")) == cli_lag > 0
    row = ops.locator("#offsets tbody tr[data-topic='orders'][data-partition='0']")
    assert int(row.locator(".lag").inner_text()) == described["partitions"][0]["lag"]
    ops.screenshot(path=str(shots / "group.png"), full_page=True)

    ops.select_option("#reset-form select[name=to]", "offset")
    ops.fill("#reset-form input[name=value]", "5")
    ops.click("#preview-button")
    assert row.locator(".preview").inner_text() == "5"
    assert row.locator(".committed").inner_text() == str(_committed(console_stack))
    ops.screenshot(path=str(shots / "group-reset-preview.png"), full_page=True)

    ops.once("dialog", lambda dialog: dialog.accept())
    ops.click("#reset-button")
    ops.wait_for_selector("#reset-done")
    assert _committed(console_stack) == 5
    assert row.locator(".committed").inner_text() == "5"
    [after] = _cli(console_stack, "groups", "describe", GROUP)
    assert int(ops.inner_text("#total-lag")) == sum(p["lag"] for p in after["partitions"])


def test_an_open_transaction_is_listed_and_described_until_it_commits(
        console_stack: ConsoleStack, ops: Page, shots: Path) -> None:
    console_stack.create_topic("payments", 1, 3)
    producer = Producer({"bootstrap.servers": console_stack.bootstrap,
                         "transactional.id": "console-tx", "transaction.timeout.ms": 120_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("payments", b"pending", partition=0)
    assert producer.flush(30) == 0
    visit(ops, f"{console_stack.url}/console/transactions?state=Ongoing", shots, "transactions")
    row = ops.locator("#transactions tbody tr", has_text="console-tx")
    assert row.count() == 1, ops.inner_text("main")
    assert row.locator(".state").inner_text() == "Ongoing"
    row.locator("a").click()
    assert ops.inner_text("#transactional-id") == "console-tx"
    assert ops.inner_text("#txn-state") == "Ongoing"
    assert [r.split("\t")[:2] for r in ops.locator("#txn-partitions tbody tr")
            .all_inner_texts()] == [["payments", "0"]]
    producer.commit_transaction(30)
    deadline = time.monotonic() + 10  # the markers and CompleteCommit follow the EndTxn answer
    while True:
        ops.reload()
        if ops.inner_text("#txn-state") == "CompleteCommit" or time.monotonic() > deadline:
            break
    assert ops.inner_text("#txn-state") == "CompleteCommit"
    assert ops.locator("#txn-partitions tbody tr").all_inner_texts() == [
        "no partitions in a transaction now"]


def test_every_page_with_1000_partitions_reports_its_first_paint(
        console_stack: ConsoleStack, orders: str, ops: Page) -> None:
    admin = console_stack.cluster.admin()
    admin.create_topics([NewTopic("wide", 1000, 1)])["wide"].result(timeout=60)
    console_stack.cluster.wait_for(
        lambda: (t := console_stack.cluster.metadata().topics.get("wide")) is not None
        and len(t.partitions) == 1000 and all(p.leader >= 0 for p in t.partitions.values()),
        "wide has a leader for each of its 1000 partitions", timeout=120)
    base = f"{console_stack.url}/console"
    pages = [f"{base}/", f"{base}/topics", f"{base}/topics/wide",
             f"{base}/topics/wide?page=10", f"{base}/topics/wide/records?partition=999",
             f"{base}/topics/{orders}/records", f"{base}/topics/{orders}/records?seek=end",
             f"{base}/groups", f"{base}/groups/{GROUP}", f"{base}/transactions",
             f"{base}/acls", f"{base}/users", f"{base}/quotas", f"{base}/brokers/0",
             f"{base}/reassignments"]
    # The first visit after the topic's creation includes the admin service's clients
    # learning 1,000 new leaders; it is printed, the budget applies to the median of the
    # next five (this machine's cores are shared with other test runs).
    for url in pages:
        visit(ops, url)
    paints = {url: statistics.median(visit(ops, url) for _ in range(5)) for url in pages}
    ops.goto(f"{base}/topics/wide?page=10")
    assert ops.inner_text("#partition-total") == "1000"
    assert ops.locator("#partitions tbody tr").count() == 100
    assert ops.locator("#partitions tbody tr").last.inner_text().startswith("999")
    # Speed is measured, not asserted (the project's rule: no timed assertions in tests);
    # the figures are printed in the report's line format and compared with the issue's
    # 300 ms budget in the notes.
    for url, paint in paints.items():
        print(f"console first paint (median of 5): {paint:.0f} ms "
              f"(budget {PAINT_BUDGET_MS:.0f} ms, load {os.getloadavg()[0]:.1f}): {url}")
    assert all(paint > 0 for paint in paints.values())
