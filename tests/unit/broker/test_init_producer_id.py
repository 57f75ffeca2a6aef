"""InitProducerId v0-v1 (idempotent producers) and ProducerIdManager (persisted blocks)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from strata.broker.handlers.init_producer_id import handle
from strata.broker.producer_id_manager import FILE_NAME, ProducerIdManager
from strata.protocol import ApiKey, encode_response

from .helpers import broker_state, context, request


@pytest.mark.parametrize("version", [0, 1])
async def test_idempotent_producers_get_new_ids(tmp_path: Path, version: int) -> None:
    state = broker_state(tmp_path)
    ctx = context(state, ApiKey.INIT_PRODUCER_ID, version)
    ids = []
    for _ in range(3):
        req = request(ApiKey.INIT_PRODUCER_ID, version, transactional_id=None,
                      transaction_timeout_ms=60000)
        response = await handle(ctx, req)
        encode_response(ctx.header, response)
        assert (response.error_code, response.producer_epoch) == (0, 0)
        ids.append(response.producer_id)
    assert ids == sorted(set(ids)) and ids[0] >= 0


async def test_transactional_ids_need_their_coordinator(tmp_path: Path) -> None:
    """Without the transaction coordinator leading the id's partition: NOT_COORDINATOR (the
    client asks FindCoordinator again); an empty id is INVALID_REQUEST. The coordinator's
    answers: ``tests/unit/broker/transaction/test_transaction_runtime.py``."""
    state = broker_state(tmp_path)
    ctx = context(state, ApiKey.INIT_PRODUCER_ID, 1)
    for tid, code in (("orders-tx", 16), ("", 42)):
        req = request(ApiKey.INIT_PRODUCER_ID, 1, transactional_id=tid,
                      transaction_timeout_ms=60000)
        response = await handle(ctx, req)
        assert (response.error_code, response.producer_id, response.producer_epoch) == (
            code, -1, -1)


async def test_blocks_are_persisted_and_never_reused(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path, block_size=10)
    ids = [await manager.generate_producer_id() for _ in range(12)]
    assert ids == list(range(12))
    assert json.loads((tmp_path / FILE_NAME).read_text()) == {"version": 1,
                                                                "next_block_start": 20}
    restarted = ProducerIdManager(tmp_path, block_size=10)
    assert await restarted.generate_producer_id() == 20  # the rest of the old block is skipped
    assert restarted.generate_producer_id_blocking() == 21


async def test_concurrent_callers_share_one_allocation(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path, block_size=5)
    ids = await asyncio.gather(*(manager.generate_producer_id() for _ in range(12)))
    assert sorted(ids) == list(range(12))
    assert json.loads((tmp_path / FILE_NAME).read_text())["next_block_start"] == 15


def test_rejects_unknown_formats(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text('{"version": 9, "next_block_start": 1}')
    with pytest.raises(ValueError, match="format version"):
        ProducerIdManager(tmp_path).generate_producer_id_blocking()
