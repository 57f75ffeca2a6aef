"""Every file and directory name of a partition log, in one place (Kafka's ``LogFileUtils``).

Pure string and path functions; no I/O.

A partition replica lives in a directory ``<topic>-<partition>/`` (the topic may itself contain
``-``: the partition number is what follows the *last* one). Its files are named after the base
offset of the segment they belong to, as 20 zero-padded decimal digits (so that names sort like
offsets), followed by a suffix::

    00000000000000000000.log         the records (RecordBatch v2, concatenated)
    00000000000000000000.index       offset index (relative offset -> file position)
    00000000000000000000.timeindex   time index (timestamp -> relative offset)
    00000000000000000000.txnindex    aborted transactions (only once the segment has one)
    00000000000000001234.snapshot    producer state as of offset 1234

A second suffix marks a file in transit; it is appended to the full name, e.g.
``00000000000000000000.log.deleted``:

* ``.deleted`` — removed by retention/truncation; unlinked after ``file.delete.delay.ms``.
* ``.cleaned`` — written by the cleaner, not yet part of the log.
* ``.swap``    — a cleaned segment about to replace the originals (the crash-safe swap step).

A partition directory renamed for asynchronous deletion is
``<topic>-<partition>.<unique id>-delete``.
"""

from __future__ import annotations

import re
from pathlib import Path

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
DELETE_DIR_SUFFIX = "-delete"

OFFSET_DIGITS = 20  # enough for any non-negative int64

_DELETE_DIR_PATTERN = re.compile(r"^(\S+)-(\d+)\.(\S+)" + re.escape(DELETE_DIR_SUFFIX) + "$")
_PARTITION_PATTERN = re.compile(r"^\d+$")
_OFFSET_PATTERN = re.compile(r"^\d{1,20}$")


def filename_prefix_from_offset(offset: int) -> str:
    """``offset`` as 20 zero-padded decimal digits: the stem of every segment file name."""
    if offset < 0:
        raise ValueError(f"a file name offset cannot be negative: {offset}")
    return f"{offset:0{OFFSET_DIGITS}d}"


def offset_from_file_name(file_name: str) -> int:
    """The base offset a segment or snapshot file is named after (text before the first '.').

    Works for in-transit names too: ``00000000000000000042.log.deleted`` -> 42.
    """
    stem = file_name.split(".", 1)[0]
    if not _OFFSET_PATTERN.match(stem):
        raise ValueError(f"{file_name!r} is not named after an offset")
    return int(stem)


def log_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return dir / (filename_prefix_from_offset(offset) + LOG_FILE_SUFFIX + suffix)


def offset_index_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return dir / (filename_prefix_from_offset(offset) + INDEX_FILE_SUFFIX + suffix)


def time_index_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return dir / (filename_prefix_from_offset(offset) + TIME_INDEX_FILE_SUFFIX + suffix)


def txn_index_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return dir / (filename_prefix_from_offset(offset) + TXN_INDEX_FILE_SUFFIX + suffix)


def producer_snapshot_file(dir: Path, offset: int) -> Path:
    return dir / (filename_prefix_from_offset(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX)


def is_log_file(path: Path) -> bool:
    return path.name.endswith(LOG_FILE_SUFFIX)


def is_index_file(path: Path) -> bool:
    """True for a (final-named) ``.index`` or ``.timeindex`` file."""
    return path.name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX))


def replace_suffix(name: str, old_suffix: str, new_suffix: str) -> str:
    """``name`` with ``old_suffix`` (which it must end with; may be "") swapped for another."""
    if not name.endswith(old_suffix):
        raise ValueError(f"{name!r} does not end with {old_suffix!r}")
    return name[: len(name) - len(old_suffix)] + new_suffix


def topic_partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``: the directory of one partition replica."""
    if not topic or partition < 0:
        raise ValueError(f"invalid topic partition {topic!r}-{partition}")
    return f"{topic}-{partition}"


def log_delete_dir_name(topic: str, partition: int, unique_id: str) -> str:
    """``<topic>-<partition>.<unique_id>-delete``: a partition directory awaiting deletion."""
    return f"{topic_partition_dir_name(topic, partition)}.{unique_id}{DELETE_DIR_SUFFIX}"


def parse_topic_partition_name(dir_name: str) -> tuple[str, int]:
    """``(topic, partition)`` from ``<topic>-<partition>`` or its ``.<id>-delete`` form.

    The partition is what follows the last '-', so ``my-topic-3`` is ``("my-topic", 3)``.
    Raises ``ValueError`` for a directory that is not a partition log.
    """
    error = ValueError(
        f"directory {dir_name!r} is not in the form topic-partition or "
        f"topic-partition.uniqueId{DELETE_DIR_SUFFIX}; log dirs may only hold topic data"
    )
    name = dir_name
    if name.endswith(DELETE_DIR_SUFFIX):
        if not _DELETE_DIR_PATTERN.match(name):
            raise error
        name = name[: name.rindex(".")]
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not _PARTITION_PATTERN.match(partition):
        raise error
    return topic, int(partition)
