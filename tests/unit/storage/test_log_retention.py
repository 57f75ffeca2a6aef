"""Pure retention decisions over stand-in segments."""

from __future__ import annotations

from dataclasses import dataclass

from strata.storage.log_retention import (
    below_log_start,
    deletable_prefix,
    retention_bytes_breached,
    retention_ms_breached,
)


@dataclass
class Seg:
    base_offset: int
    size: int
    largest_timestamp: int = 0


SEGS = [Seg(0, 100, 10), Seg(10, 100, 20), Seg(20, 100, 30), Seg(30, 100, 40)]


def test_time_retention_stops_at_the_first_young_segment() -> None:
    assert deletable_prefix(SEGS, 40, 40, retention_ms_breached(45, 20)) == 2
    assert deletable_prefix(SEGS, 40, 40, retention_ms_breached(1000, 20)) == 4
    assert deletable_prefix(SEGS, 40, 40, retention_ms_breached(15, 20)) == 0


def test_nothing_at_or_above_the_high_watermark_goes() -> None:
    assert deletable_prefix(SEGS, 25, 40, retention_ms_breached(1000, 0)) == 2
    assert deletable_prefix(SEGS, 39, 40, retention_ms_breached(1000, 0)) == 3


def test_size_retention_keeps_the_log_at_or_above_the_limit() -> None:
    assert deletable_prefix(SEGS, 40, 40, retention_bytes_breached(400, 250)) == 1
    assert deletable_prefix(SEGS, 40, 40, retention_bytes_breached(400, 200)) == 2
    assert deletable_prefix(SEGS, 40, 40, retention_bytes_breached(400, 400)) == 0


def test_log_start_offset() -> None:
    assert deletable_prefix(SEGS, 40, 40, below_log_start(25)) == 2
    assert deletable_prefix(SEGS, 40, 40, below_log_start(9)) == 0


def test_emptied_segments_go_only_with_a_later_expiring_one() -> None:
    segs = [Seg(0, 0), Seg(10, 0), Seg(20, 100, 30), Seg(30, 100, 40)]
    assert deletable_prefix(segs, 40, 40, retention_ms_breached(35, 10)) == 0
    assert deletable_prefix(segs, 40, 40, retention_ms_breached(45, 10)) == 3
    assert deletable_prefix([Seg(0, 0)], 0, 0, retention_ms_breached(45, 10)) == 0
