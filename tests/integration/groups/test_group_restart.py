"""A broker restart under a working group: committed offsets and group metadata are intact.

The broker is stopped gracefully (SIGTERM) or killed (``kill -9``) while two members of a group
are idle at the end of their partitions, then started on the same data. The coordinator rebuilds
the group by replaying ``__consumer_offsets``: the committed offsets read back equal, the group
holds the same members (member ids) with the same assignment, and the members, which only
reconnect (kafkajs restarts its consumer and joins anew), go on to process new records with the
same delivery rule.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ..broker_process import BrokerProcess
from .group_worker import SESSION_TIMEOUT_MS
from .kafka_ops import TP, committed, describe, end_offsets, fresh_topic, produce
from .ledger import all_committed, check_processing, expected_positions
from .workers import CLIENTS, WAIT_S, Group

pytestmark = pytest.mark.integration

PARTITIONS = 4


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "kill-9"])
@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_and_group_survive_a_broker_restart(
    make_group_broker: Callable[[], BrokerProcess], client: str, hard: bool, tmp_path: Path
) -> None:
    broker = make_group_broker()
    bootstrap = broker.bootstrap
    topic, group_id, everything = fresh_topic(bootstrap, f"restart-{client}", PARTITIONS, 2_000)
    with Group(bootstrap, group_id, tmp_path) as group:
        ledger = group.ledger
        members = ["m1", "m2"]
        for member in members:
            group.start(member, client, topics=[topic])
        first = end_offsets(topic, PARTITIONS, 2_000)
        ledger.wait_until(lambda lg: lg.covers(members, everything) and
                          lg.unique >= expected_positions(first) and all_committed(first)(lg),
                          WAIT_S, "two members to process and commit the first 2,000 records")
        offsets_before = committed(bootstrap, group_id, everything)
        assert offsets_before == first
        # A member may rejoin right after its first assignment (kafka-python's leader does
        # when its metadata snapshot changed): wait for the group to settle, with a deadline.
        members_before = _stable_group(bootstrap, group_id, 2)

        stopped_at = time.monotonic()
        code = broker.restart(hard=hard)
        away_ms = (time.monotonic() - stopped_at) * 1000
        assert code == (-9 if hard else 0), f"broker stop exit code {code}"

        assert committed(bootstrap, group_id, everything) == offsets_before
        # The members restored from the log: all of them, with their assignment if no member
        # has rejoined yet. (A kafkajs consumer that lost its broker restarts itself and joins
        # as a new member, which starts a rebalance: then the old members are still listed,
        # without assignment, until they rejoin or their sessions expire.)
        state_after, members_after = describe(bootstrap, group_id)
        assert set(members_before) <= set(members_after), (
            f"members before the restart {sorted(members_before)}, after {sorted(members_after)}"
        )
        # librdkafka-based clients also time their session out themselves: a coordinator away
        # for about a session timeout (a slow restart on a loaded machine) makes them rejoin as
        # new members, which starts a rebalance too.
        client_session_expired = away_ms >= SESSION_TIMEOUT_MS - 1000
        if state_after == "STABLE":
            assert members_after == members_before
        else:
            assert state_after == "PREPARING_REBALANCING" and (
                client == "kafkajs" or client_session_expired), (state_after, away_ms)
        produce(bootstrap, topic, PARTITIONS, 2_000, start=2_000)
        ends = end_offsets(topic, PARTITIONS, 4_000)
        group.wait_processed(ends, "the members to process the records produced after the restart")
        check_processing(ledger, ends)
        assert committed(bootstrap, group_id, ends) == ends
        for member in members:
            group.members[member].stop()


def _stable_group(bootstrap: str, group_id: str, size: int) -> dict[str, set[TP]]:
    """The group's members and assignment once it is STABLE with ``size`` members and every
    member holds partitions (WAIT_S at most)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        state, members = describe(bootstrap, group_id)
        if state == "STABLE" and len(members) == size and all(members.values()):
            return members
        assert time.monotonic() < deadline, (state, members)
        time.sleep(0.1)
