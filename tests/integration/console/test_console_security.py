"""The console's security in a real Chromium: the login wall, the ACL check behind each button
(a user without Delete sees no delete button, and a POST anyway is 403 with Kafka's error
name), CSRF, and a record whose value and header are HTML shown as text, never run."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from playwright.sync_api import Browser, Page

from .conftest import OPS, ConsoleStack, visit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SCRIPT = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"


def _csrf(page: Page) -> str:
    token = page.get_attribute("input[name=csrf_token]", "value")
    assert token
    return token


def test_an_unauthenticated_visitor_is_sent_to_the_login_page(
        browser: Browser, console_stack: ConsoleStack, shots: Path) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{console_stack.url}/console/topics?q=x")
        assert page.url == f"{console_stack.url}/console/login?next=/console/topics%3Fq%3Dx"
        page.screenshot(path=str(shots / "login.png"))
        page.fill("input[name=username]", OPS[0])
        page.fill("input[name=password]", "wrong")
        page.click("#login-form button[type=submit]")
        assert "AUTHENTICATION_FAILED" in page.inner_text("#login-error")
        page.fill("input[name=username]", OPS[0])
        page.fill("input[name=password]", OPS[1])
        page.click("#login-form button[type=submit]")
        page.wait_for_url(f"{console_stack.url}/console/topics?q=x")
        assert page.inner_text("#principal") == "User:ops"
        cookie = next(c for c in context.cookies() if c["name"] == "strata_console")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        page.click("header form.who button")
        page.wait_for_url(f"{console_stack.url}/console/login")
        page.goto(f"{console_stack.url}/console/groups")
        assert page.url.startswith(f"{console_stack.url}/console/login?next=")
    finally:
        context.close()


def test_without_delete_no_delete_button_and_a_post_is_403(
        console_stack: ConsoleStack, ops: Page, viewer: Page, shots: Path) -> None:
    console_stack.create_topic("guarded", 1, 3)
    url = f"{console_stack.url}/console/topics/guarded"
    visit(viewer, url, shots, "topic-viewer")
    assert viewer.inner_text("#topic-name") == "guarded"
    assert viewer.locator("#delete-button").count() == 0
    refused = viewer.request.post(f"{url}/delete", form={
        "csrf_token": _csrf(viewer), "confirm": "guarded"}, max_redirects=0)
    assert refused.status == 403
    assert "TOPIC_AUTHORIZATION_FAILED" in refused.text()
    visit(ops, url)
    assert ops.locator("#delete-button").count() == 1
    assert "guarded" in console_stack.cluster.metadata().topics


def test_a_post_without_the_csrf_token_is_refused(console_stack: ConsoleStack,
                                                  ops: Page) -> None:
    for token in (None, "forged"):
        form = {"name": "csrf-victim", "partitions": "1"}
        if token is not None:
            form["csrf_token"] = token
        answer = ops.request.post(f"{console_stack.url}/console/topics", form=form,
                                  max_redirects=0)
        assert answer.status == 403
        assert "CSRF_TOKEN_INVALID" in answer.text()
    assert "csrf-victim" not in console_stack.cluster.metadata().topics


def test_a_stored_script_is_shown_as_text_and_does_not_run(
        console_stack: ConsoleStack, ops: Page, shots: Path) -> None:
    console_stack.create_topic("html-records", 1, 3)
    producer = Producer({"bootstrap.servers": console_stack.bootstrap, "acks": "all",
                         "log_level": 0})
    producer.produce("html-records", key=b"<b>key</b>", value=SCRIPT.encode(),
                     headers=[("<i>h</i>", b"<script>window.__pwned = 3</script>")])
    assert producer.flush(30) == 0
    page = ops.context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    try:
        visit(page, f"{console_stack.url}/console/topics/html-records/records", shots,
              "records-html")
        row = page.locator("#records tbody tr[data-offset='0']")
        assert SCRIPT in row.inner_text()
        assert "<b>key</b>" in row.inner_text()
        assert "<script>window.__pwned = 3</script>" in row.inner_text()
        assert page.evaluate("() => window.__pwned") is None
        assert page.locator("#records script, #records img, #records b b").count() == 0
        assert dialogs == []
    finally:
        page.close()
