"""The synchronous producer id reserve between the coordinator and ``ProducerIdManager``."""

from __future__ import annotations

import pytest

from strata.broker.transaction.producer_id_reserve import ProducerIdReserve
from strata.broker.transaction.transaction_config import TransactionConfig
from strata.broker.transaction.transaction_coordinator import TransactionCoordinator
from strata.broker.transaction.transaction_decision import Answer, ProducerIdUnavailableError
from strata.broker.transaction.transaction_state_manager import TransactionStateManager
from strata.protocol.error_codes import ErrorCode


def test_ids_come_out_in_order_once_and_the_shell_tops_up() -> None:
    reserve = ProducerIdReserve(target=3)
    assert reserve.missing == 3
    reserve.refill([10, 11])
    assert (reserve(), reserve.take(), len(reserve), reserve.missing) == (10, 11, 0, 3)
    with pytest.raises(ProducerIdUnavailableError):
        reserve.take()
    with pytest.raises(ValueError):
        ProducerIdReserve(target=0)


def test_an_empty_reserve_is_a_retriable_answer() -> None:
    reserve = ProducerIdReserve()
    manager = TransactionStateManager(TransactionConfig(num_partitions=1))
    manager.begin_loading(0, 1)
    manager.complete_loading(0, 1, {}, 0)
    coordinator = TransactionCoordinator(manager, reserve)
    assert coordinator.handle_init_producer_id("t", 1000, None, 0) == Answer(
        ErrorCode.coordinator_load_in_progress)
    reserve.refill([77])
    decision = coordinator.handle_init_producer_id("t", 1000, None, 0)
    assert not isinstance(decision, Answer) and decision.transit.producer_id == 77
