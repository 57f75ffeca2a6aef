"""The checks that find a damaged segment without changing it: on open, and of its tail.

Part of ``LogSegment``'s crash policy (``log_segment``); the repair is ``LogSegment.recover``.
Two checks, both cheap whatever the segment's size:

* on open of an existing segment (``check_indexes_against_log``): an index file that was
  missing while the ``.log`` has data, or an offset index whose last entry points at or past
  the end of the ``.log``, is marked corrupt, so its ``sanity_check`` fails and the loader
  rebuilds it;
* after a clean shutdown the loader checks the last segment's tail (``check_tail``): every
  batch from the last offset index entry to the end of the ``.log`` must be whole, CRC-valid,
  above the previous one and inside the segment's 4-byte relative offsets, and the last must
  end exactly at the end of the file: the disk may have changed since the clean shutdown.

Reads only: no file is written, truncated or renamed (marking an index corrupt is in memory).
"""

from __future__ import annotations

from strata.storage.errors import CorruptRecordError
from strata.storage.file_records import FileRecords
from strata.storage.offset_index import OffsetIndex
from strata.storage.time_index import TimeIndex


def check_indexes_against_log(log: FileRecords, offset_index: OffsetIndex,
                              time_index: TimeIndex, index_existed: bool,
                              time_index_existed: bool) -> None:
    """Mark corrupt the indexes of a segment just opened that cannot match its ``.log``."""
    for index, existed in ((offset_index, index_existed), (time_index, time_index_existed)):
        if not existed and log.size_in_bytes > 0:
            index.mark_corrupt(f"index file {index.path} was missing for a non-empty "
                               f"{log.path}; it must be rebuilt")
    entries = offset_index.entries
    if entries and index_existed:
        last = offset_index.entry(entries - 1)
        if last.position >= log.size_in_bytes:
            offset_index.mark_corrupt(
                f"index file {offset_index.path} points at position {last.position}, "
                f"past the end of {log.path} ({log.size_in_bytes} bytes)")


def check_tail(log: FileRecords, offset_index: OffsetIndex, base_offset: int) -> str | None:
    """Why the segment's tail is damaged, or None (module docstring). Costs one scan of at
    most about ``index_interval_bytes`` plus one append."""
    position = offset_index.lookup(offset_index.last_offset).position
    previous_last_offset = base_offset - 1
    try:
        for pos, header in log.batches(position, verify_crc=True):
            if (header.base_offset <= previous_last_offset
                    or not offset_index.can_append_offset(header.last_offset)):
                return (f"batch at position {pos} has offsets {header.base_offset}.."
                        f"{header.last_offset}, out of order for base offset "
                        f"{base_offset}")
            previous_last_offset = header.last_offset
    except CorruptRecordError as exc:
        return str(exc)
    return None
