"""The future replica of a partition moving between two ``log.dirs`` of one broker.

Kafka's AlterReplicaLogDirs (KIP-113): the *future log* is a second ``Log`` of the partition in
the destination dir, ``<topic>-<partition>.<unique id>-future``, that copies the *current* log
and keeps catching up with the appends that keep arriving, like a follower of a local leader
(Kafka's ``ReplicaAlterLogDirsThread``). When it holds everything the current log holds it is
swapped in (``LogManager.replace_current_with_future_log``) and the current directory is renamed
``-delete`` and removed later.

This module owns:

* ``next_step`` (pure): given both logs' offsets, what the mover does next: restart the future
  log empty at the current log start offset (the current log's retention or DeleteRecords passed
  everything copied so far), truncate it (the current log was truncated below what was copied:
  a follower's divergence, found as KIP-101 does, by the end offset of the future's latest
  leader epoch in the current log), copy from its log end offset, or swap;
* ``copy_batches``: append whole batches read from the current log to the future log as a
  follower does (offsets, leader epochs and producer state kept; the leader-epoch cache and the
  producer state are rebuilt batch by batch);
* ``promote``: the swap's file work, with every append of the partition stopped (its caller runs
  it on the event loop, the owner thread of every append, in one step with no await): the
  current log's producer state (snapshot at its log end offset), leader-epoch cache and the
  other files of its dir not named after an offset (the broker's ``partition.metadata``) are
  carried over, the current dir is renamed ``-delete`` *before* the future dir takes the
  partition's name (a crash between the two renames leaves a ``-future`` dir and no current
  one: the next startup makes it the current log, ``LogManager.startup``), and the log is
  reopened from its new path with the current log's start offset and high watermark;
* ``settle_future_dirs``: the startup rule for ``-future`` dirs (discard, or promote after a
  crash inside ``promote``); ``close_abandoned``: closing a future log a mover may be using;
  ``SwappedOutLogs``: the replaced logs until their delayed removal.

Invariant: the future log is written only by the one mover of its partition (a worker thread
while copying, the event loop for the swap); nothing else reads it except DescribeLogDirs
(its size and log end offset).
"""

from __future__ import annotations

import enum
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from strata.storage import log_file_names as names
from strata.storage import record_batch as rb
from strata.storage.log import Log
from strata.storage.log_results import FetchDataInfo

logger = logging.getLogger(__name__)

__all__ = ["Action", "Positions", "Step", "SwappedOutLogs", "close_abandoned", "copy_batches",
           "discard", "flush_future", "next_step", "promote", "settle_future_dirs"]


class Action(enum.Enum):
    COPY = "copy"  # append the current log's batches from ``offset`` to the future log
    TRUNCATE = "truncate"  # remove the future log's offsets at and above ``offset``
    RESTART = "restart"  # drop the future log's segments and restart it empty at ``offset``
    SWAP = "swap"  # the future log holds every offset of the current log: swap it in


@dataclass(frozen=True, slots=True)
class Step:
    action: Action
    offset: int


@dataclass(frozen=True, slots=True)
class Positions:
    """Both logs' offsets as the mover sees them before its next step."""

    current_log_start_offset: int
    current_log_end_offset: int
    future_log_start_offset: int
    future_log_end_offset: int
    # (epoch, end offset) that the current log answers for the future log's latest leader
    # epoch (``Log.end_offset_for_epoch``); None while the future log holds no epoch.
    current_end_for_future_epoch: tuple[int, int] | None = None


def next_step(p: Positions) -> Step:
    """What the mover does next (see the module docstring); pure."""
    restart = Step(Action.RESTART, p.current_log_start_offset)
    if p.future_log_end_offset < p.current_log_start_offset or \
            p.future_log_start_offset > p.current_log_end_offset:
        return restart  # nothing copied is still in the current log (or it starts later)
    cut = min(p.future_log_end_offset, p.current_log_end_offset)
    if p.current_end_for_future_epoch is not None:
        epoch, end = p.current_end_for_future_epoch
        if epoch < 0 or end < 0:
            return restart  # the current log knows no epoch at or below the future's first
        cut = min(cut, end)
    if cut < p.future_log_end_offset:
        if cut < p.future_log_start_offset:
            return restart
        return Step(Action.TRUNCATE, cut)
    if p.future_log_end_offset < p.current_log_end_offset:
        return Step(Action.COPY, p.future_log_end_offset)
    return Step(Action.SWAP, p.future_log_end_offset)


def positions(current: Log, future: Log) -> Positions:
    """The ``Positions`` of two live logs (read on the thread that appends to ``current``)."""
    epoch = future.latest_epoch
    return Positions(
        current.log_start_offset, current.log_end_offset,
        future.log_start_offset, future.log_end_offset,
        None if epoch is None else current.end_offset_for_epoch(epoch))


def copy_batches(future: Log, data: FetchDataInfo) -> int:
    """Append the whole batches of one read of the current log to the future log; returns the
    bytes appended. Blocking file I/O: the mover runs it in a worker thread."""
    records = rb.whole_batches(data.read_bytes())
    if records.nbytes:
        future.append_as_follower(records)
    return records.nbytes


