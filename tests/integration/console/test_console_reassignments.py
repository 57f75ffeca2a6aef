"""Partition reassignment and preferred-leader election from the console, in a real Chromium
against a real 3-broker cluster: a partition moved to another broker through the form ends
on the target replicas (Metadata), the list of moves in progress empties; a move to a broker
that does not exist and a cancel of a finished move are refused with Kafka's error shown;
electing the preferred leader makes the first target replica lead; a user without Cluster
Alter sees no forms and gets 403 posting anyway."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page

from .conftest import ConsoleStack, poll, visit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "console-moving"


def _replicas(stack: ConsoleStack) -> tuple[int, tuple[int, ...]]:
    partition = stack.cluster.admin().list_topics(TOPIC, timeout=30).topics[TOPIC].partitions[0]
    return int(partition.leader), tuple(int(r) for r in partition.replicas)


def test_a_partition_is_moved_and_its_preferred_leader_elected(
        console_stack: ConsoleStack, ops: Page, viewer: Page, shots: Path) -> None:
    console_stack.create_topic(TOPIC, 1, 2)
    leader, replicas = _replicas(console_stack)
    spare = next(b for b in (0, 1, 2) if b not in replicas)
    target = (spare, leader)  # the spare broker first: the preferred leader after the move
    url = f"{console_stack.url}/console/reassignments"
    visit(ops, f"{console_stack.url}/console/topics/{TOPIC}")
    ops.click("#reassign-link")
    ops.wait_for_url(f"{url}?topic={TOPIC}")
    assert ops.input_value("#move-form input[name=topic]") == TOPIC

    ops.fill("#move-form input[name=partition]", "0")
    ops.fill("#move-form input[name=replicas]", "7")
    ops.once("dialog", lambda dialog: dialog.accept())
    with ops.expect_response(url) as answer:
        ops.click("#move-form button[type=submit]")
    assert answer.value.status >= 400
    assert "INVALID_REPLICA_ASSIGNMENT" in ops.inner_text("#change-error")

    ops.fill("#move-form input[name=partition]", "0")
    ops.fill("#move-form input[name=replicas]", ",".join(map(str, target)))
    ops.once("dialog", lambda dialog: dialog.accept())
    ops.click("#move-form button[type=submit]")
    assert f"{TOPIC}-0 moving to brokers {spare},{leader}" in ops.inner_text("#change-done")
    console_stack.cluster.wait_for(lambda: _replicas(console_stack)[1] == target,
                                   f"{TOPIC}-0 on brokers {target}")
    poll(ops, lambda: ops.locator(f"#reassignments tr[data-topic='{TOPIC}']").count() == 0,
         "the move listed as done")
    ops.screenshot(path=str(shots / "reassignments.png"), full_page=True)

    token = ops.get_attribute("input[name=csrf_token]", "value") or ""
    ended = ops.request.post(f"{url}/cancel", form={"csrf_token": token, "topic": TOPIC,
                                                    "partition": "0"})
    assert ended.status >= 400 and "NO_REASSIGNMENT_IN_PROGRESS" in ended.text()

    ops.fill("#elect-form input[name=topic]", TOPIC)
    ops.click("#elect-form button[type=submit]")
    result = ops.inner_text("#election-outcomes tr[data-partition='0'] .result")
    assert result == "elected" or result.startswith("ELECTION_NOT_NEEDED")
    console_stack.cluster.wait_for(lambda: _replicas(console_stack)[0] == spare,
                                   f"broker {spare} leading {TOPIC}-0")

    visit(viewer, url)  # Cluster Describe, no Alter: the list, no forms; a POST is 403
    assert viewer.locator("#reassignments").count() == 1
    assert viewer.locator("#move-form, #elect-form").count() == 0
    token = viewer.get_attribute("input[name=csrf_token]", "value") or ""
    for path, form in (("/reassignments", {"replicas": "0,1"}), ("/elections", {})):
        refused = viewer.request.post(f"{console_stack.url}/console{path}", form={
            "csrf_token": token, "topic": TOPIC, "partition": "0", **form})
        assert refused.status == 403 and "CLUSTER_AUTHORIZATION_FAILED" in refused.text()
