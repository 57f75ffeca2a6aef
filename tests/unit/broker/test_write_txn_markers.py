"""WriteTxnMarkers v1-v2: markers appended as the coordinator's, per-partition errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strata.broker.broker_state import BrokerState
from strata.broker.handlers.write_txn_markers import handle
from strata.protocol import ApiKey, encode_response
from strata.storage.record_batch import iter_headers

from .helpers import batch, broker_state, context, request

PID = 4000


def _txn_batch(*values: bytes, epoch: int = 0, sequence: int = 0) -> bytes:
    return batch(*values, producer_id=PID, producer_epoch=epoch, base_sequence=sequence,
                 is_transactional=True)


def _marker(commit: bool, *, epoch: int = 0, coordinator_epoch: int = 0,
            partitions: tuple[tuple[str, int], ...] = (("t", 0),),
            **extra: Any) -> dict[str, Any]:
    topics: dict[str, list[int]] = {}
    for name, index in partitions:
        topics.setdefault(name, []).append(index)
    return {"producer_id": PID, "producer_epoch": epoch, "transaction_result": commit,
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": n, "partition_indexes": i} for n, i in topics.items()], **extra}


async def _write(state: BrokerState, version: int, *markers: dict[str, Any]
                 ) -> list[tuple[str, int, int]]:
    ctx = context(state, ApiKey.WRITE_TXN_MARKERS, version)
    response = await handle(ctx, request(ApiKey.WRITE_TXN_MARKERS, version, markers=markers))
    encode_response(ctx.header, response)
    return [(t.name, p.partition_index, p.error_code)
            for m in response.markers for t in m.topics for p in t.partitions]


@pytest.mark.parametrize("version", [1, 2])
async def test_commit_marker_closes_the_transaction(tmp_path: Path, version: int) -> None:
    state = broker_state(tmp_path, ("t", 2))
    rm = state.replica_manager
    results = await rm.append_records([(("t", 0), _txn_batch(b"a", b"b"))], 1, 1000)
    assert results[0].error_code == 0
    log = rm.get_partition_or_error("t", 0).log
    assert log.last_stable_offset() == 0  # the open transaction holds the LSO
    got = await _write(state, version, _marker(True, partitions=(("t", 0), ("t", 1), ("x", 0))))
    assert got == [("t", 0, 0), ("t", 1, 0), ("x", 0, 3)]
    assert log.log_end_offset == 3 and log.last_stable_offset() == 3
    headers = [h for _, h in iter_headers(log.read(0, 1 << 20).read_bytes())]
    assert headers[-1].is_control and headers[-1].producer_id == PID


async def test_abort_marker_is_indexed(tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1))
    rm = state.replica_manager
    await rm.append_records([(("t", 0), _txn_batch(b"a"))], 1, 1000)
    assert await _write(state, 1, _marker(False)) == [("t", 0, 0)]
    log = rm.get_partition_or_error("t", 0).log
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [(PID, 0)]


async def test_fenced_epochs(tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1))
    rm = state.replica_manager
    await rm.append_records([(("t", 0), _txn_batch(b"a", epoch=2))], 1, 1000)
    # INVALID_PRODUCER_EPOCH: older than the transaction's
    assert await _write(state, 1, _marker(True, epoch=1)) == [("t", 0, 47)]
    assert await _write(state, 1, _marker(True, epoch=2, coordinator_epoch=5)) == [("t", 0, 0)]
    await rm.append_records([(("t", 0), _txn_batch(b"b", epoch=2, sequence=1))], 1, 1000)
    # TRANSACTION_COORDINATOR_FENCED: an older coordinator epoch than the last marker's
    assert await _write(state, 1, _marker(True, epoch=2, coordinator_epoch=4)) == [("t", 0, 52)]


async def test_follower_partition_is_not_leader(tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1))
    partition = state.replica_manager.get_partition_or_error("t", 0)
    partition.make_follower(2, 1, replicas=(1, 2), isr=frozenset({1, 2}), partition_epoch=1)
    assert await _write(state, 1, _marker(True)) == [("t", 0, 6)]


async def test_unknown_transaction_version_is_corrupt_message(tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1))
    assert await _write(state, 2, _marker(True, transaction_version=7)) == [("t", 0, 2)]
    assert state.replica_manager.get_partition_or_error("t", 0).log.log_end_offset == 0


class _DenyAll:
    def authorize(self, *args: Any) -> bool:
        return False


async def test_without_cluster_action_every_partition_is_refused(tmp_path: Path) -> None:
    state = broker_state(tmp_path, ("t", 1))
    state.authorizer = _DenyAll()  # type: ignore[assignment]
    assert await _write(state, 1, _marker(True)) == [("t", 0, 31)]
    assert state.replica_manager.get_partition_or_error("t", 0).log.log_end_offset == 0


async def test_describe_producers_shows_the_ongoing_transaction(tmp_path: Path) -> None:
    from strata.broker.handlers import describe_producers

    state = broker_state(tmp_path, ("t", 1))
    await state.replica_manager.append_records([(("t", 0), batch(b"x"))], 1, 1000)
    await state.replica_manager.append_records([(("t", 0), _txn_batch(b"a"))], 1, 1000)

    async def described() -> list[tuple[int, int, int]]:
        ctx = context(state, ApiKey.DESCRIBE_PRODUCERS, 0)
        response = await describe_producers.handle(ctx, request(
            ApiKey.DESCRIBE_PRODUCERS, 0, topics=[{"name": "t", "partition_indexes": [0]}]))
        encode_response(ctx.header, response)
        return [(p.producer_id, p.coordinator_epoch, p.current_txn_start_offset)
                for p in response.topics[0].partitions[0].active_producers]

    assert await described() == [(PID, -1, 1)]
    assert await _write(state, 1, _marker(True, coordinator_epoch=5)) == [("t", 0, 0)]
    assert await described() == [(PID, 5, -1)]
