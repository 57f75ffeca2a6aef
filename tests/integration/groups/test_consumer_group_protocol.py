"""KIP-848 consumer groups with confluent-kafka (librdkafka 2.16, ``group.protocol=consumer``).

Members are ``group_worker.py`` processes (``workers.py``) committing after every batch. The
broker runs the consumer protocol with loopback timings: a 500 ms heartbeat interval and a
6 s session (the bounds lowered to allow them). Checks, besides ``ledger.check_processing``:

* no two members ever hold one partition at the same time, from the members' own callbacks:
  each ``assigned`` / ``revoked`` event carries ``time.monotonic()`` (machine-wide), and per
  partition the holding intervals must not overlap;
* the group as ConsumerGroupDescribe and ListGroups show it (type ``consumer``, epochs);
* a broker restart (SIGTERM or ``kill -9``) of a 1-broker cluster: the coordinator replays the
  group's records, the members go on without a rebalance (no callback fires, the member ids
  stay), and no committed offset goes backwards;
* static membership: a member closing with ``group.instance.id`` keeps its partitions for its
  next instance, and nobody else moves;
* a regex subscription resolved by the broker picks up a topic created later.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupType
from confluent_kafka.admin import AdminClient

from strata.client.broker_client import BrokerClient
from strata.protocol import ApiKey

from ..broker_process import BrokerProcess, running_broker
from ..cli.conftest import run_strata
from .conftest import GROUP_SETTINGS
from .kafka_ops import committed, create_topic, end_offsets, fresh_topic, produce
from .ledger import TP, Ledger, all_committed, check_processing, expected_positions
from .workers import WAIT_S, WORK_MS, Group

pytestmark = pytest.mark.integration

PARTITIONS: Final = 12
STEP_RECORDS: Final = 2_400
CONSUMER_SETTINGS: Final = {
    **GROUP_SETTINGS,
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "6000",
}
REVOKE_MS: Final = 1000
"""How long each member takes to let go of partitions: far longer than a heartbeat interval,
so a partition handed to another member before the revocation ended would show."""
SPEC: Final = {"group_protocol": "consumer", "work_ms": WORK_MS, "revoke_ms": REVOKE_MS}


@pytest.fixture(scope="module")
def consumer_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("broker"), CONSUMER_SETTINGS) as started:
        yield started


def holding_overlaps(ledger: Ledger) -> list[str]:
    """Partitions two members held at once, from the callbacks' timestamps."""
    held: dict[TP, tuple[str, float]] = {}
    timed = sorted((e for e in ledger.events if e.kind in ("assigned", "revoked")),
                   key=lambda e: (float(e.data["t"]), e.seq))
    for event in timed:
        for t, p in event.data["tps"]:
            tp = (t, p)
            if event.kind == "assigned":
                if tp in held and held[tp][0] != event.worker:
                    return [f"{tp} assigned to {event.worker} at {event.data['t']:.3f} while "
                            f"{held[tp][0]} held it since {held[tp][1]:.3f}"]
                held[tp] = (event.worker, float(event.data["t"]))
            elif held.get(tp, ("",))[0] == event.worker:
                del held[tp]
    return []


