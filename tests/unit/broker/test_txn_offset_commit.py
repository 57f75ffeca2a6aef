"""TxnOffsetCommit v0-v5: transactional offsets pending until the marker, OffsetFetch
require_stable, WriteTxnMarkers on __consumer_offsets completing them, and replay."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.coordinator_partition import partition_for
from strata.broker.group.classic_group import OffsetAndMetadata
from strata.broker.group.transactional_offsets import (
    PendingTransactionalOffsets,
    apply_committed_transaction,
)
from strata.broker.handlers import offset_fetch, txn_offset_commit, write_txn_markers
from strata.broker.handlers.write_txn_markers import OFFSETS_TOPIC
from strata.protocol import ApiKey, encode_response
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock

from .helpers import add_topics, context, group_broker_state, request, restarted_group_broker_state
from .test_group_handlers import call

# The markers are written by hand with no transaction coordinator behind "tx", so the KIP-890
# check that asks the coordinator first is off here (tests/integration/transactions test it).
CONFIG = {"offsets_topic_num_partitions": "5", "transaction_partition_verification_enable": "false"}
PID, EPOCH = 7000, 3
HANDLERS: dict[int, Any] = {ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit,
                            ApiKey.OFFSET_FETCH: offset_fetch,
                            ApiKey.WRITE_TXN_MARKERS: write_txn_markers}


async def _call(state: BrokerState, api_key: int, version: int, **fields: Any) -> Any:
    ctx = context(state, api_key, version)
    response = await HANDLERS[api_key].handle(ctx, request(api_key, version, **fields))
    encode_response(ctx.header, response)
    return response


@pytest.fixture
async def state(tmp_path: Path) -> AsyncIterator[BrokerState]:
    state = group_broker_state(tmp_path, ManualClock(), **CONFIG)
    await add_topics(state, ("t", 2))
    await state.group_coordinator.startup(run_timers=False)
    assert (await call(state, ApiKey.FIND_COORDINATOR, 2, key="g",
                       key_type=0)).error_code == ErrorCode.none
    yield state
    await state.group_coordinator.shutdown()


async def _txn_commit(state: BrokerState, version: int, offset: int, **extra: Any
                      ) -> list[int]:
    response = await _call(state, ApiKey.TXN_OFFSET_COMMIT, version, transactional_id="tx",
                           group_id="g", producer_id=PID, producer_epoch=EPOCH, topics=[
                               {"name": "t", "partitions": [
                                   {"partition_index": 0, "committed_offset": offset,
                                    "committed_leader_epoch": -1, "committed_metadata": "m"},
                                   {"partition_index": 9, "committed_offset": 1,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": None}]}], **extra)
    return [p.error_code for t in response.topics for p in t.partitions]


async def _fetch(state: BrokerState, *, stable: bool) -> tuple[int, int]:
    response = await _call(state, ApiKey.OFFSET_FETCH, 7, group_id="g", require_stable=stable,
                           topics=[{"name": "t", "partition_indexes": [0]}])
    (p,) = response.topics[0].partitions
    return p.error_code, p.committed_offset


async def _marker(state: BrokerState, commit: bool) -> list[int]:
    response = await _call(state, ApiKey.WRITE_TXN_MARKERS, 1, markers=[{
        "producer_id": PID, "producer_epoch": EPOCH, "transaction_result": commit,
        "coordinator_epoch": 0, "topics": [{"name": OFFSETS_TOPIC, "partition_indexes": [
            partition_for("g", 5)]}]}])
    return [p.error_code for m in response.markers for t in m.topics for p in t.partitions]


@pytest.mark.parametrize("version", range(6))
async def test_pending_until_commit_marker(state: BrokerState, version: int) -> None:
    assert await _txn_commit(state, version, 42) == [0, ErrorCode.unknown_topic_or_partition]
    assert await _fetch(state, stable=True) == (ErrorCode.unstable_offset_commit, -1)
    assert await _fetch(state, stable=False) == (0, -1)
    assert await _marker(state, True) == [0]
    assert await _fetch(state, stable=True) == (0, 42)


async def test_abort_marker_drops_them(state: BrokerState) -> None:
    assert await _txn_commit(state, 3, 42) == [0, 3]
    assert await _marker(state, False) == [0]
    assert await _fetch(state, stable=True) == (0, -1)


async def test_member_checks_from_v3(state: BrokerState) -> None:
    # the group exists (Empty) once a commit created it; a member id it does not know
    assert await _txn_commit(state, 3, 1, member_id="nobody", generation_id=4) == [
        ErrorCode.unknown_member_id, 3]
    # v2 carries no member data: accepted
    assert await _txn_commit(state, 2, 1) == [0, 3]


async def test_older_producer_epoch_is_refused(state: BrokerState) -> None:
    assert await _txn_commit(state, 3, 1) == [0, 3]
    response = await _call(state, ApiKey.TXN_OFFSET_COMMIT, 3, transactional_id="tx",
                           group_id="g", producer_id=PID, producer_epoch=EPOCH - 1,
                           topics=[{"name": "t", "partitions": [
                               {"partition_index": 0, "committed_offset": 5,
                                "committed_leader_epoch": -1, "committed_metadata": ""}]}])
    assert response.topics[0].partitions[0].error_code == ErrorCode.invalid_producer_epoch


async def test_replay_rebuilds_pending_and_applies_completed(state: BrokerState,
                                                             tmp_path: Path) -> None:
    assert await _txn_commit(state, 3, 10) == [0, 3]
    assert await _marker(state, True) == [0]
    assert await _txn_commit(state, 3, 20) == [0, 3]  # the next transaction, still open
    await state.group_coordinator.shutdown()
    again = restarted_group_broker_state(state, tmp_path, **CONFIG)
    await again.group_coordinator.startup(run_timers=False)
    await again.group_coordinator.wait_loaded()
    try:
        assert await _fetch(again, stable=False) == (0, 10)
        assert await _fetch(again, stable=True) == (ErrorCode.unstable_offset_commit, -1)
        assert await _marker(again, True) == [0]
        assert await _fetch(again, stable=True) == (0, 20)
    finally:
        await again.group_coordinator.shutdown()


def test_pending_offsets_complete_per_partition() -> None:
    pending = PendingTransactionalOffsets()
    offset = OffsetAndMetadata(5, -1, "", 0, None)
    pending.add(1, "a", {("t", 0): offset})
    pending.add(1, "b", {("t", 0): offset})
    assert pending.has_pending("a", ("t", 0)) and not pending.has_pending("a", ("t", 1))
    assert pending.complete(1, lambda g: g == "a") == {"a": {("t", 0): offset}}
    assert not pending.has_pending("a", ("t", 0)) and pending.has_pending("b", ("t", 0))
    pending.remove_groups(["b"])
    assert pending.producers() == []


async def test_a_group_with_only_pending_offsets_survives_cleanup(state: BrokerState) -> None:
    assert await _txn_commit(state, 3, 42) == [0, 3]
    state.group_coordinator.cleanup_group_metadata()
    assert state.group_coordinator.group("g") is not None
    assert await _marker(state, True) == [0]
    assert await _fetch(state, stable=True) == (0, 42)


async def _plain_commit(state: BrokerState, offset: int) -> None:
    response = await call(state, ApiKey.OFFSET_COMMIT, 8, group_id="g",
                          generation_id_or_member_epoch=-1, member_id="",
                          group_instance_id=None, topics=[{"name": "t", "partitions": [
                              {"partition_index": 0, "committed_offset": offset,
                               "committed_leader_epoch": -1, "committed_metadata": ""}]}])
    assert [p.error_code for t in response.topics for p in t.partitions] == [0]


@pytest.mark.parametrize("restart", [False, True])
async def test_a_plain_commit_after_the_transactional_one_wins_at_commit(
        state: BrokerState, tmp_path: Path, restart: bool) -> None:
    # Kafka's rule: the record later in __consumer_offsets wins, whatever the order of the
    # marker; a reloading coordinator (replay) decides the same.
    assert await _txn_commit(state, 3, 5) == [0, 3]
    await _plain_commit(state, 9)
    assert await _marker(state, True) == [0]
    assert await _fetch(state, stable=True) == (0, 9)
    await _plain_commit(state, 11)
    assert await _txn_commit(state, 3, 7) == [0, 3]  # this time the transaction is later
    assert await _marker(state, True) == [0]
    if not restart:
        assert await _fetch(state, stable=True) == (0, 7)
        return
    await state.group_coordinator.shutdown()
    again = restarted_group_broker_state(state, tmp_path, **CONFIG)
    await again.group_coordinator.startup(run_timers=False)
    await again.group_coordinator.wait_loaded()
    try:
        assert await _fetch(again, stable=True) == (0, 7)
    finally:
        await again.group_coordinator.shutdown()


def test_a_committed_transaction_keeps_a_later_plain_commit() -> None:
    committed = {("t", 0): OffsetAndMetadata(9, record_offset=20),
                 ("t", 1): OffsetAndMetadata(3, record_offset=4)}
    apply_committed_transaction(committed, {("t", 0): OffsetAndMetadata(5, record_offset=10),
                                            ("t", 1): OffsetAndMetadata(6, record_offset=10),
                                            ("t", 2): OffsetAndMetadata(1, record_offset=10)})
    assert {tp: o.offset for tp, o in committed.items()} == {
        ("t", 0): 9, ("t", 1): 6, ("t", 2): 1}
