"""The record browser's live tail and aborting a transaction, in a real Chromium against a
real 3-broker cluster: records produced by a client while the tail is on appear in the page
(a stored ``<script>`` as text, never run), and once stopped the page asks no more; an open
transaction aborted from its page (the REST route's abort: DescribeProducers, then
WriteTxnMarkers ABORT) lets a read_committed consumer's last stable offset pass it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from playwright.sync_api import Page, Request

from ..admin.test_transactions_api import last_stable_offset
from .conftest import ConsoleStack, visit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SCRIPT = "<script>window.__tailed = 1</script>"


def test_the_live_tail_shows_new_records_as_text_and_stops(
        console_stack: ConsoleStack, ops: Page, shots: Path) -> None:
    console_stack.create_topic("tailed", 1, 3)
    producer = Producer({"bootstrap.servers": console_stack.bootstrap, "acks": "all",
                         "log_level": 0})
    producer.produce("tailed", key=b"before", value=b"0")
    assert producer.flush(30) == 0
    polls: list[str] = []

    def seen(request: Request) -> None:
        if "/records/tail" in request.url:
            polls.append(request.url)

    ops.on("request", seen)
    try:
        visit(ops, f"{console_stack.url}/console/topics/tailed/records?seek=end&tail=1",
              shots, "records-tail")
        ops.wait_for_function("() => document.getElementById('tail-status')"
                              ".textContent.startsWith('tailing: next offset 1')")
        for i in range(3):
            producer.produce("tailed", key=f"live-{i}".encode(),
                             value=(SCRIPT if i == 1 else f"value-{i}").encode(),
                             headers=[("h", b"<b>x</b>")])
        assert producer.flush(30) == 0
        ops.wait_for_selector("#records tr.tailed[data-offset='3']")
        offsets = ops.locator("#records tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.offset)")
        assert offsets == ["0", "1", "2", "3"]
        assert SCRIPT in ops.inner_text("#records tr[data-offset='2']")
        assert "h=<b>x</b>" in ops.inner_text("#records tr[data-offset='2']")
        assert ops.evaluate("() => window.__tailed") is None
        assert ops.locator("#records script, #records td b b").count() == 0
        ops.screenshot(path=str(shots / "records-tail.png"), full_page=True)

        ops.click("#tail-button")
        assert ops.inner_text("#tail-status") == "off"
        stopped_at = len(polls)
        ops.wait_for_timeout(2500)  # more than two polling periods: none may come
        assert len(polls) == stopped_at > 1
    finally:
        ops.remove_listener("request", seen)


def test_an_open_transaction_is_aborted_from_its_page(console_stack: ConsoleStack, ops: Page,
                                                      shots: Path) -> None:
    console_stack.create_topic("refunds", 1, 3)
    producer = Producer({"bootstrap.servers": console_stack.bootstrap,
                         "transactional.id": "console-abort", "transaction.timeout.ms": 120_000,
                         "log_level": 0})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("refunds", b"r1", partition=0)
    producer.produce("refunds", b"r2", partition=0)
    assert producer.flush(30) == 0
    assert last_stable_offset(console_stack.bootstrap, "refunds") == 0
    visit(ops, f"{console_stack.url}/console/transactions/console-abort", shots, "transaction")
    row = ops.locator("#txn-partitions tr[data-partition='refunds-0']")
    assert row.locator(".start").inner_text() == "0"
    ops.once("dialog", lambda dialog: dialog.accept())
    row.locator("button.abort").click()
    assert "aborted the transaction of producer" in ops.inner_text("#change-done")
    assert "on refunds-0" in ops.inner_text("#change-done")
    deadline = time.monotonic() + 15
    while last_stable_offset(console_stack.bootstrap, "refunds") != 3:  # 2 records, 1 marker
        assert time.monotonic() < deadline, "the LSO did not pass the aborted transaction"
        time.sleep(0.1)
    ops.reload()
    assert ops.locator("#txn-partitions tr[data-partition='refunds-0'] button.abort").count() \
        == 0

    ops.goto(f"{console_stack.url}/console/transactions")
    ops.click("#hanging-link")
    ops.fill("#hanging-form input[name=topic]", "refunds")
    ops.fill("#hanging-form input[name=max_transaction_timeout_ms]", "0")
    ops.click("#hanging-form button[type=submit]")
    assert ops.locator("#hanging tbody tr").all_inner_texts() == ["no hanging transactions"]
