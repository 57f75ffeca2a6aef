"""``SegmentDeletion``: segments a log removed, on their way off the disk.

A segment leaves a log (retention, DeleteRecords, truncation, a cleaner swap) in two steps:
``schedule`` renames its files to ``.deleted`` at once, so a new segment may reuse the name and
a restart never loads it again; ``delete_due`` closes and unlinks them once
``file.delete.delay.ms`` has passed. Until then a reader of an older snapshot can still read
the segment (an inactive one reopens by its ``.deleted`` name if the descriptor pool closed it);
a ``FileSlice`` (for sendfile) holds its own descriptor and stays valid even after the unlink.
``delete`` takes the segment out of the descriptor pool at once.

Invariant: a segment is listed from its rename until its unlink, never twice. Used by the
``Log`` on its owner thread (and under ``Log.lock`` when a cleaner swap schedules); no lock here.
"""

from __future__ import annotations

from collections.abc import Sequence

from strata.storage.log_file_names import DELETED_FILE_SUFFIX
from strata.storage.log_segment import LogSegment


class SegmentDeletion:
    def __init__(self) -> None:
        self._pending: list[tuple[int, LogSegment]] = []

    def schedule(self, segments: Sequence[LogSegment], due_ms: int) -> None:
        """Rename to ``.deleted`` now; close and unlink at ``due_ms`` or later."""
        for seg in segments:
            seg.change_file_suffixes("", DELETED_FILE_SUFFIX)
            self._pending.append((due_ms, seg))

    def delete_due(self, now_ms: int, force: bool = False) -> int:
        """Close and unlink the segments due at ``now_ms`` (all with ``force``); how many."""
        keep, gone = [], 0
        for due, seg in self._pending:
            if force or due <= now_ms:
                seg.delete()
                gone += 1
            else:
                keep.append((due, seg))
        self._pending = keep
        return gone
