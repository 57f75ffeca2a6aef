"""``AbstractIndex.reset`` on an index left full-length by an unclean shutdown: empty, full
capacity, reads as empty after a reopen, and appends start at slot 0 — without zeroing the file
through its mapping (the file is cut and grown back)."""

from __future__ import annotations

from pathlib import Path

from strata.storage.offset_index import OffsetIndex


def test_reset_of_a_full_length_index_empties_it_to_full_capacity(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    writer = OffsetIndex(path, 0)
    writer.append(10, 4096)
    writer.append(20, 8192)
    writer.flush()
    crashed = OffsetIndex(path, 0)  # reopened while full-length: every slot counts
    assert crashed.entries == crashed.max_entries
    crashed.reset()
    assert crashed.entries == 0 and crashed.length == crashed.max_index_size
    assert path.stat().st_size == crashed.max_index_size
    assert path.read_bytes().count(0) == crashed.max_index_size  # every byte zero again
    crashed.append(5, 100)
    assert crashed.lookup(7).position == 100
