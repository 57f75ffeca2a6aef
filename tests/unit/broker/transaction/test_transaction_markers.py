"""Marker bookkeeping: requests grouped by leader, retries, cancellation, completion."""

from __future__ import annotations

import pytest

from strata.broker.transaction.transaction_markers import (
    MarkerOutcome,
    MarkerRequest,
    PendingCompleteTxn,
    TransactionMarkerBook,
    TxnMarkerEntry,
    build_write_txn_markers_request,
    classify_marker_error,
    partition_errors,
)
from strata.broker.transaction.transaction_metadata import TxnTransitMetadata
from strata.broker.transaction.transaction_state import TransactionResult, TransactionState
from strata.broker.transaction.transaction_version import TransactionVersion
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response, decode_request_body, encode_body

COMPLETE = TxnTransitMetadata(5, 5, -1, 2, -1, 60_000, TransactionState.COMPLETE_COMMIT,
                              frozenset(), 1, 2, TransactionVersion.TV_0)
LEADERS = {("a", 0): 1, ("a", 1): 2, ("b", 0): 1, ("c", 0): -1}


def pending(tid: str = "t1", *partitions: tuple[str, int], pid: int = 5, txn_partition: int = 3,
            coordinator_epoch: int = 7) -> PendingCompleteTxn:
    return PendingCompleteTxn(tid, txn_partition, coordinator_epoch, TransactionResult.COMMIT,
                              pid, 2, frozenset(partitions), COMPLETE)


def leader_of(tp: tuple[str, int]) -> int | None:
    return LEADERS.get(tp)


def response_errors(request: MarkerRequest,
                    errors: dict[tuple[str, int], ErrorCode] | None = None,
                    ) -> dict[int, dict[tuple[str, int], int]]:
    """Every partition of the request NONE unless ``errors`` says otherwise."""
    errors = errors or {}
    out: dict[int, dict[tuple[str, int], int]] = {}
    for entry in request.entries:
        for tp in entry.partitions:
            out.setdefault(entry.producer_id, {})[tp] = errors.get(tp, ErrorCode.none)
    return out


def test_requests_are_grouped_by_leader() -> None:
    book = TransactionMarkerBook()
    assert book.add(pending("t1", ("a", 0), ("a", 1), ("b", 0))) == []
    assert book.add(pending("t2", ("a", 0), pid=6)) == []
    requests, completed = book.build_requests(leader_of)
    assert completed == []
    assert [(r.node_id, [(e.transactional_id, e.partitions) for e in r.entries])
            for r in requests] == [
        (1, [("t1", (("a", 0), ("b", 0))), ("t2", (("a", 0),))]),
        (2, [("t1", (("a", 1),))]),
    ]
    entry = requests[0].entries[0]
    assert (entry.producer_id, entry.producer_epoch, entry.coordinator_epoch, entry.result) == (
        5, 2, 7, TransactionResult.COMMIT)
    # Nothing is sent twice while in flight.
    assert book.build_requests(leader_of) == ([], [])


def test_the_kio_request_carries_kafkas_fields() -> None:
    entries = (TxnMarkerEntry("t1", 5, 2, 7, TransactionResult.ABORT,
                              (("b", 0), ("a", 1), ("a", 0))),)
    request = build_write_txn_markers_request(entries)
    decoded = decode_request_body(ApiKey.WRITE_TXN_MARKERS, 1, encode_body(request), 0)
    (marker,) = decoded.markers
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result,
            marker.coordinator_epoch) == (5, 2, False, 7)
    assert [(t.name, list(t.partition_indexes)) for t in marker.topics] == [
        ("a", [0, 1]), ("b", [0])]
    v2 = build_write_txn_markers_request(
        (TxnMarkerEntry("t", 5, 2, 7, TransactionResult.COMMIT, (("a", 0),),
                        TransactionVersion.TV_2),), version=2)
    assert v2.markers[0].transaction_version == 2


def test_a_response_completes_the_transaction() -> None:
    book = TransactionMarkerBook()
    p = pending("t1", ("a", 0), ("a", 1))
    book.add(p)
    (r1, r2), _ = book.build_requests(leader_of)
    results = book.on_response(r1, response_errors(r1))
    assert results.completed == () and book.waiting_partitions("t1") == {("a", 1)}
    results = book.on_response(r2, response_errors(r2))
    assert results.completed == (p,) and len(book) == 0


def test_partition_errors_of_a_kio_response() -> None:
    response = build_response(ApiKey.WRITE_TXN_MARKERS, 1, markers=[{
        "producer_id": 5, "topics": [{"name": "a", "partitions": [
            {"partition_index": 0, "error_code": 0},
            {"partition_index": 1, "error_code": ErrorCode.not_leader_or_follower}]}]}])
    assert partition_errors(response) == {
        5: {("a", 0): 0, ("a", 1): ErrorCode.not_leader_or_follower}}


