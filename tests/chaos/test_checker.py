"""The campaign's checker (``strata.cli.chaos_checker``) and verdict (``CampaignReport``) on
hand-made histories: no processes."""

from __future__ import annotations

from pathlib import Path

from strata.cli.chaos_campaign import CampaignConfig, CampaignReport
from strata.cli.chaos_checker import (
    Delivery,
    ReplicaRead,
    Resume,
    StoredRecord,
    ValueId,
    check,
    make_value,
    parse_value,
)
from strata.cli.chaos_nemesis import FaultKind, FaultRecord


def v(producer: int, sequence: int, incarnation: int = 0) -> bytes:
    return make_value(producer, incarnation, sequence)


def clean_history() -> tuple[list[Delivery], list[StoredRecord]]:
    """Two producers, two partitions, every acknowledged record where it was acknowledged."""
    deliveries = [Delivery(0, 0, v(0, 0)), Delivery(1, 0, v(0, 1)), Delivery(0, 1, v(1, 0)),
                  Delivery(0, 2, v(0, 2)), Delivery(1, 1, v(1, 1))]
    read = [StoredRecord(d.partition, d.offset, d.value) for d in deliveries]
    return deliveries, read


def test_values_name_their_writer() -> None:
    assert parse_value(make_value(2, 1, 345)) == ValueId(2, 1, 345)
    assert parse_value(b"something else") is None
    assert parse_value(None) is None


def test_a_clean_history_counts_nothing() -> None:
    deliveries, read = clean_history()
    result = check(deliveries, read, [], [], {0: 3, 1: 2}, {d.value for d in deliveries})
    assert result.ok()
    assert result.counters() == {
        "acknowledged": 5, "acknowledged without offset": 0, "read": 5, "lost": 0,
        "duplicated": 0, "re-sent by the client under a new producer epoch": 0,
        "reordered": 0, "sequence breaks": 0, "wrong offset": 0, "fatal producer errors": 0,
        "divergent partitions": 0, "group misses": 0, "commit regressions": 0}


def test_an_acknowledged_record_missing_from_the_read_is_lost() -> None:
    deliveries, read = clean_history()
    read = [r for r in read if r.value != v(0, 2)]
    result = check(deliveries, read)
    assert [d.value for d in result.lost] == [v(0, 2)]
    assert not result.ok()


def test_an_unacknowledged_record_in_the_read_is_not_a_finding() -> None:
    deliveries, read = clean_history()
    read.append(StoredRecord(0, 3, v(0, 3)))  # written, but its delivery report failed
    assert check(deliveries, read).ok()


def test_every_extra_copy_of_a_value_is_a_duplicate() -> None:
    deliveries, read = clean_history()
    read += [StoredRecord(0, 3, v(0, 2)), StoredRecord(1, 2, v(0, 2))]
    result = check(deliveries, read)
    assert result.counters()["duplicated"] == 2
    assert result.duplicated == [(v(0, 2), [(0, 2), (0, 3), (1, 2)])]
    assert result.wrong_offset == []  # one copy is where it was acknowledged


def resend_history(writers: dict[int, tuple[int, int, int]]
                   ) -> tuple[list[Delivery], list[StoredRecord], ReplicaRead]:
    """Producer 0 on partition 0: sequences 0-2 under epoch 0, then value 2 again at offset 3
    (acknowledged there) and value 3, under the writers given for offsets 3 and 4."""
    read = [StoredRecord(0, o, v(0, s)) for o, s in enumerate([0, 1, 2, 2, 3])]
    deliveries = [Delivery(0, 0, v(0, 0)), Delivery(0, 1, v(0, 1)), Delivery(0, 3, v(0, 2)),
                  Delivery(0, 4, v(0, 3))]
    replica = ReplicaRead(0, 0, True, {r.offset: r.value for r in read},
                          {0: (1000, 0, 0), 1: (1000, 0, 1), 2: (1000, 0, 2), **writers})
    return deliveries, read, replica


def test_a_copy_the_client_sent_again_under_a_bumped_epoch_is_counted_apart() -> None:
    deliveries, read, replica = resend_history({3: (1000, 1, 0), 4: (1000, 1, 1)})
    result = check(deliveries, read, replicas=[replica], high_watermarks={0: 5})
    assert result.duplicated == [] and result.sequence_breaks == []
    assert result.resent == [(v(0, 2), [(0, 2), (0, 3)])]
    assert result.counters()["re-sent by the client under a new producer epoch"] == 1
    assert result.counters()["duplicated"] == 0


