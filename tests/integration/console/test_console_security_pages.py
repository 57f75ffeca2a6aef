"""The console's security pages in a real Chromium against a real 3-broker cluster: an ACL
created in the console is listed by ``strata acls list`` and gone after its delete; an invalid
one is refused with the reason; a SCRAM user created and updated is what
DescribeUserScramCredentials reports, and a confluent-kafka client logs in with it over the
brokers' SASL_PLAINTEXT listener (and is refused once the console deleted it); a
quota set is read back from the REST API, a fractional byte rate is refused with Kafka's
error, and removed; a user without Cluster Alter sees no forms and gets 403 posting anyway."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from playwright.sync_api import Page

from ..broker_process import STRATA
from .conftest import OPS, ConsoleStack, visit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _cli_acls(stack: ConsoleStack) -> list[dict[str, Any]]:
    done = subprocess.run([str(STRATA), "acls", "list", "--metadata-store",
                           stack.cluster.store_url, "--format", "json"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _scram_users(stack: ConsoleStack) -> dict[str, list[tuple[str, int]]]:
    admin = stack.cluster.admin()
    described = admin.describe_user_scram_credentials(request_timeout=30).result(timeout=30)
    return {user: sorted((info.mechanism.name, info.iterations)
                         for info in d.scram_credential_infos)
            for user, d in described.items()}


def _sasl_login(stack: ConsoleStack, user: str, password: str) -> str:
    """Log in as ``user`` with SCRAM-SHA-256 over the SASL listener and ask for metadata:
    "ok", or the Kafka error the login failed with (bounded by a 5 s metadata request)."""
    errors: list[KafkaError] = []
    client = AdminClient({"bootstrap.servers": stack.sasl_bootstrap,
                          "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
                          "sasl.password": password, "error_cb": errors.append,
                          "log_level": 0})
    try:
        client.list_topics(timeout=5)
    except KafkaException as exc:
        client.poll(1)  # serves error_cb: the login's own error
        named = [e.name() for e in errors] or [exc.args[0].name()]
        return ",".join(dict.fromkeys(named))
    return "ok"


def _until(check: Callable[[], str], wanted: Callable[[str], bool], what: str,
           timeout_s: float = 60.0) -> str:
    deadline = time.monotonic() + timeout_s
    while not wanted(last := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what} (last: {last})")
        time.sleep(0.2)  # the next attempt of a polled condition, bounded by the deadline
    return last


def _rest_quotas(stack: ConsoleStack, user: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{stack.url}/v1/quotas", params={"user": user}, auth=OPS, timeout=30)
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, Any]] = answer.json()
    return rows


AUDITOR = {"resource_type": "Topic", "pattern_type": "LITERAL", "name": "audit-log",
           "principal": "User:auditor", "host": "*", "operation": "Read",
           "permission_type": "Allow"}


def test_an_acl_created_in_the_console_is_listed_by_the_cli_then_deleted(
        console_stack: ConsoleStack, ops: Page, viewer: Page, shots: Path) -> None:
    url = f"{console_stack.url}/console/acls"
    visit(ops, url, shots, "acls")
    ops.select_option("#acl-form select[name=resource_type]", "TOPIC")
    ops.fill("#acl-form input[name=name]", "audit-log")
    ops.fill("#acl-form input[name=principal]", "User:auditor")
    ops.select_option("#acl-form select[name=operation]", "READ")
    ops.select_option("#acl-form select[name=permission]", "ALLOW")
    ops.click("#acl-form button[type=submit]")
    assert "created: Allow User:auditor Read" in ops.inner_text("#change-done")
    row = ops.locator("#acls tr[data-principal='User:auditor']")
    assert row.count() == 1 and row.locator(".operation").inner_text() == "Read"
    assert AUDITOR in _cli_acls(console_stack)
    ops.screenshot(path=str(shots / "acls-created.png"), full_page=True)

    ops.fill("#acl-form input[name=name]", "audit-log")
    ops.fill("#acl-form input[name=principal]", "auditor")  # no principal type
    ops.click("#acl-form button[type=submit]")
    assert "VALIDATION_ERROR" in ops.inner_text("#change-error")
    assert ops.input_value("#acl-form input[name=name]") == "audit-log"  # the form is kept

    visit(viewer, url)  # Cluster Describe, no Alter: the list, no forms; a POST is 403
    assert viewer.locator("#acls tr[data-principal='User:auditor']").count() == 1
    assert viewer.locator("#acl-form, .delete-acl").count() == 0
    token = viewer.get_attribute("input[name=csrf_token]", "value") or ""
    refused = viewer.request.post(url, form={
        "csrf_token": token, "resource_type": "CLUSTER", "principal": "User:viewer",
        "operation": "ALL", "permission": "ALLOW"})
    assert refused.status == 403 and "CLUSTER_AUTHORIZATION_FAILED" in refused.text()

    ops.once("dialog", lambda dialog: dialog.accept())
    ops.click("#acls tr[data-principal='User:auditor'] .delete-acl")
    assert "deleted 1" in ops.inner_text("#change-done")
    assert ops.locator("#acls tr[data-principal='User:auditor']").count() == 0
    assert AUDITOR not in _cli_acls(console_stack)


def test_a_scram_user_is_created_updated_and_deleted(console_stack: ConsoleStack, ops: Page,
                                                     shots: Path) -> None:
    url = f"{console_stack.url}/console/users"
    visit(ops, url, shots, "users")
    for iterations in ("8192", "4096"):
        ops.fill("#user-form input[name=user]", "alice")
        ops.fill("#user-form input[name=password]", "alice-secret")
        ops.select_option("#user-form select[name=mechanism]", "SCRAM-SHA-256")
        ops.fill("#user-form input[name=iterations]", iterations)
        ops.click("#user-form button[type=submit]")
        assert "SCRAM-SHA-256 credential of alice saved" in ops.inner_text("#change-done")
        assert _scram_users(console_stack)["alice"] == [("SCRAM_SHA_256", int(iterations))]
    row = ops.locator("#users tr[data-user='alice'][data-mechanism='SCRAM-SHA-256']")
    assert row.locator("td.num").inner_text() == "4096"
    assert "alice-secret" not in ops.content()
    ops.screenshot(path=str(shots / "users-created.png"), full_page=True)
    _until(lambda: _sasl_login(console_stack, "alice", "alice-secret"), lambda r: r == "ok",
           "alice logs in over SASL_PLAINTEXT with the password set in the console")
    assert "AUTHENTICATION" in _sasl_login(console_stack, "alice", "not-her-password")
    ops.once("dialog", lambda dialog: dialog.accept())
    row.locator(".delete-user").click()
    assert "credential of alice deleted" in ops.inner_text("#change-done")
    assert "alice" not in _scram_users(console_stack)
    _until(lambda: _sasl_login(console_stack, "alice", "alice-secret"),
           lambda r: "AUTHENTICATION" in r, "alice refused once deleted in the console")


def test_a_quota_is_set_read_back_refused_when_fractional_and_removed(
        console_stack: ConsoleStack, ops: Page, shots: Path) -> None:
    url = f"{console_stack.url}/console/quotas"
    visit(ops, url, shots, "quotas")
    ops.fill("#quota-form input[name=user]", "bob")
    ops.select_option("#quota-form select[name=key]", "producer_byte_rate")
    ops.fill("#quota-form input[name=value]", "1048576")
    ops.click("#quota-form button[type=submit]")
    assert "user bob: producer_byte_rate set to 1048576" in ops.inner_text("#change-done")
    row = ops.locator("#quotas tr[data-user='bob'][data-key='producer_byte_rate']")
    assert float(row.locator(".value").inner_text()) == 1048576
    assert _rest_quotas(console_stack, "bob") == [
        {"entity": [{"type": "user", "name": "bob"}], "quotas": {"producer_byte_rate": 1048576.0}}]
    ops.screenshot(path=str(shots / "quotas-set.png"), full_page=True)

    ops.fill("#quota-form input[name=user]", "bob")
    ops.fill("#quota-form input[name=value]", "1.5")
    with ops.expect_response(url) as answer:
        ops.click("#quota-form button[type=submit]")
    assert answer.value.status == 400
    assert "INVALID_REQUEST" in ops.inner_text("#change-error")

    ops.once("dialog", lambda dialog: dialog.accept())
    row.locator(".delete-quota").click()
    assert "producer_byte_rate removed" in ops.inner_text("#change-done")
    assert _rest_quotas(console_stack, "bob") == []
