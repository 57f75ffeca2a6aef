"""The crash-safe swap of cleaned segments into a log (Kafka's ``LocalLog.replaceSegments`` and
the swap recovery of ``LogLoader``).

Swap protocol (``replace_segments``)::

    new <base>.*.cleaned -> <base>.*.swap     commit point: the new .log's rename to .log.swap
    old <base>.*         -> <base>.*.deleted  (unlinked later: readers keep their descriptors)
    new <base>.*.swap    -> <base>.*          final names

``complete_swaps`` runs at load before any segment is opened and finishes whatever a crash
interrupted: it deletes ``.cleaned`` files (a swap that never committed: the old segments are
intact), ``.deleted`` files, and the index ``.swap`` files of an uncommitted segment; for each
``<base>.log.swap`` it deletes every final-named segment file whose base offset lies in
[base, next offset of the swap log) (the old segments not yet renamed), then renames every
``.swap`` file to its final name.

Invariant: after a crash at any point the directory holds either the old segments or the cleaned
one for each offset range, never both and never neither. An index lost on the way is rebuilt by
the loader (a missing index fails its sanity check). Only segment files (``.log``, ``.index``,
``.timeindex``, ``.txnindex``) are renamed or deleted here; ``.snapshot`` and checkpoint files
never.

Threads: ``replace_segments`` runs under the log's lock (``Log.replace_segments``, called by the
cleaner's worker thread once it has checked that the old segments are still the log's);
``complete_swaps`` runs on the loading thread before the log exists.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from strata.storage import log_file_names as names
from strata.storage.checkpoints import fsync_dir
from strata.storage.errors import CorruptRecordError, KafkaStorageError
from strata.storage.file_records import FileRecords
from strata.storage.log_segment import LogSegment

logger = logging.getLogger(__name__)

# Every suffix a segment's files carry (the cleaner never touches .snapshot files).
SEGMENT_FILE_SUFFIXES = (
    names.LOG_FILE_SUFFIX,
    names.INDEX_FILE_SUFFIX,
    names.TIME_INDEX_FILE_SUFFIX,
    names.TXN_INDEX_FILE_SUFFIX,
)


def replace_segments(
    dir: Path,
    new: Sequence[LogSegment],
    old: Sequence[LogSegment],
    *,
    schedule_deletion: Callable[[Sequence[LogSegment]], None] | None = None,
) -> None:
    """Swap ``new`` (``.cleaned`` segments) in for ``old`` on disk (module docstring).

    ``schedule_deletion`` must rename each old segment's files to ``.deleted`` before it
    returns and unlink them later (``Log._schedule_deletion``: readers keep working until
    ``file.delete.delay.ms``); without it the old segments are renamed and deleted at once.
    The caller (``Log.replace_segments``) holds the log's lock and updates its segment list.
    An OS error raises ``KafkaStorageError``: the log dir must go offline, and the next load
    completes or rolls back the swap (``complete_swaps``).
    """
    new_sorted = sorted(new, key=lambda s: s.base_offset)
    old_sorted = sorted(old, key=lambda s: s.base_offset)
    try:
        for seg in reversed(new_sorted):
            seg.change_file_suffixes(names.CLEANED_FILE_SUFFIX, names.SWAP_FILE_SUFFIX)
        fsync_dir(dir)  # the commit point must be durable before any old file is renamed
        if schedule_deletion is not None:
            schedule_deletion(old_sorted)
        else:
            for seg in old_sorted:
                seg.change_file_suffixes("", names.DELETED_FILE_SUFFIX)
        for seg in new_sorted:
            seg.change_file_suffixes(names.SWAP_FILE_SUFFIX, "")
        fsync_dir(dir)
    except OSError as exc:
        raise KafkaStorageError(f"swapping cleaned segments into {dir} failed: {exc}") from exc
    if schedule_deletion is None:
        for seg in old_sorted:
            seg.delete()


def _swap_log_next_offset(path: Path, base_offset: int) -> int:
    """Next offset after the last whole batch of a ``.log.swap`` file (its base if none)."""
    records = FileRecords.open(path, create=False)
    next_offset = base_offset
    try:
        for _, header in records.batches():
            next_offset = header.next_offset
    except CorruptRecordError as exc:
        logger.warning("swap file %s ends in a bad batch: %s", path, exc)
    finally:
        records.close()
    return next_offset


def _offset_of(name: str) -> int | None:
    try:
        return names.offset_from_file_name(name)
    except ValueError:
        return None  # not a segment file: never touched


def complete_swaps(dir: Path) -> list[int]:
    """At load, before any segment is opened: finish or roll back an interrupted cleaner swap
    (module docstring). Returns the base offsets of the segments swapped in."""
    swap, cleaned = names.SWAP_FILE_SUFFIX, names.CLEANED_FILE_SUFFIX
    log_swap = names.LOG_FILE_SUFFIX + swap
    files = [p for p in dir.iterdir() if p.is_file() and _offset_of(p.name) is not None]
    present = {p.name for p in files}
    changed = False
    for p in files:
        name = p.name
        if name.endswith(swap) and not name.endswith(log_swap):
            if names.log_file(dir, names.offset_from_file_name(name), cleaned).name in present:
                logger.info("deleting %s: its swap never committed", p)
                p.unlink(missing_ok=True)  # the .log was still .cleaned: roll back
                changed = True
        elif name.endswith((cleaned, names.DELETED_FILE_SUFFIX)):
            p.unlink(missing_ok=True)
            changed = True
    swapped: list[int] = []
    for p in sorted(q for q in files if q.name.endswith(log_swap)):
        base = names.offset_from_file_name(p.name)
        end = max(_swap_log_next_offset(p, base), base + 1)
        for q in files:
            offset = names.offset_from_file_name(q.name)
            if q.name.endswith(SEGMENT_FILE_SUFFIXES) and base <= offset < end:
                logger.info("deleting %s: replaced by the cleaned segment %s", q, p)
                q.unlink(missing_ok=True)
        swapped.append(base)
    for p in sorted(q for q in dir.iterdir() if q.name.endswith(swap)):
        if _offset_of(p.name) is not None:
            logger.info("completing the swap of %s", p)
            os.replace(p, p.with_name(names.replace_suffix(p.name, swap, "")))
            changed = True
    if changed:
        fsync_dir(dir)
    return swapped
