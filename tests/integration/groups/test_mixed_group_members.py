"""Classic members inside a consumer group (KIP-848 online migration), with a confluent-kafka
member of the consumer protocol (``group.protocol=consumer``) in the group:

* a classic confluent-kafka member (``group.protocol=classic``) killed lives by its own
  ``session.timeout.ms`` (2 s here), not by ``group.consumer.session.timeout.ms`` (45 s):
  after it, the consumer-protocol member holds every partition;
* a classic member that sends JoinGroup (raw, rebalance timeout 2 s, session 45 s) and never
  SyncGroup is removed after its rebalance timeout (Kafka's sync timeout): the
  consumer-protocol member holds every partition again well before that session would end;
* a static member of the consumer protocol that closes (epoch -2) and comes back under the same
  ``group.instance.id`` on the classic protocol downgrades the group at once: it gets its
  partitions back, the other (classic) member sees no rebalance, the group is classic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient

from strata.broker.group.consumer_protocol import encode_subscription
from strata.client.broker_client import BrokerClient
from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode

from ..broker_process import BrokerProcess, running_broker
from .conftest import GROUP_SETTINGS
from .kafka_ops import fresh_topic
from .workers import WAIT_S, WORK_MS, Group

pytestmark = pytest.mark.integration

PARTITIONS: Final = 4
SESSION_MS: Final = 45_000
"""Both the consumer protocol's session and the raw classic member's: far beyond the waits."""
CLASSIC_SESSION_MS: Final = 2_000
REBALANCE_TIMEOUT_MS: Final = 2_000
WITHIN_S: Final = 12.0
"""How long a removal may take here: well under ``SESSION_MS``."""


@pytest.fixture(scope="module")
def mixed_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = {**GROUP_SETTINGS,
                "group.min.session.timeout.ms": str(CLASSIC_SESSION_MS),
                "group.consumer.min.heartbeat.interval.ms": "500",
                "group.consumer.heartbeat.interval.ms": "500",
                "group.consumer.session.timeout.ms": str(SESSION_MS)}
    with running_broker(tmp_path_factory.mktemp("broker"), settings) as started:
        yield started


def test_a_dead_classic_member_expires_after_its_own_session(
        mixed_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = mixed_broker.bootstrap
    topic, group_id, everything = fresh_topic(bootstrap, "mixed-session", PARTITIONS, 40)
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        group.start_sharing(["classic"], "confluent", everything, topics=[topic],
                            work_ms=WORK_MS, session_timeout_ms=CLASSIC_SESSION_MS)
        group.start("modern", "confluent", topics=[topic], work_ms=WORK_MS,
                    group_protocol="consumer")  # upgrades the group
        ledger.wait_until(lambda lg: lg.covers(["classic", "modern"], everything), WAIT_S,
                          "the classic and the consumer-protocol member sharing")
        killed = time.monotonic()
        group.members["classic"].kill()  # no LeaveGroup, no more heartbeats
        ledger.wait_until(lambda lg: lg.covers(["modern"], everything), WITHIN_S,
                          "the consumer-protocol member holding every partition")
        taken_over = time.monotonic() - killed
        print(f"killed classic member: its partitions moved after {taken_over:.1f}s")
        assert taken_over >= CLASSIC_SESSION_MS / 1000 - 0.5
        group.members["modern"].stop()


def test_a_classic_member_that_never_syncs_is_removed_after_its_rebalance_timeout(
        mixed_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = mixed_broker.bootstrap
    topic, group_id, everything = fresh_topic(bootstrap, "mixed-sync", PARTITIONS, 40)
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        group.start_sharing(["modern"], "confluent", everything, topics=[topic],
                            work_ms=WORK_MS, group_protocol="consumer")
        joined_at = time.monotonic()
        member_id = asyncio.run(_join_without_sync(mixed_broker, group_id, topic))
        ledger.wait_until(lambda lg: len(lg.views["modern"].assignment) < PARTITIONS,
                          WAIT_S, "the consumer-protocol member giving partitions up")
        ledger.wait_until(lambda lg: lg.covers(["modern"], everything), WITHIN_S,
                          "the consumer-protocol member holding every partition again")
        taken_back = time.monotonic() - joined_at
        print(f"classic member {member_id} that never synced: removed, partitions back "
              f"after {taken_back:.1f}s")
        assert taken_back >= REBALANCE_TIMEOUT_MS / 1000 - 0.5
        group.members["modern"].stop()


async def _join_without_sync(broker: BrokerProcess, group_id: str, topic: str) -> str:
    """A classic member's JoinGroup v5 (its id asked for first), then nothing."""
    client = BrokerClient("127.0.0.1", broker.port, client_id="never-syncs")
    fields = {"group_id": group_id, "session_timeout_ms": SESSION_MS,
              "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS, "member_id": "",
              "group_instance_id": None, "protocol_type": "consumer",
              "protocols": [{"name": "range", "metadata": encode_subscription([topic])}]}
    try:
        answer = await client.request(ApiKey.JOIN_GROUP, 5, fields)
        assert answer.error_code == ErrorCode.member_id_required, answer
        answer = await client.request(ApiKey.JOIN_GROUP, 5,
                                      {**fields, "member_id": answer.member_id})
        assert answer.error_code == ErrorCode.none and answer.leader == "", answer
        return str(answer.member_id)
    finally:
        await client.close()


def test_a_static_member_back_on_the_classic_protocol_downgrades_the_group(
        mixed_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = mixed_broker.bootstrap
    topic, group_id, everything = fresh_topic(bootstrap, "mixed-static", PARTITIONS, 40)
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        group.start_sharing(["classic"], "confluent", everything, topics=[topic],
                            work_ms=WORK_MS)
        group.start("modern", "confluent", topics=[topic], work_ms=WORK_MS,
                    group_protocol="consumer", group_instance_id="i1")
        ledger.wait_until(lambda lg: lg.covers(["classic", "modern"], everything), WAIT_S,
                          "the classic and the static consumer-protocol member sharing")
        assert _group_type(bootstrap, group_id) == ConsumerGroupType.CONSUMER
        mine = ledger.assignments(["modern"])["modern"]
        others_seq = ledger.seq
        group.members["modern"].stop()  # static: leaves with epoch -2, keeps its place
        group.start("downgraded", "confluent", topics=[topic], work_ms=WORK_MS,
                    group_instance_id="i1")  # the same instance, group.protocol=classic
        ledger.wait_until(lambda lg: lg.assignments(["downgraded"])["downgraded"] == mine,
                          WAIT_S, "the classic instance of i1 to get i1's partitions")
        assert _group_type(bootstrap, group_id) == ConsumerGroupType.CLASSIC
        moved = [e for e in ledger.events[others_seq:]
                 if e.worker == "classic" and e.kind in ("assigned", "revoked")]
        assert moved == [], f"the classic member saw a rebalance: {moved}"
        for name in ("classic", "downgraded"):
            group.members[name].stop()


def _group_type(bootstrap: str, group_id: str) -> ConsumerGroupType:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups(request_timeout=10).result(10)
    return {g.group_id: g.type for g in listed.valid}[group_id]
