"""The transaction coordinator's shell on real logs and a ``ManualClock``: the handlers over the
wire path, ``__transaction_state`` appends, markers in the partitions, timeouts, a reload that
finishes a prepared transaction, and marker retries towards another leader.

Timers and the marker sender are driven by hand: ``tick()`` after moving the clock,
``sender.pump()`` for one round of WriteTxnMarkers, ``settle()`` for the completion writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.transaction import transaction_runtime
from strata.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from strata.broker.transaction.transaction_markers import MarkerRequest
from strata.broker.transaction.transaction_metadata import TransactionMetadata
from strata.broker.transaction.transaction_runtime import TransactionRuntime
from strata.broker.transaction.transaction_state import TransactionState
from strata.client.broker_client import BrokerUnavailableError
from strata.protocol import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.security.acl import AclOperation, ResourceType
from strata.storage import record_batch as rb
from strata.storage.clock import ManualClock

from ..group_wire import round_trip
from ..helpers import add_topics, group_broker_state, restarted_group_broker_state

TID = "tx-1"
SETTINGS = {"transaction_state_log_num_partitions": "3",
            "transaction_abort_timed_out_transaction_cleanup_interval_ms": "1000"}


@asynccontextmanager
async def coordinator(tmp_path: Path, state: BrokerState | None = None
                      ) -> AsyncIterator[BrokerState]:
    """A broker whose transaction coordinator leads every ``__transaction_state`` partition
    (created by a FindCoordinator), topic ``t`` with 2 partitions; no timer task."""
    if state is None:
        state = group_broker_state(tmp_path, ManualClock(), **SETTINGS)
        await add_topics(state, ("t", 2))
    await state.group_coordinator.startup(run_timers=False)
    await state.transaction_coordinator.startup(run_timers=False)
    found = await round_trip(state, ApiKey.FIND_COORDINATOR, 3, {"key": TID, "key_type": 1})
    assert (found.error_code, found.node_id) == (ErrorCode.none, state.node_id)
    await state.transaction_coordinator.wait_loaded()
    try:
        yield state
    finally:
        await state.transaction_coordinator.shutdown()
        await state.group_coordinator.shutdown()


def runtime(state: BrokerState) -> TransactionRuntime:
    return state.transaction_coordinator


def metadata(state: BrokerState, tid: str = TID) -> TransactionMetadata:
    found = runtime(state).state_manager.get_transaction_state(tid)
    assert found is not None and not isinstance(found, ErrorCode)
    return found.transaction_metadata


async def init(state: BrokerState, tid: str = TID, version: int = 4,
               timeout_ms: int = 60_000) -> Any:
    return await round_trip(state, ApiKey.INIT_PRODUCER_ID, version, {
        "transactional_id": tid, "transaction_timeout_ms": timeout_ms, "producer_id": -1,
        "producer_epoch": -1})


async def add(state: BrokerState, pid: int, epoch: int, *partitions: int,
              version: int = 3, topic: str = "t") -> list[tuple[str, int, int]]:
    answer = await round_trip(state, ApiKey.ADD_PARTITIONS_TO_TXN, version, {
        "v3_and_below_transactional_id": TID, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": list(partitions)}]})
    return [(t.name, p.partition_index, p.partition_error_code)
            for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition]


async def end(state: BrokerState, pid: int, epoch: int, commit: bool, version: int = 4) -> Any:
    return await round_trip(state, ApiKey.END_TXN, version, {
        "transactional_id": TID, "producer_id": pid, "producer_epoch": epoch,
        "committed": commit})


def control_batches(state: BrokerState, topic: str, index: int) -> list[tuple[int, int]]:
    """(producer id, producer epoch) of each control batch of a partition."""
    hosted = state.replica_manager.get_partition(topic, index)
    assert hosted is not None
    log = hosted.log
    data = log.read(log.log_start_offset, 1 << 20, log.log_end_offset, True).read_bytes()
    found, pos = [], 0
    while len(data) - pos >= rb.HEADER_SIZE:
        header = rb.parse_header(data, pos)
        if header.is_control:
            found.append((header.producer_id, header.producer_epoch))
        pos += header.size
    return found


async def test_commit_writes_markers_then_completes(tmp_path: Path) -> None:
    async with coordinator(tmp_path) as state:
        answer = await init(state)
        assert answer.error_code == ErrorCode.none
        pid, epoch = answer.producer_id, answer.producer_epoch
        assert await add(state, pid, epoch, 0, 1) == [("t", 0, 0), ("t", 1, 0)]
        assert metadata(state).state is TransactionState.ONGOING
        assert (await end(state, pid, epoch, commit=True)).error_code == ErrorCode.none
        assert metadata(state).state is TransactionState.PREPARE_COMMIT
        await runtime(state).sender.pump()
        await runtime(state).settle()
        assert metadata(state).state is TransactionState.COMPLETE_COMMIT
        assert control_batches(state, "t", 0) == control_batches(state, "t", 1) == [(pid, epoch)]
        # A retried EndTxn of the completed transaction is answered NONE.
        assert (await end(state, pid, epoch, commit=True)).error_code == ErrorCode.none
        # Every transition is in the log: Empty, Ongoing, PrepareCommit, CompleteCommit.
        index = runtime(state).partition_for(TID)
        hosted = state.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, index)
        assert hosted is not None and hosted.log.log_end_offset == 4


async def test_a_second_init_fences_the_first_producer(tmp_path: Path) -> None:
    async with coordinator(tmp_path) as state:
        first = await init(state)
        assert await add(state, first.producer_id, first.producer_epoch, 0) == [("t", 0, 0)]
        # The open transaction is fenced and aborted; the new producer retries.
        retry = await init(state)
        assert retry.error_code == ErrorCode.concurrent_transactions
        await runtime(state).sender.pump()
        await runtime(state).settle()
        assert metadata(state).state is TransactionState.COMPLETE_ABORT
        second = await init(state)
        assert second.error_code == ErrorCode.none
        assert (second.producer_id, second.producer_epoch) == (
            first.producer_id, first.producer_epoch + 2)
        # The zombie: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before.
        assert await add(state, first.producer_id, first.producer_epoch, 1) == [
            ("t", 1, ErrorCode.producer_fenced)]
        assert await add(state, first.producer_id, first.producer_epoch, 1, version=1) == [
            ("t", 1, ErrorCode.invalid_producer_epoch)]
        assert (await end(state, first.producer_id, first.producer_epoch, commit=True)
                ).error_code == ErrorCode.producer_fenced


async def test_a_timed_out_transaction_is_aborted(tmp_path: Path) -> None:
    async with coordinator(tmp_path) as state:
        clock = state.clock
        assert isinstance(clock, ManualClock)
        answer = await init(state, timeout_ms=5_000)
        pid, epoch = answer.producer_id, answer.producer_epoch
        await add(state, pid, epoch, 0)
        clock.advance(4_000)
        await runtime(state).tick()
        assert metadata(state).state is TransactionState.ONGOING
        clock.advance(2_000)
        await runtime(state).tick()
        assert metadata(state).state is TransactionState.PREPARE_ABORT
        await runtime(state).sender.pump()
        await runtime(state).settle()
        assert metadata(state).state is TransactionState.COMPLETE_ABORT
        assert control_batches(state, "t", 0) == [(pid, epoch + 1)]  # fenced: epoch bumped
        assert (await end(state, pid, epoch, commit=True)).error_code == (
            ErrorCode.producer_fenced)


async def test_a_reload_finishes_a_prepared_transaction(tmp_path: Path) -> None:
    async with coordinator(tmp_path) as state:
        answer = await init(state)
        pid, epoch = answer.producer_id, answer.producer_epoch
        await add(state, pid, epoch, 0, 1)
        assert (await end(state, pid, epoch, commit=False)).error_code == ErrorCode.none
        assert metadata(state).state is TransactionState.PREPARE_ABORT  # no marker sent yet
    restarted = restarted_group_broker_state(state, tmp_path, **SETTINGS)
    async with coordinator(tmp_path, restarted) as state:
        assert metadata(state).state is TransactionState.PREPARE_ABORT
        assert runtime(state).sender.book.waiting_partitions(TID) == {("t", 0), ("t", 1)}
        await runtime(state).sender.pump()
        await runtime(state).settle()
        assert metadata(state).state is TransactionState.COMPLETE_ABORT
        assert control_batches(state, "t", 0) == [(pid, epoch)]


async def test_markers_to_another_leader_are_retried_until_acknowledged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with coordinator(tmp_path) as state:
        sender = runtime(state).sender
        sender.leader_lookup = lambda topic, index: 2 if topic == "t" else state.node_id
        answers: list[Any] = [BrokerUnavailableError("down"),
                              {ErrorCode.not_leader_or_follower}, {ErrorCode.none}]
        sent: list[MarkerRequest] = []

        async def send_remote(request: MarkerRequest) -> dict[int, dict[tuple[str, int], int]]:
            sent.append(request)
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            (error,) = answer
            return {e.producer_id: dict.fromkeys(e.partitions, error) for e in request.entries}

        monkeypatch.setattr(sender, "_send_remote", send_remote)
        answer = await init(state)
        await add(state, answer.producer_id, answer.producer_epoch, 0)
        await end(state, answer.producer_id, answer.producer_epoch, commit=True)
        for _ in range(3):
            assert metadata(state).state is TransactionState.PREPARE_COMMIT
            await sender.pump()
        await runtime(state).settle()
        assert [r.node_id for r in sent] == [2, 2, 2]
        assert metadata(state).state is TransactionState.COMPLETE_COMMIT
        assert control_batches(state, "t", 0) == []  # written by broker 2, not here


async def test_add_partitions_checks_topics_first(tmp_path: Path) -> None:
    async with coordinator(tmp_path) as state:
        answer = await init(state)
        pid, epoch = answer.producer_id, answer.producer_epoch
        assert await add(state, pid, epoch, 0, 7) == [
            ("t", 0, ErrorCode.operation_not_attempted),
            ("t", 7, ErrorCode.unknown_topic_or_partition)]
        assert metadata(state).state is TransactionState.EMPTY
        assert await add(state, pid + 1, epoch, 0) == [
            ("t", 0, ErrorCode.invalid_producer_id_mapping)]


@pytest.mark.parametrize("version", [4, 5])
async def test_batched_add_partitions_verifies_for_brokers(tmp_path: Path,
                                                           version: int) -> None:
    async with coordinator(tmp_path) as state:
        answer = await init(state)
        pid, epoch = answer.producer_id, answer.producer_epoch
        await add(state, pid, epoch, 0)
        verified = await round_trip(state, ApiKey.ADD_PARTITIONS_TO_TXN, version, {
            "transactions": [{"transactional_id": TID, "producer_id": pid,
                              "producer_epoch": epoch, "verify_only": True,
                              "topics": [{"name": "t", "partitions": [0, 1]}]}]})
        assert verified.error_code == ErrorCode.none
        (txn,) = verified.results_by_transaction
        assert [(p.partition_index, p.partition_error_code)
                for t in txn.topic_results for p in t.results_by_partition] == [
            (0, ErrorCode.none), (1, ErrorCode.transaction_abortable)]


async def test_describe_and_list_transactions(tmp_path: Path) -> None:
    async with coordinator(tmp_path) as state:
        answer = await init(state)
        await add(state, answer.producer_id, answer.producer_epoch, 1)
        described = await round_trip(state, ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                     {"transactional_ids": [TID, "unknown"]})
        known, unknown = described.transaction_states
        assert (known.error_code, known.transaction_state, known.producer_id) == (
            ErrorCode.none, "Ongoing", answer.producer_id)
        assert [(t.topic, tuple(t.partitions)) for t in known.topics] == [("t", (1,))]
        assert unknown.error_code == ErrorCode.transactional_id_not_found
        for version in (0, 1, 2):
            listed = await round_trip(state, ApiKey.LIST_TRANSACTIONS, version, {
                "state_filters": ["Ongoing", "Nope"], "producer_id_filters": [],
                "duration_filter": -1, "transactional_id_pattern": None})
            assert listed.error_code == ErrorCode.none
            assert tuple(listed.unknown_state_filters) == ("Nope",)
            assert [(t.transactional_id, t.transaction_state)
                    for t in listed.transaction_states] == [(TID, "Ongoing")]
        empty = await round_trip(state, ApiKey.LIST_TRANSACTIONS, 0, {
            "state_filters": [], "producer_id_filters": [answer.producer_id + 1]})
        assert empty.transaction_states == ()


async def test_add_offsets_adds_the_groups_offsets_partition(tmp_path: Path) -> None:
    async with coordinator(tmp_path) as state:
        answer = await init(state)
        for version in (0, 4):
            added = await round_trip(state, ApiKey.ADD_OFFSETS_TO_TXN, version, {
                "transactional_id": TID, "producer_id": answer.producer_id,
                "producer_epoch": answer.producer_epoch, "group_id": "g"})
            assert added.error_code == ErrorCode.none
        partition = state.group_coordinator.partition_for("g")
        assert metadata(state).topic_partitions == {("__consumer_offsets", partition)}


async def test_an_id_this_broker_does_not_coordinate(tmp_path: Path) -> None:
    state = group_broker_state(tmp_path, ManualClock(), **SETTINGS)
    response = await init(state)  # the coordinator is not started
    assert response.error_code == ErrorCode.not_coordinator


class _Rules:
    """An authorizer allowing everything but what ``denied`` names: (operation, resource)."""

    def __init__(self, *denied: tuple[AclOperation, ResourceType]) -> None:
        self.denied = set(denied)

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        return (operation, resource_type) not in self.denied


async def test_transactional_ids_are_authorized_as_kafka_does(tmp_path: Path) -> None:
    async with coordinator(tmp_path) as state:
        answer = await init(state)
        pid, epoch = answer.producer_id, answer.producer_epoch
        write = (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID)
        state.authorizer = _Rules(write)  # type: ignore[assignment]  # a stand-in authorizer
        failed = ErrorCode.transactional_id_authorization_failed
        assert (await init(state)).error_code == failed
        assert await add(state, pid, epoch, 0) == [("t", 0, failed)]
        assert (await end(state, pid, epoch, commit=True)).error_code == failed
        offsets = await round_trip(state, ApiKey.ADD_OFFSETS_TO_TXN, 3, {
            "transactional_id": TID, "producer_id": pid, "producer_epoch": epoch,
            "group_id": "g"})
        assert offsets.error_code == failed
        state.authorizer = _Rules(  # type: ignore[assignment]
            (AclOperation.WRITE, ResourceType.TOPIC), (AclOperation.READ, ResourceType.GROUP))
        assert await add(state, pid, epoch, 0) == [("t", 0, ErrorCode.topic_authorization_failed)]
        offsets = await round_trip(state, ApiKey.ADD_OFFSETS_TO_TXN, 3, {
            "transactional_id": TID, "producer_id": pid, "producer_epoch": epoch,
            "group_id": "g"})
        assert offsets.error_code == ErrorCode.group_authorization_failed
        batched = await round_trip(state, ApiKey.ADD_PARTITIONS_TO_TXN, 5, {"transactions": []})
        assert batched.error_code == ErrorCode.none
        state.authorizer = _Rules(  # type: ignore[assignment]
            (AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID),
            (AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER))
        found = await round_trip(state, ApiKey.FIND_COORDINATOR, 3, {"key": TID, "key_type": 1})
        assert found.error_code == failed
        (described,) = (await round_trip(state, ApiKey.DESCRIBE_TRANSACTIONS, 0, {
            "transactional_ids": [TID]})).transaction_states
        assert described.error_code == failed
        listed = await round_trip(state, ApiKey.LIST_TRANSACTIONS, 0, {
            "state_filters": [], "producer_id_filters": []})
        assert listed.transaction_states == ()
        batched = await round_trip(state, ApiKey.ADD_PARTITIONS_TO_TXN, 5, {"transactions": []})
        assert batched.error_code == ErrorCode.cluster_authorization_failed


async def test_leadership_changes_unload_and_reload_at_the_new_epoch(tmp_path: Path) -> None:
    async with coordinator(tmp_path) as state:
        rt = runtime(state)
        answer = await init(state)
        await add(state, answer.producer_id, answer.producer_epoch, 0)
        index = rt.partition_for(TID)
        record = state.topic_store.get(TRANSACTION_STATE_TOPIC)
        assert record is not None
        # Another broker leads the partition now: its ids are not coordinated here.
        state.replica_manager.make_follower(
            TRANSACTION_STATE_TOPIC, index, record.topic_id, 2, 1, replicas=(1, 2),
            isr=frozenset({1, 2}), partition_epoch=1)
        rt.reconcile()
        assert rt.state_manager.get_transaction_state(TID) == ErrorCode.not_coordinator
        assert (await init(state)).error_code == ErrorCode.not_coordinator
        # Leader again, at a newer epoch: reloaded from the log, the coordinator epoch is 2.
        state.replica_manager.make_leader(TRANSACTION_STATE_TOPIC, index, record.topic_id, 2)
        rt.reconcile()
        await rt.wait_loaded()
        found = rt.state_manager.get_transaction_state(TID)
        assert not isinstance(found, ErrorCode) and found is not None
        assert found.coordinator_epoch == 2
        assert found.transaction_metadata.state is TransactionState.ONGOING
        assert found.transaction_metadata.topic_partitions == {("t", 0)}


async def test_add_partitions_during_completion_waits_for_it_instead_of_refusing(
        tmp_path: Path) -> None:
    async with coordinator(tmp_path) as state:
        answer = await init(state)
        pid, epoch = answer.producer_id, answer.producer_epoch
        await add(state, pid, epoch, 0)
        await end(state, pid, epoch, commit=True)
        assert metadata(state).state is TransactionState.PREPARE_COMMIT
        # The next transaction's AddPartitionsToTxn arrives before the markers are written:
        # it is answered once the completion is logged, not with CONCURRENT_TRANSACTIONS.
        waiting = asyncio.ensure_future(add(state, pid, epoch, 1))
        await asyncio.sleep(0)
        assert not waiting.done()
        await runtime(state).sender.pump()
        await runtime(state).settle()
        assert await asyncio.wait_for(waiting, 5) == [("t", 1, ErrorCode.none)]
        assert metadata(state).state is TransactionState.ONGOING


async def test_a_completion_that_does_not_come_is_answered_concurrent_transactions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transaction_runtime, "CONCURRENT_WAIT_MS", 50)
    async with coordinator(tmp_path) as state:
        answer = await init(state)
        pid, epoch = answer.producer_id, answer.producer_epoch
        await add(state, pid, epoch, 0)
        await end(state, pid, epoch, commit=True)
        # No marker is sent (no pump): the bounded wait ends with Kafka's answer.
        assert await add(state, pid, epoch, 1) == [
            ("t", 1, ErrorCode.concurrent_transactions)]