def test_a_copy_after_the_acknowledged_one_is_a_duplicate_even_under_a_new_epoch() -> None:
    deliveries, read, replica = resend_history({3: (1000, 1, 0), 4: (1000, 1, 1)})
    deliveries[2] = Delivery(0, 2, v(0, 2))  # the first copy was the acknowledged one
    result = check(deliveries, read, replicas=[replica], high_watermarks={0: 5})
    assert result.resent == [] and result.duplicated == [(v(0, 2), [(0, 2), (0, 3)])]
    assert not result.ok()


def test_a_copy_under_the_same_epoch_is_a_duplicate_and_a_sequence_break() -> None:
    # The broker let a retry of sequence 2 in again: its idempotence check missed it.
    deliveries, read, replica = resend_history({3: (1000, 0, 2), 4: (1000, 0, 3)})
    result = check(deliveries, read, replicas=[replica], high_watermarks={0: 5})
    assert result.resent == [] and result.duplicated == [(v(0, 2), [(0, 2), (0, 3)])]
    assert result.sequence_breaks == [
        "partition 0 offset 3: producer id 1000 epoch 0 sequence 2 after 2"]
    assert not result.ok()


def test_a_copy_whose_writer_is_unknown_or_another_producer_id_is_a_duplicate() -> None:
    for writers in ({}, {3: (2000, 1, 0), 4: (2000, 1, 1)}, {3: (-1, -1, -1)}):
        deliveries, read, replica = resend_history(writers)
        result = check(deliveries, read, replicas=[replica], high_watermarks={0: 5})
        assert result.resent == [] and len(result.duplicated) == 1, writers
    deliveries, read, _ = resend_history({})
    assert check(deliveries, read).counters()["duplicated"] == 1  # no replicas: no writers


def test_a_gap_in_one_epochs_sequences_is_a_sequence_break() -> None:
    deliveries, read, replica = resend_history({3: (1000, 1, 0), 4: (1000, 1, 2)})
    result = check(deliveries, read, replicas=[replica], high_watermarks={0: 5})
    assert result.sequence_breaks == [
        "partition 0 offset 4: producer id 1000 epoch 1 sequence 2 after 0"]
    assert not result.ok()


def test_an_out_of_sync_replica_names_a_writer_only_where_no_in_sync_one_does() -> None:
    deliveries, read, in_sync = resend_history({3: (1000, 1, 0)})
    stale = ReplicaRead(1, 0, False, {}, {3: (1000, 0, 3), 4: (1000, 1, 1)})
    result = check(deliveries, read, replicas=[stale, in_sync], high_watermarks={0: 5})
    assert result.resent == [(v(0, 2), [(0, 2), (0, 3)])] and result.sequence_breaks == []


def test_a_record_only_at_another_offset_is_acknowledged_at_the_wrong_offset() -> None:
    deliveries, read = clean_history()
    # The broker acknowledged offset 2 of partition 0, but the log holds the record at 3 and
    # something else at 2.
    read = [r for r in read if r.value != v(0, 2)]
    read += [StoredRecord(0, 2, v(2, 0)), StoredRecord(0, 3, v(0, 2))]
    result = check(deliveries, read)
    assert [(d.value, places) for d, places in result.wrong_offset] == [(v(0, 2), [(0, 3)])]
    assert result.lost == []


def test_a_report_without_offset_is_not_misplaced_but_can_be_lost() -> None:
    deliveries, read = clean_history()
    deliveries += [Delivery(1, None, v(0, 3)), Delivery(1, None, v(0, 4))]
    read.append(StoredRecord(1, 2, v(0, 3)))
    result = check(deliveries, read)
    assert result.without_offset == 2
    assert result.wrong_offset == []
    assert [d.value for d in result.lost] == [v(0, 4)]


def test_a_smaller_sequence_after_a_larger_one_of_the_same_producer_is_reordered() -> None:
    read = [StoredRecord(0, 0, v(0, 0)), StoredRecord(0, 1, v(0, 2)),
            StoredRecord(0, 2, v(0, 1)), StoredRecord(0, 3, v(1, 0))]
    result = check([], read)
    assert result.reordered == [(0, 2, v(0, 1), v(0, 2))]