@pytest.mark.parametrize(("error", "outcome"), [
    (ErrorCode.none, MarkerOutcome.WRITTEN),
    (ErrorCode.not_leader_or_follower, MarkerOutcome.RETRY),
    (ErrorCode.unknown_topic_or_partition, MarkerOutcome.RETRY),
    (ErrorCode.not_enough_replicas, MarkerOutcome.RETRY),
    (ErrorCode.not_enough_replicas_after_append, MarkerOutcome.RETRY),
    (ErrorCode.request_timed_out, MarkerOutcome.RETRY),
    (ErrorCode.kafka_storage_error, MarkerOutcome.RETRY),
    (ErrorCode.invalid_producer_epoch, MarkerOutcome.CANCELLED),
    (ErrorCode.transaction_coordinator_fenced, MarkerOutcome.CANCELLED),
    (ErrorCode.unsupported_for_message_format, MarkerOutcome.DROPPED),
    (ErrorCode.unsupported_version, MarkerOutcome.DROPPED),
    (ErrorCode.corrupt_message, MarkerOutcome.FATAL),
    (ErrorCode.message_too_large, MarkerOutcome.FATAL),
])
def test_marker_errors_are_classified_as_kafka_does(error: ErrorCode,
                                                    outcome: MarkerOutcome) -> None:
    assert classify_marker_error(error) is outcome


def test_retriable_errors_are_sent_again_to_the_new_leader() -> None:
    book = TransactionMarkerBook()
    p = pending("t1", ("a", 0))
    book.add(p)
    (request,), _ = book.build_requests(leader_of)
    results = book.on_response(request, response_errors(
        request, {("a", 0): ErrorCode.not_leader_or_follower}))
    assert results.completed == () and results.outcomes == {("t1", ("a", 0)): MarkerOutcome.RETRY}
    (again,), _ = book.build_requests(lambda tp: 4)
    assert again.node_id == 4
    assert book.on_response(again, response_errors(again)).completed == (p,)


def test_a_disconnection_sends_everything_again() -> None:
    book = TransactionMarkerBook()
    book.add(pending("t1", ("a", 0), ("b", 0)))
    (request,), _ = book.build_requests(leader_of)
    book.on_disconnected(request)
    (again,), _ = book.build_requests(leader_of)
    assert again.entries == request.entries


def test_a_partition_missing_from_the_response_is_sent_again() -> None:
    book = TransactionMarkerBook()
    book.add(pending("t1", ("a", 0), ("b", 0)))
    (request,), _ = book.build_requests(leader_of)
    book.on_response(request, {5: {("a", 0): ErrorCode.none}})
    assert book.waiting_partitions("t1") == {("b", 0)}


def test_a_fenced_producer_epoch_cancels_the_transactions_markers() -> None:
    book = TransactionMarkerBook()
    p = pending("t1", ("a", 0), ("a", 1))
    book.add(p)
    (r1, r2), _ = book.build_requests(leader_of)
    results = book.on_response(r1, response_errors(
        r1, {("a", 0): ErrorCode.invalid_producer_epoch}))
    assert results.cancelled == (p,) and len(book) == 0
    # The other leader's answer arrives later and is ignored.
    assert book.on_response(r2, response_errors(r2)).completed == ()


def test_unsupported_partitions_are_dropped_and_fatal_ones_stay() -> None:
    book = TransactionMarkerBook()
    book.add(pending("t1", ("a", 0), ("b", 0)))
    (request,), _ = book.build_requests(leader_of)
    results = book.on_response(request, response_errors(request, {
        ("a", 0): ErrorCode.unsupported_for_message_format,
        ("b", 0): ErrorCode.corrupt_message}))
    assert results.fatal == (("t1", ("b", 0), ErrorCode.corrupt_message),)
    assert results.completed == () and book.waiting_partitions("t1") == {("b", 0)}
    assert book.build_requests(leader_of) == ([], [])


def test_partitions_without_a_leader_wait_and_deleted_ones_are_dropped() -> None:
    book = TransactionMarkerBook()
    p = pending("t1", ("c", 0), ("gone", 0))
    book.add(p)
    assert book.build_requests(leader_of) == ([], [])
    assert book.waiting_partitions("t1") == {("c", 0)}
    requests, completed = book.build_requests(lambda tp: None)
    assert (requests, completed) == ([], [p])


def test_a_transaction_without_partitions_completes_at_once() -> None:
    p = pending("t1")
    book = TransactionMarkerBook()
    assert book.add(p) == [p] and len(book) == 0


def test_resigning_drops_the_partitions_transactions_and_their_late_answers() -> None:
    book = TransactionMarkerBook()
    p1 = pending("t1", ("a", 0), txn_partition=3)
    p2 = pending("t2", ("a", 1), pid=6, txn_partition=4)
    book.add(p1)
    book.add(p2)
    requests, _ = book.build_requests(leader_of)
    assert book.remove_for_txn_partition(3) == [p1]
    assert book.pending("t1") is None and book.pending("t2") == p2
    completed = [c for r in requests for c in book.on_response(r, response_errors(r)).completed]
    assert completed == [p2]


def test_a_replaced_pending_completion_ignores_answers_to_the_old_one() -> None:
    book = TransactionMarkerBook()
    book.add(pending("t1", ("a", 0), coordinator_epoch=7))
    (old,), _ = book.build_requests(leader_of)
    newer = pending("t1", ("a", 0), coordinator_epoch=8)
    book.add(newer)
    assert book.on_response(old, response_errors(old)).completed == ()
    (request,), _ = book.build_requests(leader_of)
    assert book.on_response(request, response_errors(request)).completed == (newer,)