def flush_future(future: Log) -> None:
    """fsync the future log, unless it was given up (``close_abandoned``) meanwhile: under its
    lock, so that a closed file descriptor is never fsynced (a failed fsync takes the log dir
    offline). Blocking: the mover runs it in a worker thread."""
    with future.lock:
        if not future.offline:
            future.flush()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def promote(current: Log, future: Log, load: Callable[[Path], Log]) -> tuple[Log, Path]:
    """Swap ``future`` in for ``current`` on disk; returns the reopened log (``load(path)`` of
    the future dir under the partition's own name) and where the current dir went (renamed
    ``-delete``: its files stay open until the caller closes ``current`` and removes it).

    The caller holds every append of the partition off until it has replaced ``current`` by the
    returned log everywhere, and ``future`` holds exactly the current log's offsets."""
    if future.log_end_offset != current.log_end_offset:
        raise ValueError(f"future log {future.dir} ends at {future.log_end_offset}, the current "
                         f"log at {current.log_end_offset}: not caught up")
    end = current.log_end_offset
    topic, partition = names.parse_topic_partition_name(current.dir.name)
    # The leader-epoch cache and the producer state as the current log has them (an epoch
    # without batches, producers whose batches retention already removed).
    future.leader_epoch_cache.clear_and_flush()
    for entry in current.leader_epoch_cache.epoch_entries():
        future.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
    current.producer_state.take_snapshot(end)
    future.close()  # trims indexes, writes its own producer snapshot at ``end``
    snapshot = names.producer_snapshot_file(current.dir, end)
    if snapshot.exists():
        shutil.copyfile(snapshot, names.producer_snapshot_file(future.dir, end))
    for extra in current.dir.iterdir():  # e.g. the broker's ``partition.metadata`` (topic id)
        if extra.is_file() and not extra.name[:1].isdigit() and \
                not (future.dir / extra.name).exists():
            shutil.copyfile(extra, future.dir / extra.name)
    doomed = current.dir.with_name(
        names.log_delete_dir_name(topic, partition, uuid.uuid4().hex))
    final = future.dir.with_name(names.topic_partition_dir_name(topic, partition))
    current.dir.rename(doomed)
    for segment in current.segments:  # a reader still holding ``current`` opens lazy files
        for file in (segment.log, segment.offset_index, segment.time_index):
            file.path = doomed / file.path.name
    future.dir.rename(final)
    _fsync_dir(doomed.parent)
    _fsync_dir(final.parent)
    return load(final), doomed


def close_abandoned(future: Log) -> None:
    """Close a future log that is given up. Under its lock and marked offline first: a mover's
    copy step in a worker thread finishes before, or fails cleanly after (it never writes to a
    closed, maybe reused, file descriptor)."""
    with future.lock:
        future.offline = True
        future.close()


def discard(future: Log) -> None:
    """Give a future log up: close it (``close_abandoned``), rename its dir ``-delete`` and
    remove it. A dir that cannot be renamed (it went offline) is left for the next startup."""
    close_abandoned(future)
    topic, partition = names.parse_topic_partition_name(future.dir.name)
    doomed = future.dir.with_name(names.log_delete_dir_name(topic, partition, uuid.uuid4().hex))
    try:
        future.dir.rename(doomed)
    except OSError as exc:
        logger.error("cannot remove the future log %s: %s", future.dir, exc)
        return
    shutil.rmtree(doomed, ignore_errors=True)


def settle_future_dirs(futures: Sequence[Path], current: set[tuple[str, int]],
                       interrupted: dict[tuple[str, int], Path] | None = None) -> list[Path]:
    """Startup: remove each ``-future`` dir whose partition has a current dir (``current``:
    the partitions found), noting its destination in ``interrupted`` so that the move starts
    again once the partition is hosted, and rename the others to the partition's name (a crash
    between ``promote``'s two renames: the current dir is already ``-delete``, the future one
    holds every offset). Returns the renamed dirs, now partition logs."""
    promoted = []
    for future in futures:
        tp = names.parse_topic_partition_name(future.name)
        if tp in current:
            logger.info("the move of %s-%d to %s was cut off: it starts again", *tp,
                        future.parent)
            shutil.rmtree(future, ignore_errors=True)
            if interrupted is not None:
                interrupted[tp] = future.parent
            continue
        final = future.with_name(names.topic_partition_dir_name(*tp))
        logger.warning("%s-%d: the future log %s replaces a current log removed by an "
                       "interrupted swap", *tp, future)
        future.rename(final)
        current.add(tp)
        promoted.append(final)
    return promoted


class SwappedOutLogs:
    """Logs a swap replaced, their dirs renamed ``-delete``: kept open until a delay passed
    (a read may still hold their segments), then released and removed. Owner: the LogManager.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[int, Log]] = []

    def schedule(self, log: Log, due_ms: int) -> None:
        self._pending.append((due_ms, log))

    def delete_due(self, now_ms: int, force: bool = False) -> int:
        """Release and remove the logs due at ``now_ms`` (all with ``force``); how many."""
        due = [log for when, log in self._pending if force or when <= now_ms]
        self._pending = [(when, log) for when, log in self._pending
                         if not force and when > now_ms]
        for log in due:  # by file descriptor, never by path: the partition may be back there
            for segment in log.segments:
                segment.release()
            shutil.rmtree(log.dir, ignore_errors=True)
        return len(due)