def test_members_join_and_leave_one_by_one_exactly_once(
        consumer_broker: BrokerProcess, tmp_path: Path) -> None:
    """Four members join one at a time, then leave one at a time, over a 12-partition topic
    while records flow: every record processed exactly once with manual commits, never one
    partition in two members at once, and the group reported as a consumer group."""
    bootstrap = consumer_broker.bootstrap
    topic, group_id, everything = fresh_topic(bootstrap, "kip848", PARTITIONS, STEP_RECORDS)
    names = ["m1", "m2", "m3", "m4"]
    produced = STEP_RECORDS
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        for count in range(1, len(names) + 1):  # join one by one
            group.start(names[count - 1], "confluent", topics=[topic], **SPEC)
            ledger.wait_until(lambda lg, c=count: lg.covers(names[:c], everything), WAIT_S,
                              f"{count} members sharing the partitions")
            produce(bootstrap, topic, PARTITIONS, STEP_RECORDS, start=produced)
            produced += STEP_RECORDS
            ledger.wait_until(lambda lg, n=produced: len(lg.unique) >= n - STEP_RECORDS,
                              WAIT_S, "the records before this step processed")
        _check_described(bootstrap, group_id, names)
        for count in range(len(names) - 1, 0, -1):  # leave one by one
            group.members[names[count]].stop()
            ledger.wait_until(lambda lg, c=count: lg.covers(names[:c], everything), WAIT_S,
                              f"{count} members sharing the partitions after a leave")
            produce(bootstrap, topic, PARTITIONS, STEP_RECORDS, start=produced)
            produced += STEP_RECORDS
        ends = end_offsets(topic, PARTITIONS, produced)
        group.wait_processed(ends, f"all {produced} records processed")
        redelivered = check_processing(ledger, ends)
        assert redelivered == 0, f"{redelivered} records processed twice\n{ledger.summary()}"
        assert holding_overlaps(ledger) == []
        assert committed(bootstrap, group_id, ends) == ends
        group.members["m1"].stop()


def _check_described(bootstrap: str, group_id: str, members: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group_id], request_timeout=10)[group_id] \
        .result(10)
    assert description.type == ConsumerGroupType.CONSUMER
    assert description.state == ConsumerGroupState.STABLE
    assert sorted(m.client_id for m in description.members) == members
    assigned = [tp for m in description.members for tp in m.assignment.topic_partitions]
    assert len(assigned) == PARTITIONS
    listed = admin.list_consumer_groups(request_timeout=10).result(10)
    types = {g.group_id: g.type for g in listed.valid}
    assert types[group_id] == ConsumerGroupType.CONSUMER
    # ``strata groups describe``: the protocol, and each member's current and target partitions
    result = run_strata("groups", "describe", group_id, "--format", "json",
                        env={"STRATA_BOOTSTRAP_SERVERS": bootstrap}).ok()
    doc = json.loads(result.stdout)
    assert doc["protocol"] == "consumer" and doc["state"] == "STABLE"
    assert sorted(m["client_id"] for m in doc["members"]) == members
    for member in doc["members"]:
        assert member["partitions"] == member["target_partitions"] and member["partitions"]


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "kill-9"])
def test_a_restarted_coordinator_resumes_the_group_without_a_rebalance(
        consumer_broker: BrokerProcess, hard: bool, tmp_path: Path) -> None:
    broker = consumer_broker  # the module's broker, restarted on its data dir and port
    bootstrap = broker.bootstrap
    topic, group_id, everything = fresh_topic(bootstrap, "kip848-restart", PARTITIONS,
                                              STEP_RECORDS)
    names = ["m1", "m2", "m3"]
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        for name in names:
            group.start(name, "confluent", topics=[topic], group_protocol="consumer")
        first = end_offsets(topic, PARTITIONS, STEP_RECORDS)
        ledger.wait_until(lambda lg: lg.covers(names, everything)
                          and lg.unique >= expected_positions(first)
                          and all_committed(first)(lg),
                          WAIT_S, "three members to process and commit the first records")
        before = _members(bootstrap, group_id)
        assignments = ledger.assignments(names)
        offsets_before = committed(bootstrap, group_id, everything)
        assert offsets_before == first
        restart_seq = ledger.seq

        assert broker.restart(hard=hard) == (-9 if hard else 0)

        assert committed(bootstrap, group_id, everything) == offsets_before
        produce(bootstrap, topic, PARTITIONS, STEP_RECORDS, start=STEP_RECORDS)
        ends = end_offsets(topic, PARTITIONS, 2 * STEP_RECORDS)
        group.wait_processed(ends, "the records produced after the restart processed")
        check_processing(ledger, ends)
        moved = [e for e in ledger.events[restart_seq:] if e.kind in ("assigned", "revoked")]
        assert moved == [], f"a rebalance after the restart: {moved}"
        assert ledger.assignments(names) == assignments
        assert _members(bootstrap, group_id) == before
        for event in ledger.events[restart_seq:]:  # no commit below what was committed
            if event.kind == "commit" and event.data["ok"]:
                for t, p, offset in event.data["offsets"]:
                    assert offset >= offsets_before[(t, p)], event
        assert committed(bootstrap, group_id, ends) == ends
        for name in names:
            group.members[name].stop()