def test_order_is_per_partition_and_per_incarnation() -> None:
    read = [StoredRecord(0, 0, v(0, 5)), StoredRecord(1, 0, v(0, 1)),  # another partition
            StoredRecord(0, 1, v(0, 0, incarnation=1))]  # a new producer starts at 0
    assert check([], read).reordered == []


def test_a_duplicate_is_not_also_counted_as_reordered() -> None:
    read = [StoredRecord(0, 0, v(0, 0)), StoredRecord(0, 1, v(0, 1)),
            StoredRecord(0, 2, v(0, 0))]
    result = check([], read)
    assert result.reordered == []
    assert result.counters()["duplicated"] == 1


def test_fatal_producer_errors_are_counted() -> None:
    deliveries, read = clean_history()
    fatal = ["producer 1 incarnation 0: OUT_OF_ORDER_SEQUENCE_NUMBER: sequence desync"]
    result = check(deliveries, read, fatal)
    assert result.counters()["fatal producer errors"] == 1
    assert not result.ok()


def test_an_in_sync_replica_that_differs_below_the_high_watermark_diverges() -> None:
    deliveries, read = clean_history()
    same = ReplicaRead(1, 0, True, {0: v(0, 0), 1: v(1, 0), 2: v(0, 2)})
    other_value = ReplicaRead(2, 0, True, {0: v(0, 0), 1: v(2, 9), 2: v(0, 2)})
    short = ReplicaRead(0, 1, True, {0: v(0, 1)})
    result = check(deliveries, read, [], [same, other_value, short], {0: 3, 1: 2})
    assert sorted(result.divergent) == [0, 1]
    assert "broker 2" in result.divergent[0][0] and "first 1" in result.divergent[0][0]
    assert "broker 0" in result.divergent[1][0]


def test_records_at_or_above_the_high_watermark_and_out_of_sync_replicas_are_ignored() -> None:
    deliveries, read = clean_history()
    longer = ReplicaRead(1, 0, True, {0: v(0, 0), 1: v(1, 0), 2: v(0, 2), 3: v(2, 2)})
    lagging = ReplicaRead(2, 1, False, {})
    result = check(deliveries, read, [], [longer, lagging], {0: 3, 1: 2})
    assert result.divergent == {}
    assert result.replicas_checked


def test_acknowledged_records_the_group_never_consumed_are_misses() -> None:
    deliveries, read = clean_history()
    consumed = {d.value for d in deliveries} - {v(1, 1)}
    result = check(deliveries, read, group_consumed=consumed)
    assert [d.value for d in result.group_misses] == [v(1, 1)]
    assert result.group_checked


def test_a_resume_below_an_acknowledged_commit_is_a_commit_regression() -> None:
    deliveries, read = clean_history()
    resumes = [Resume(0, 0, -1), Resume(0, 2, 2), Resume(1, 1, 2), Resume(1, 3, 2)]
    result = check(deliveries, read, group_consumed={d.value for d in deliveries},
                   group_resumes=resumes)
    assert result.commit_regressions == [Resume(1, 1, 2)]
    assert result.counters()["commit regressions"] == 1
    assert not result.ok()


def test_checks_not_run_are_reported_as_not_checked() -> None:
    deliveries, read = clean_history()
    result = check(deliveries, read)
    assert not result.replicas_checked and not result.group_checked


def test_the_report_passes_only_when_every_check_ran_and_found_nothing(tmp_path: Path) -> None:
    deliveries, read = clean_history()
    config = CampaignConfig(workdir=tmp_path, seed=1, faults=1, kinds=[FaultKind.KILL_ALL])
    clean = check(deliveries, read, [], [], {0: 3, 1: 2}, {d.value for d in deliveries})
    assert CampaignReport(config, [FaultRecord(0, FaultKind.KILL_ALL)], clean).ok()
    assert not CampaignReport(config, [], clean, aborted="broker 1 did not restart").ok()
    assert not CampaignReport(config, [], clean, read_complete=False).ok()
    assert not CampaignReport(config, [], check(deliveries, read)).ok()  # checks not run
    rows = dict(CampaignReport(config, [FaultRecord(0, FaultKind.KILL_ALL)], clean)
                .summary_rows())
    assert rows["faults: kill-all"] == "1" and rows["lost"] == "0"
