"""strata.client.fetch_session_handler: the fetcher's side of KIP-227 — a full fetch opens the
session, incremental fetches send only moved partitions and forget dropped ones, the epoch moves
on per answer, and any error or lost answer falls back to a full fetch naming the old session."""

from __future__ import annotations

import pytest

from strata.client.fetch_codec import FetchPosition
from strata.client.fetch_session_handler import FetchSessionHandler, next_epoch
from strata.protocol.error_codes import ErrorCode


def pos(partition: int, offset: int, epoch: int = 0) -> FetchPosition:
    return FetchPosition("t", partition, epoch, offset, 1 << 20)


def wanted(*positions: FetchPosition) -> dict[tuple[str, int], FetchPosition]:
    return {(p.topic, p.partition): p for p in positions}


def opened(session_id: int = 9) -> FetchSessionHandler:
    handler = FetchSessionHandler()
    request = handler.build(wanted(pos(0, 0), pos(1, 0), pos(2, 0)))
    assert request.full and (request.session_id, request.epoch) == (0, 0)
    assert len(request.to_send) == 3 and not request.forgotten
    assert handler.handle_response(ErrorCode.none, session_id)
    return handler


def test_full_fetch_opens_the_session_at_epoch_1() -> None:
    handler = opened()
    assert (handler.session_id, handler.epoch) == (9, 1)


def test_incremental_sends_what_moved_and_forgets_what_is_gone() -> None:
    handler = opened()
    request = handler.build(wanted(pos(0, 5), pos(1, 0), pos(3, 0)))
    assert not request.full and (request.session_id, request.epoch) == (9, 1)
    assert list(request.to_send) == [pos(0, 5), pos(3, 0)]  # 0 moved, 3 is new; 1 unchanged
    assert list(request.forgotten) == [("t", 2)]
    assert handler.handle_response(ErrorCode.none, 9)
    assert handler.epoch == 2
    idle = handler.build(wanted(pos(0, 5), pos(1, 0), pos(3, 0)))
    assert not idle.to_send and not idle.forgotten and idle.epoch == 2
    moved_epoch = handler.build(wanted(pos(0, 5, epoch=1), pos(1, 0), pos(3, 0)))
    assert list(moved_epoch.to_send) == [pos(0, 5, epoch=1)]  # a new leader epoch is news


def test_a_session_error_falls_back_to_a_full_fetch_closing_the_old_session() -> None:
    handler = opened()
    handler.build(wanted(pos(0, 5)))
    assert not handler.handle_response(ErrorCode.invalid_fetch_session_epoch, 0)
    request = handler.build(wanted(pos(0, 5), pos(1, 0)))
    assert request.full and (request.session_id, request.epoch) == (9, 0)
    assert list(request.to_send) == [pos(0, 5), pos(1, 0)]
    assert handler.handle_response(ErrorCode.none, 10)
    assert (handler.session_id, handler.epoch) == (10, 1)


def test_no_answer_falls_back_to_a_full_fetch() -> None:
    handler = opened()
    handler.build(wanted(pos(0, 5)))
    handler.handle_error()
    request = handler.build(wanted(pos(0, 5)))
    assert request.full and request.epoch == 0


def test_a_broker_keeping_no_session_gets_full_fetches() -> None:
    handler = FetchSessionHandler()
    handler.build(wanted(pos(0, 0)))
    assert handler.handle_response(ErrorCode.none, 0)
    request = handler.build(wanted(pos(0, 0)))
    assert request.full and (request.session_id, request.epoch) == (0, 0)


def test_epochs_wrap_to_1() -> None:
    assert next_epoch(0) == 1 and next_epoch(41) == 42 and next_epoch(0x7FFFFFFF) == 1


def test_build_changes_sends_what_moved_among_the_changes_and_keeps_the_rest() -> None:
    handler = opened()
    request = handler.build_changes(wanted(pos(0, 5), pos(2, 0)))  # 2 did not move after all
    assert not request.full and (request.session_id, request.epoch) == (9, 1)
    assert list(request.to_send) == [pos(0, 5)] and not request.forgotten
    assert handler.handle_response(ErrorCode.none, 9)
    assert handler.sent == wanted(pos(0, 5), pos(1, 0), pos(2, 0))  # updated, nothing dropped
    # The same as ``build`` of every position would have asked next.
    assert list(handler.build_changes({}).to_send) == []
    assert handler.handle_response(ErrorCode.none, 9) and handler.epoch == 3
    assert list(handler.build(wanted(pos(0, 5), pos(1, 0), pos(2, 0))).to_send) == []


def test_build_changes_needs_an_open_session_and_a_lost_answer_closes_it() -> None:
    handler = FetchSessionHandler()
    assert not handler.incremental
    with pytest.raises(ValueError, match="open session"):
        handler.build_changes(wanted(pos(0, 1)))
    handler = opened()
    assert handler.incremental
    handler.build_changes(wanted(pos(0, 7)))
    handler.handle_error()
    assert not handler.incremental and handler.sent == {}