def _members(bootstrap: str, group_id: str) -> dict[str, set[TP]]:
    """Member id -> assigned partitions, as ConsumerGroupDescribe reports them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group_id], request_timeout=10)[group_id] \
        .result(10)
    return {m.member_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
            for m in description.members}


def test_regex_subscription_is_resolved_by_the_broker(
        consumer_broker: BrokerProcess, tmp_path: Path) -> None:
    """``^orders-.*`` sent as ``SubscribedTopicRegex``: the broker resolves it over its topics,
    and a matching topic created later joins the assignment at the next heartbeat. (The
    module's other tests name their topics ``kip848-*``: the regex sees only these.)"""
    broker = consumer_broker
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "orders-eu", 3)
    create_topic(bootstrap, "payments-eu", 3)
    produce(bootstrap, "orders-eu", 3, 300)
    produce(bootstrap, "payments-eu", 3, 300)
    with Group(bootstrap, "regex-group", tmp_path) as group:
        group.start("m1", "confluent", pattern="^orders-.*", group_protocol="consumer")
        eu = end_offsets("orders-eu", 3, 300)
        group.wait_processed(eu, "orders-eu consumed")
        (member,) = _describe(broker, "regex-group").members  # the broker has the regex
        assert (member.subscribed_topic_regex, member.subscribed_topic_names) \
            == ("(^orders-.*)", ())  # librdkafka parenthesizes (and ORs several)
        create_topic(bootstrap, "orders-us", 2)
        produce(bootstrap, "orders-us", 2, 200)
        both = {**eu, **end_offsets("orders-us", 2, 200)}
        group.wait_processed(both, "orders-us picked up and consumed")
        assert {t for t, _, _ in group.ledger.unique} == {"orders-eu", "orders-us"}
        check_processing(group.ledger, both)
        group.members["m1"].stop()


def _describe(broker: BrokerProcess, group_id: str) -> Any:
    """ConsumerGroupDescribe v1 of one group, as the broker answers it."""
    async def call() -> Any:
        client = BrokerClient("127.0.0.1", broker.port, client_id="kip848-test")
        try:
            return await client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
                "group_ids": [group_id], "include_authorized_operations": False})
        finally:
            await client.close()

    (described,) = asyncio.run(call()).groups
    assert described.error_code == 0, described
    return described


def test_a_static_member_restarts_into_its_own_partitions(
        consumer_broker: BrokerProcess, tmp_path: Path) -> None:
    """``group.instance.id``: a static member that closes (member epoch -2) keeps its place;
    its next instance (a new member id) gets the same partitions back, and the other member
    sees no rebalance."""
    bootstrap = consumer_broker.bootstrap
    topic, group_id, everything = fresh_topic(bootstrap, "kip848-static", 6, 1_200)
    spec = {"topics": [topic], "group_protocol": "consumer"}
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        group.start("s1", "confluent", group_instance_id="i1", **spec)
        group.start("s2", "confluent", group_instance_id="i2", **spec)
        ledger.wait_until(lambda lg: lg.covers(["s1", "s2"], everything), WAIT_S,
                          "two static members sharing the partitions")
        first = end_offsets(topic, 6, 1_200)
        group.wait_processed(first, "the first records processed")
        mine = ledger.assignments(["s1"])["s1"]
        others_seq = ledger.seq
        group.members["s1"].stop()
        group.start("s1-again", "confluent", group_instance_id="i1", **spec)
        ledger.wait_until(lambda lg: lg.assignments(["s1-again"])["s1-again"] == mine,
                          WAIT_S, "the new instance of i1 to get i1's partitions")
        produce(bootstrap, topic, 6, 1_200, start=1_200)
        ends = end_offsets(topic, 6, 2_400)
        group.wait_processed(ends, "the records produced after the restart")
        check_processing(ledger, ends)
        moved = [e for e in ledger.events[others_seq:]
                 if e.worker == "s2" and e.kind in ("assigned", "revoked")]
        assert moved == [], f"s2 saw a rebalance: {moved}"
        for name in ("s1-again", "s2"):
            group.members[name].stop()


