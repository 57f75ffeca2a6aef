"""Transactions on the partition side: producer state transitions and fencing, the last stable
offset, ``.txnindex`` (write, read, truncate, rebuild after a crash), read_committed reads,
retention and DeleteRecords at an open transaction - real files, a manual clock, and a
property test of random interleavings against a simple model."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strata.storage import record_batch as rb
from strata.storage.clock import ManualClock
from strata.storage.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OffsetOutOfRangeError,
    TransactionCoordinatorFencedError,
)
from strata.storage.log import Log
from strata.storage.log_config import LogConfig
from strata.storage.log_loader import load_log
from strata.storage.log_transactions import AppendOrigin, FetchIsolation
from strata.storage.records import (
    ControlRecordType,
    RecordSpec,
    build_batch,
    build_end_transaction_marker,
    iter_records,
    parse_control_key,
    parse_end_transaction_marker,
    read_end_transaction_marker,
)
from strata.storage.transaction_index import ENTRY_SIZE, AbortedTxn, TransactionIndex

T0 = 1_700_000_000_000
COORDINATOR = AppendOrigin.COORDINATOR
COMMITTED = FetchIsolation.TXN_COMMITTED


def data(pid: int, epoch: int, seq: int, n: int = 1, txn: bool = True) -> bytes:
    specs = [RecordSpec(key=b"k", value=b"v%d" % i, timestamp=T0) for i in range(n)]
    return build_batch(specs, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=txn)


def marker(pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0) -> bytes:
    return build_end_transaction_marker(pid, epoch, coordinator_epoch, commit, T0)


def open_log(path: Path, props: dict[str, str] | None = None, *, recovery_point: int = 0,
             high_watermark: int | None = None, had_clean_shutdown: bool = False) -> Log:
    return load_log(path, LogConfig.from_props(props or {}), ManualClock(T0),
                    recovery_point=recovery_point, high_watermark=high_watermark,
                    had_clean_shutdown=had_clean_shutdown)


@dataclass
class Producer:
    """A transactional producer writing to one log (sequence numbers kept here)."""

    log: Log
    pid: int
    epoch: int = 0
    seq: int = 0

    def send(self, n: int = 1, txn: bool = True) -> int:
        info = self.log.append_as_leader(data(self.pid, self.epoch, self.seq, n, txn), 0)
        self.seq += n
        return info.first_offset

    def end(self, commit: bool, coordinator_epoch: int = 0, bump: bool = False) -> int:
        if bump:  # transactions v2: the marker carries the bumped epoch
            self.epoch, self.seq = self.epoch + 1, 0
        info = self.log.append_as_leader(marker(self.pid, self.epoch, commit, coordinator_epoch),
                                         0, origin=COORDINATOR)
        return info.first_offset


def whole_batches(buf: bytes) -> Iterator[tuple[int, rb.BatchHeader]]:
    """(position, header) of the whole batches of a read (it may end inside one)."""
    pos = 0
    while (size := rb.peek_size(buf, pos)) is not None and pos + size <= len(buf):
        yield pos, rb.parse_header(buf, pos)
        pos += size


def replicate(log: Log) -> None:
    log.update_high_watermark(log.log_end_offset)


# ------------------------------------------------------------------ marker batch
def test_the_marker_batch_is_kafkas_end_transaction_marker() -> None:
    batch = marker(7, 3, commit=False, coordinator_epoch=12)
    header = rb.parse_and_verify(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, -1)
    (record,) = iter_records(batch)
    assert parse_control_key(record.key) == (0, ControlRecordType.ABORT)
    assert parse_end_transaction_marker(record.value) == (0, 12)
    found = read_end_transaction_marker(batch)
    assert found is not None and found.is_abort and found.coordinator_epoch == 12


# ------------------------------------------------------- producer state transitions
def test_a_client_may_not_write_a_control_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(marker(1, 0, commit=True), 0)
    assert log.log_end_offset == 0


def test_transaction_opens_on_first_batch_and_a_marker_completes_it(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    p = Producer(log, 1)
    first = p.send(2)
    p.send(1)
    entry = log.producer_state.last_entry(1)
    assert entry is not None and entry.current_txn_first_offset == first == 0
    assert log.first_unstable_offset == 0
    p.end(commit=True, coordinator_epoch=5)
    entry = log.producer_state.last_entry(1)
    assert entry is not None and entry.current_txn_first_offset == -1
    assert entry.coordinator_epoch == 5
    replicate(log)
    assert log.first_unstable_offset is None and log.last_stable_offset() == 4


def test_a_non_transactional_batch_inside_a_transaction_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    p = Producer(log, 1)
    p.send()
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data(1, 0, 1, txn=False), 0)
    assert log.log_end_offset == 1


def test_a_marker_of_an_older_producer_epoch_is_fenced(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    p = Producer(log, 1, epoch=3)
    p.send()
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(marker(1, 2, commit=True), 0, origin=COORDINATOR)
    assert log.first_unstable_offset == 0


def test_a_marker_from_an_older_coordinator_epoch_is_fenced(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    p = Producer(log, 1)
    p.send()
    p.end(commit=True, coordinator_epoch=4)
    p.send()
    with pytest.raises(TransactionCoordinatorFencedError):
        p.end(commit=False, coordinator_epoch=3)
    replicate(log)
    assert log.first_unstable_offset == 2


def test_a_bumped_epoch_marker_then_a_new_transaction_at_sequence_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    p = Producer(log, 1)
    p.send(3)
    p.end(commit=True, bump=True)  # transactions v2
    assert p.send() == 4  # epoch 1, sequence 0
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(data(1, 0, 3), 0)  # the old epoch is fenced
    replicate(log)
    assert log.first_unstable_offset == 4


def test_a_marker_without_a_transaction_completes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    p = Producer(log, 1)
    p.end(commit=False)
    replicate(log)
    assert log.first_unstable_offset is None
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []


def test_open_transactions_never_expire(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    Producer(log, 1).send()
    Producer(log, 2).send(txn=False)
    assert log.producer_state.remove_expired_producers(T0 + 10 * 86_400_000) == 1
    assert log.producer_state.last_entry(1) is not None


# ------------------------------------------------------------------------- LSO
def test_lso_across_interleaved_transactions_of_several_producers(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a, b, c = Producer(log, 1), Producer(log, 2), Producer(log, 3)
    a.send()  # 0
    b.send()  # 1
    replicate(log)
    assert log.last_stable_offset() == 0
    a.end(commit=True)  # 2: b still open at 1
    c.send()  # 3
    replicate(log)
    assert log.first_unstable_offset == 1 and log.last_stable_offset() == 1
    b.end(commit=False)  # 4: c open at 3
    replicate(log)
    assert log.last_stable_offset() == 3
    c.end(commit=True)  # 5
    assert log.first_unstable_offset == 3  # decided, but the marker is not replicated yet
    assert log.last_stable_offset() == 3
    replicate(log)
    assert log.first_unstable_offset is None and log.last_stable_offset() == 6
    assert log.last_stable_offset(4) == 4


def test_lso_waits_for_the_marker_to_be_replicated(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    p = Producer(log, 1)
    p.send(3)
    log.update_high_watermark(2)
    p.end(commit=True)
    log.update_high_watermark(3)
    assert log.last_stable_offset() == 0  # the marker at 3 is not below the HW yet
    log.update_high_watermark(4)
    assert log.last_stable_offset() == 4


# ---------------------------------------------------------------- .txnindex
def test_transaction_index_file_format_and_search(tmp_path: Path) -> None:
    index = TransactionIndex(100, tmp_path / "00000000000000000100.txnindex")
    index.append(AbortedTxn(7, 90, 105, 106))
    index.append(AbortedTxn(8, 101, 110, 103))
    index.append(AbortedTxn(9, 120, 130, 131))
    raw = index.path.read_bytes()
    assert len(raw) == 3 * ENTRY_SIZE == 102
    assert raw[:ENTRY_SIZE] == (b"\x00\x00" + (7).to_bytes(8, "big") + (90).to_bytes(8, "big")
                                + (105).to_bytes(8, "big") + (106).to_bytes(8, "big"))
    fresh = TransactionIndex(100, index.path)
    fresh.sanity_check()
    found = fresh.collect_aborted_txns(106, 115)
    assert [t.producer_id for t in found.aborted] == [8] and found.is_complete  # 131 >= 115
    found = fresh.collect_aborted_txns(100, 104)
    assert [t.producer_id for t in found.aborted] == [7] and found.is_complete  # 106 >= 104
    found = fresh.collect_aborted_txns(125, 200)
    assert [t.producer_id for t in found.aborted] == [9] and not found.is_complete
    with pytest.raises(ValueError):
        fresh.append(AbortedTxn(1, 1, 130, 131))
    fresh.truncate_to(110)
    assert [t.last_offset for t in TransactionIndex(100, index.path).all_aborted_txns()] == [105]


def build_log_with_aborts(path: Path) -> Log:
    """Three producers, commits and aborts over several segments, one transaction left open."""
    log = open_log(path, {"segment.bytes": "700"})
    producers = [Producer(log, pid) for pid in (1, 2, 3)]
    plain = Producer(log, 9)
    for round_ in range(6):
        for i, p in enumerate(producers):
            p.send(1 + (round_ + i) % 3)
            plain.send(txn=False)
        for i, p in enumerate(producers):
            p.end(commit=(round_ + i) % 2 == 0)
        replicate(log)
    producers[1].send(2)  # left open
    replicate(log)
    return log


def txn_state(log: Log) -> tuple[object, ...]:
    entries = [(s.base_offset, s.txn_index.all_aborted_txns()) for s in log.segments]
    return (entries, log.first_unstable_offset, log.last_stable_offset(),
            log.collect_aborted_transactions(0, log.log_end_offset))


def test_aborts_are_indexed_in_the_segment_holding_the_marker(tmp_path: Path) -> None:
    log = build_log_with_aborts(tmp_path / "t-0")
    assert len(log.segments) > 3
    indexed = [t for s in log.segments for t in s.txn_index.all_aborted_txns()]
    assert len(indexed) == 9  # 6 rounds x 3 producers, half of them aborted
    for seg in log.segments:
        for txn in seg.txn_index.all_aborted_txns():
            assert seg.base_offset <= txn.last_offset < seg.read_next_offset()
            assert txn.first_offset < txn.last_offset
            assert txn.last_stable_offset <= txn.last_offset + 1
    assert [p for p, _ in log.collect_aborted_transactions(0, log.log_end_offset)] == \
        [t.producer_id for t in indexed]


def test_clean_restart_keeps_index_open_transaction_and_lso(tmp_path: Path) -> None:
    log = build_log_with_aborts(tmp_path / "t-0")
    before = txn_state(log)
    hw = log.high_watermark
    log.close()
    again = open_log(tmp_path / "t-0", {"segment.bytes": "700"}, had_clean_shutdown=True,
                     high_watermark=hw)
    assert txn_state(again) == before


@pytest.mark.parametrize("tear", [0, 5, 40])
def test_recovery_after_a_crash_rebuilds_the_same_index_and_lso(tmp_path: Path,
                                                                tear: int) -> None:
    log = build_log_with_aborts(tmp_path / "t-0")
    before = txn_state(log)
    hw = log.high_watermark
    last = log.active_segment.log.path
    for seg in log.segments:  # a crash: the indexes are not trimmed, nothing is fsynced
        seg.offset_index.flush()
        seg.time_index.flush()
    if tear:  # a torn append after the last batch
        with last.open("ab") as f:
            f.write(marker(1, 0, commit=False)[:tear])
    for seg in log.segments[1:]:  # damage every rebuilt .txnindex: it must be rewritten
        if seg.txn_index.path.exists():
            seg.txn_index.path.write_bytes(b"\x00" * 7)
    for snap in (tmp_path / "t-0").glob("*.snapshot"):
        if int(snap.name.split(".")[0]) > log.segments[1].base_offset:
            snap.unlink()
    again = open_log(tmp_path / "t-0", {"segment.bytes": "700"}, recovery_point=0,
                     high_watermark=hw)
    assert txn_state(again) == before


def test_truncation_drops_index_entries_and_reopens_the_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a, b = Producer(log, 1), Producer(log, 2)
    a.send(2)  # 0-1
    b.send()  # 2
    abort_at = a.end(commit=False)  # 3
    b.end(commit=True)  # 4
    replicate(log)
    assert log.collect_aborted_transactions(0, 5) == [(1, 0)]
    assert log.last_stable_offset() == 5
    log.truncate_to(abort_at)  # a follower whose leader never had the markers
    assert log.active_segment.txn_index.all_aborted_txns() == []
    assert log.collect_aborted_transactions(0, 5) == []
    assert log.first_unstable_offset == 0 and log.last_stable_offset() == 0
    assert log.producer_state.ongoing_transactions == {1: 0, 2: 2}


def test_a_follower_append_tracks_transactions_and_indexes_aborts(tmp_path: Path) -> None:
    leader = build_log_with_aborts(tmp_path / "leader")
    follower = open_log(tmp_path / "follower", {"segment.bytes": "700"})
    offset = 0
    while offset < leader.log_end_offset:
        chunk = leader.read(offset, 600).read_bytes()
        whole = list(whole_batches(chunk))
        follower.append_as_follower(chunk[: whole[-1][0] + whole[-1][1].size])
        offset = follower.log_end_offset
    replicate(follower)
    assert follower.first_unstable_offset == leader.first_unstable_offset
    assert follower.collect_aborted_transactions(0, follower.log_end_offset) == \
        leader.collect_aborted_transactions(0, leader.log_end_offset)


# ---------------------------------------------------------- read_committed
def committed_values(log: Log, start: int = 0) -> Iterator[tuple[int, bytes | None]]:
    """What a read_committed consumer delivers: Kafka's client-side filtering of aborted
    batches with the ``aborted_transactions`` of each fetch."""
    offset = start
    while True:
        info = log.read(offset, 250, log.high_watermark, True, isolation=COMMITTED)
        buf = info.read_bytes()
        assert info.aborted_transactions is not None
        pending = sorted(info.aborted_transactions, key=lambda t: t[1])
        aborting: set[int] = set()
        got = False
        for pos, h in whole_batches(buf):
            got = True
            while pending and pending[0][1] <= h.last_offset:
                aborting.add(pending.pop(0)[0])
            if h.is_control:
                if read_end_transaction_marker(buf, pos) is not None:
                    aborting.discard(h.producer_id)
            elif not (h.is_transactional and h.producer_id in aborting):
                for r in iter_records(buf, pos):
                    if r.offset >= offset:
                        yield r.offset, r.value
            offset = h.next_offset
        if not got:
            return


def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a, b = Producer(log, 1), Producer(log, 2)
    a.send(2)  # 0-1
    b.send()  # 2
    a.end(commit=False)  # 3
    b.send()  # 4
    replicate(log)
    info = log.read(0, 1 << 20, log.high_watermark, isolation=COMMITTED)
    assert log.last_stable_offset() == 2
    offsets = [h.base_offset for _, h in whole_batches(info.read_bytes())]
    assert offsets == [0]  # only below the LSO (b's transaction at 2 is open)
    assert info.aborted_transactions == ((1, 0),)
    plain = log.read(0, 1 << 20, log.high_watermark)
    assert plain.aborted_transactions is None and plain.size > info.size
    b.end(commit=True)  # 5
    replicate(log)
    assert [o for o, _ in committed_values(log)] == [2, 4]
    assert log.read(6, 100, log.high_watermark, isolation=COMMITTED).aborted_transactions == ()


# -------------------------------------------------------- retention / DeleteRecords
def test_retention_stops_at_an_open_transaction_and_delete_records_at_the_hw(
        tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", {"segment.bytes": "300", "retention.bytes": "0"})
    plain = Producer(log, 9)
    for _ in range(6):
        plain.send(txn=False)
    opener = Producer(log, 1)
    open_at = opener.send()
    for _ in range(6):
        plain.send(txn=False)
    replicate(log)
    log.delete_old_segments()
    assert log.log_start_offset <= open_at
    assert log.segments[0].base_offset <= open_at
    assert log.delete_records_before(open_at) == open_at
    with pytest.raises(OffsetOutOfRangeError):  # Kafka's bound is the high watermark only
        log.delete_records_before(log.high_watermark + 1)
    opener.end(commit=True)
    replicate(log)
    log.delete_old_segments()
    assert log.log_start_offset > open_at


# ------------------------------------------------------------ property test
@dataclass
class Model:
    ongoing: dict[int, int] = field(default_factory=dict)
    aborted: list[tuple[int, int]] = field(default_factory=list)  # in marker order
    values: dict[int, tuple[int, bool]] = field(default_factory=dict)  # offset -> (pid, txn)
    outcome: dict[tuple[int, int], bool] = field(default_factory=dict)  # (pid, first) -> commit

    def committed(self, below: int) -> list[int]:
        out = []
        for offset, (pid, txn) in sorted(self.values.items()):
            if offset >= below:
                break
            if not txn:
                out.append(offset)
                continue
            first = max(f for (p, f) in self.outcome if p == pid and f <= offset) \
                if any(p == pid and f <= offset for (p, f) in self.outcome) else None
            if first is not None and self.outcome[(pid, first)]:
                out.append(offset)
        return out


def derive(events: list[tuple[int, str, int, int]]) -> Model:
    """The model of a log holding ``events`` (offset, kind, producer, records), in order."""
    model = Model()
    for offset, kind, pid, n in events:
        if kind == "send":
            model.ongoing.setdefault(pid, offset)
        if kind in ("send", "plain"):
            for o in range(offset, offset + n):
                model.values[o] = (pid, kind == "send")
        elif kind in ("commit", "abort"):
            first = model.ongoing.pop(pid, None)
            if first is not None:
                model.outcome[(pid, first)] = kind == "commit"
                if kind == "abort":
                    model.aborted.append((pid, first))
    return model


OPS = st.lists(st.tuples(st.sampled_from(["send", "commit", "abort", "plain", "roll",
                                          "truncate"]),
                         st.integers(1, 3), st.integers(1, 3)), min_size=1, max_size=40)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_random_interleavings_match_a_simple_model(tmp_path_factory: pytest.TempPathFactory,
                                                  ops: list[tuple[str, int, int]]) -> None:
    path = tmp_path_factory.mktemp("prop") / "t-0"
    log = open_log(path, {"segment.bytes": "400"})
    producers = {pid: Producer(log, pid) for pid in (1, 2, 3, 9)}
    events: list[tuple[int, str, int, int]] = []
    for op, pid, n in ops:
        p = producers[pid]
        if op == "send":
            events.append((p.send(n), op, pid, n))
        elif op in ("commit", "abort"):
            events.append((p.end(commit=op == "commit"), op, pid, 1))
        elif op == "plain":
            events.append((producers[9].send(n, txn=False), op, 9, n))
        elif op == "roll":
            log.roll()
        elif events:  # truncate: a follower cuts its log at a batch boundary
            cut = events[len(events) * (n - 1) // 3][0]
            log.truncate_to(cut)
            events = [e for e in events if e[0] < cut]
            for q in producers.values():  # the producers continue from what survived
                entry = log.producer_state.last_entry(q.pid)
                q.seq = entry.last_seq + 1 if entry is not None else 0
        replicate(log)
        model = derive(events)
        expected_fuo = min(model.ongoing.values()) if model.ongoing else None
        assert log.first_unstable_offset == expected_fuo
    lso = log.last_stable_offset()
    assert lso == (expected_fuo if expected_fuo is not None else log.log_end_offset)
    assert log.collect_aborted_transactions(0, log.log_end_offset) == model.aborted
    expected = model.committed(lso)
    for start in {0, log.log_end_offset // 3, log.log_end_offset // 2, lso}:
        assert [o for o, _ in committed_values(log, start)] == [o for o in expected if o >= start]
    before = txn_state(log)
    hw = log.high_watermark
    # a crash: everything is recovered and the .txnindex files rebuilt from the log
    for seg in log.segments:
        seg.offset_index.flush()
        seg.time_index.flush()
    again = open_log(path, recovery_point=0, high_watermark=hw)
    assert txn_state(again) == before
    again.close()


def test_the_txnindex_goes_with_its_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", {"segment.bytes": "300", "file.delete.delay.ms": "0"})
    p = Producer(log, 1)
    p.send()
    p.end(commit=False)
    log.roll()
    first = log.segments[0]
    path = first.txn_index.path
    assert path.name == "00000000000000000000.txnindex" and path.exists()
    Producer(log, 9).send(txn=False)
    replicate(log)
    assert log.delete_records_before(2) == 2  # the aborted transaction's segment goes
    assert not path.exists() and first.txn_index.path.name.endswith(".txnindex.deleted")
    log.delete_pending_segments(force=True)
    assert not first.txn_index.path.exists()
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []


def test_an_orphan_txnindex_is_deleted_at_load(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.close()
    orphan = tmp_path / "t-0" / "00000000000000000500.txnindex"
    orphan.write_bytes(b"\x00" * ENTRY_SIZE)
    open_log(tmp_path / "t-0", had_clean_shutdown=True).close()
    assert not orphan.exists()


def test_an_abort_segments_after_the_read_is_still_listed(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    p = Producer(log, 1)
    p.send()
    log.roll()
    p.send()
    log.roll()
    p.end(commit=False)  # the marker two segments after the first batch
    replicate(log)
    info = log.read(0, 1 << 20, log.high_watermark, isolation=COMMITTED)
    assert [h.base_offset for _, h in whole_batches(info.read_bytes())] == [0]
    assert info.aborted_transactions == ((1, 0),)


def test_a_torn_abort_marker_reopens_its_transaction_after_recovery(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a, b = Producer(log, 1), Producer(log, 2)
    a.send(2)  # 0-1
    a.end(commit=False)  # 2
    b.send()  # 3
    abort_at = b.end(commit=False)  # 4: torn by the crash
    replicate(log)
    assert log.collect_aborted_transactions(0, 5) == [(1, 0), (2, 3)]
    segment = log.active_segment
    segment.offset_index.flush()
    segment.time_index.flush()
    size = segment.size
    os_path = segment.log.path
    with os_path.open("r+b") as f:
        f.truncate(size - 10)
    again = open_log(tmp_path / "t-0", recovery_point=0, high_watermark=abort_at)
    assert again.log_end_offset == abort_at
    assert again.collect_aborted_transactions(0, abort_at) == [(1, 0)]
    assert again.producer_state.ongoing_transactions == {2: 3}
    assert again.first_unstable_offset == 3 and again.last_stable_offset() == 3
    assert [e.last_offset for e in again.active_segment.txn_index.all_aborted_txns()] == [2]


def test_a_coordinators_data_batches_skip_sequence_and_duplicate_checks(tmp_path: Path) -> None:
    """The group coordinator writes a producer's transactional offset commits at sequence 0
    each time (Kafka checks sequences and duplicates for client appends only); the epoch is
    still checked."""
    log = open_log(tmp_path)
    coordinator = AppendOrigin.COORDINATOR
    first = log.append_as_leader(data(9, 2, 0), 0, coordinator)
    again = log.append_as_leader(data(9, 2, 0), 0, coordinator)
    assert not again.duplicate and again.first_offset == first.first_offset + 1
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(data(9, 1, 0), 0, coordinator)
    assert log.append_as_leader(data(9, 2, 0), 0).duplicate  # a client's retry still is one
