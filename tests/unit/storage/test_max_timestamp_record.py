"""ListOffsets MAX_TIMESTAMP (-3, KIP-734) in storage: the offset of the first record holding the
largest timestamp, found inside its batch, across segments, compressed batches and a reload."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.storage.clock import ManualClock
from strata.storage.log import Log
from strata.storage.log_config import LogConfig
from strata.storage.log_loader import load_log
from strata.storage.log_results import MAX_TIMESTAMP
from strata.storage.records import RecordSpec, build_batch

T0 = 1_700_000_000_000


def open_log(path: Path, clock: ManualClock, **props: str) -> Log:
    return load_log(path, LogConfig.from_props(props), clock)


def append(log: Log, deltas: list[int], epoch: int, compression: int = 0) -> None:
    log.append_as_leader(build_batch([RecordSpec(key=b"k", value=b"v" * 40, timestamp=T0 + d)
                                      for d in deltas], compression=compression),
                         leader_epoch=epoch)


@pytest.mark.parametrize("compression", [0, 1, 3, 4])
def test_the_record_not_the_batch_end(tmp_path: Path, compression: int) -> None:
    clock = ManualClock(T0 + 1000)
    log = open_log(tmp_path / "t-0", clock)
    append(log, [100, 400, 250], epoch=2, compression=compression)
    found = log.fetch_offset_by_timestamp(MAX_TIMESTAMP)
    assert found is not None
    assert (found.timestamp, found.offset, found.leader_epoch) == (T0 + 400, 1, 2)


def test_across_segments_and_after_a_reload(tmp_path: Path) -> None:
    clock = ManualClock(T0 + 10_000)
    log = open_log(tmp_path / "t-0", clock, **{"segment.bytes": "400",
                                               "index.interval.bytes": "1"})
    append(log, [10, 20], epoch=0)  # offsets 0-1
    append(log, [30, 900, 40, 900], epoch=1)  # offsets 2-5: the first 900 is offset 3
    for i in range(6):
        append(log, [50 + i, 60 + i], epoch=1)  # later batches, smaller timestamps
    assert len(log.segments) > 2
    for reopened in (False, True):
        if reopened:
            log.close()
            log = open_log(tmp_path / "t-0", clock, **{"segment.bytes": "400"})
        found = log.fetch_offset_by_timestamp(MAX_TIMESTAMP)
        assert found is not None
        assert (found.timestamp, found.offset, found.leader_epoch) == (T0 + 900, 3, 1), reopened


def test_empty_log_has_none(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", ManualClock(T0))
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) is None