def test_rolling_upgrade_to_the_consumer_protocol_and_back(
        consumer_broker: BrokerProcess, tmp_path: Path) -> None:
    """KIP-848's online migration, as Kafka's upgrade guide rolls it: three classic members
    (``group.protocol=classic``) replaced one by one by consumer-protocol members while records
    flow — the group is upgraded when the first one joins, the classic members go on inside
    it — then back one by one: the group is downgraded when the last consumer-protocol member
    leaves (one of the classic members of the mixed group is kafka-python). Every record
    processed, none twice beyond what the commit points allow (the count is printed), never
    one partition in two members at once, the committed offsets carried through both
    conversions."""
    bootstrap = consumer_broker.bootstrap
    topic, group_id, everything = fresh_topic(bootstrap, "kip848-migrate", PARTITIONS,
                                              STEP_RECORDS)
    classic = {"topics": [topic], "work_ms": WORK_MS}
    modern = {**classic, **SPEC}
    produced = STEP_RECORDS
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        current = ["c1", "c2", "c3"]
        group.start_sharing(current, "confluent", everything, **classic)
        # d2 is a kafka-python member (range and roundrobin; the group agrees on range)
        steps = [("c1", "k1", "confluent", modern), ("c2", "k2", "confluent", modern),
                 ("c3", "k3", "confluent", modern), ("k1", "d1", "confluent", classic),
                 ("k2", "d2", "kafka-python", classic), ("k3", "d3", "confluent", classic)]
        for old, new, client, spec in steps:
            # A member is stopped once the group is Stable, not while a reconciliation is
            # under way: librdkafka 2.16 closing a consumer-protocol member between its
            # incremental revoke and the empty assign that follows takes the application's
            # answer to that assign for the revoke of everything, and sends its leave heartbeat
            # before the application's revoke callback has run (its debug log: "delegating
            # incremental assign of 0 partition(s) ... cooperative assign after revoke", then
            # "Consumer is terminating: treating assign as unassign", then "leave"). The broker
            # then rightly hands the partitions on while the closing application still holds
            # them: a client race, not what this test checks.
            _wait_stable(bootstrap, group_id)
            group.members[old].stop()
            current = [n for n in current if n != old] + [new]
            group.start(new, client, **spec)
            ledger.wait_until(lambda lg, names=list(current): lg.covers(names, everything),
                              WAIT_S, f"{old} replaced by {new}: {current} sharing")
            if new == "k1":
                assert _group_type(bootstrap, group_id) == ConsumerGroupType.CONSUMER
            produce(bootstrap, topic, PARTITIONS, STEP_RECORDS, start=produced)
            produced += STEP_RECORDS
        assert _group_type(bootstrap, group_id) == ConsumerGroupType.CLASSIC
        ends = end_offsets(topic, PARTITIONS, produced)
        group.wait_processed(ends, f"all {produced} records processed")
        redelivered = check_processing(ledger, ends)
        print(f"rolling upgrade and downgrade: {redelivered} records processed twice")
        assert holding_overlaps(ledger) == []
        assert committed(bootstrap, group_id, ends) == ends
        for name in current:
            group.members[name].stop()


def _wait_stable(bootstrap: str, group_id: str) -> None:
    """Until ListGroups shows the group Stable: every member reconciled to its target."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + WAIT_S
    state = None
    while time.monotonic() < deadline:
        listed = admin.list_consumer_groups(request_timeout=10).result(10)
        state = {g.group_id: g.state for g in listed.valid}.get(group_id)
        if state == ConsumerGroupState.STABLE:
            return
        time.sleep(0.2)
    raise AssertionError(f"group {group_id} not Stable within {WAIT_S:.0f} s (state {state})")


def _group_type(bootstrap: str, group_id: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups(request_timeout=10).result(10)
    return {g.group_id: g.type for g in listed.valid}[group_id]
