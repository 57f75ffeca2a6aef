"""Startup of one partition log: finish interrupted swaps, recover, rebuild state (LogLoader).

Owns the load phase only; it *returns* a ready ``Log``. Steps, in order:

1. Finish or roll back an interrupted cleaner swap (``.cleaned`` / ``.swap`` / ``.deleted``
   files, see ``cleaner.complete_swaps``) so exactly one copy of every offset remains.
2. Delete index files whose ``.log`` is gone; open every segment (``.log`` names sort by base
   offset); every segment but the last opens its ``.log`` lazily (no descriptor until read, then one
   borrowed from the bounded pool of ``descriptor_pool``).
3. Recovery. After an unclean shutdown every segment from the one holding the recovery point
   to the end is scanned: size, framing and CRC of each batch; at the first bad batch the
   segment is truncated there and every later segment deleted (that is the unflushed tail a
   crash may leave). Indexes of recovered segments are rebuilt. After a clean shutdown nothing
   is scanned in full, but the disk may still have been damaged since: the last
   segment's tail - every batch from its last offset index entry to the end, at most about
   ``index.interval.bytes`` plus one append - is CRC-checked and must end exactly at the end
   of the file (``LogSegment.check_tail``); if it does not, that segment is recovered like
   after a crash (a torn last batch or appended garbage is cut). Any segment whose index fails
   its sanity check is recovered (rebuilt); when that cuts bytes off a segment that was
   already flushed, the later segments are kept (Kafka's rule for a segment with a corrupt
   index: only the damaged tail of that segment is lost) and one error names the cut.
   Damage the cheap checks cannot see (a bad CRC in the middle of a segment after a clean
   shutdown) is served as it is: reads answer it with a Kafka error, clients check CRCs.
4. ``log_start_offset`` is at least the first segment's base; the leader-epoch cache is trimmed
   to [log_start_offset, log_end_offset); producer state is loaded from the newest snapshot and
   replayed from the batches after it; the high watermark is the caller's checkpointed one
   (``replication-offset-checkpoint``) clamped into the log, or the log start offset.
   A recovered segment's ``.txnindex`` was emptied by its recovery: snapshots above the first
   recovered segment's base are dropped so the replay covers every recovered segment, and the
   replay writes each aborted transaction whose marker lies in a recovered segment back into
   that segment's index - the same entries, with the same last stable offsets, since the open
   transactions the replay starts from come from the snapshot (Kafka's ``LogLoader``
   rebuilding producer state through ``LogSegment.recover``). A ``.txnindex`` that fails its
   sanity check gets its segment recovered the same way.

Invariant on return: every byte of every segment is a whole, CRC-valid batch (for the scanned
range and the last segment's tail), offsets are increasing, and the log end offset is the last
batch's next offset. A ``load_log`` that raises (a file that cannot be opened or read) has
closed every file it opened; the caller takes that one partition offline.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from strata.storage import log_file_names as names
from strata.storage.abstract_index import CorruptIndexError
from strata.storage.clock import Clock
from strata.storage.leader_epoch_cache import LeaderEpochFileCache
from strata.storage.log import Log
from strata.storage.log_config import LogConfig
from strata.storage.log_roll import segment_config
from strata.storage.log_segment import LogSegment
from strata.storage.log_transactions import index_aborted_txn
from strata.storage.producer_state import CompletedTxn, ProducerStateManager
from strata.storage.record_batch import BatchHeader
from strata.storage.segment_swap import complete_swaps

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


def load_log(
    dir: Path,
    config: LogConfig,
    clock: Clock,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    high_watermark: int | None = None,
    had_clean_shutdown: bool = False,
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    on_storage_error: Callable[[Path, BaseException], None] | None = None,
) -> Log:
    """Open (creating if absent) and recover the log in ``dir``."""
    dir.mkdir(parents=True, exist_ok=True)
    complete_swaps(dir)
    now = clock.milliseconds()
    seg_cfg = segment_config(config)
    _delete_orphan_indexes(dir)
    bases = sorted(
        names.offset_from_file_name(p.name) for p in dir.iterdir()
        if p.name.endswith(names.LOG_FILE_SUFFIX)
    )
    segments: list[LogSegment] = []
    try:
        for i, b in enumerate(bases):  # inactive segments open their .log on first use
            segments.append(LogSegment.open(dir, b, seg_cfg, now_ms=now,
                                            file_already_exists=True,
                                            lazy=i < len(bases) - 1))
        return _load(dir, config, clock, segments, recovery_point, log_start_offset,
                     high_watermark, had_clean_shutdown, producer_id_expiration_ms,
                     on_storage_error)
    except BaseException:
        for seg in segments:
            with contextlib.suppress(Exception):
                seg.release()
        raise


def _load(
    dir: Path,
    config: LogConfig,
    clock: Clock,
    segments: list[LogSegment],
    recovery_point: int,
    log_start_offset: int,
    high_watermark: int | None,
    had_clean_shutdown: bool,
    producer_id_expiration_ms: int,
    on_storage_error: Callable[[Path, BaseException], None] | None,
) -> Log:
    now = clock.milliseconds()
    seg_cfg = segment_config(config)
    epoch_cache = LeaderEpochFileCache(dir / LEADER_EPOCH_CHECKPOINT)

    def on_batch(header: BatchHeader) -> None:
        epoch = header.partition_leader_epoch
        latest = epoch_cache.latest_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            epoch_cache.assign(epoch, header.base_offset)

    if epoch_cache.checkpoint_corrupt:  # rebuilt from the batches by a full scan
        logger.warning("corrupt %s in %s: full recovery", LEADER_EPOCH_CHECKPOINT, dir)
        had_clean_shutdown, recovery_point = False, 0
    recovered: set[int] = set()
    if segments:
        segments = _recover(dir, segments, recovery_point, had_clean_shutdown, on_batch,
                            recovered)
    else:
        segments = [LogSegment.open(dir, log_start_offset, seg_cfg, now_ms=now)]
    log_end = segments[-1].read_next_offset()
    start = min(max(log_start_offset, segments[0].base_offset), log_end)
    epoch_cache.truncate_from_end(log_end)
    epoch_cache.truncate_from_start(start)

    producer_state = ProducerStateManager(dir, producer_id_expiration_ms)
    if recovered:
        producer_state.delete_snapshots_above(min(recovered))
    producer_state.truncate_and_reload(start, log_end)

    log = Log(
        dir, config, clock, segments,
        log_start_offset=start,
        recovery_point=min(recovery_point, log_end) if not had_clean_shutdown else log_end,
        leader_epoch_cache=epoch_cache,
        producer_state=producer_state,
        on_storage_error=on_storage_error,
    )
    def on_completed(completed: CompletedTxn) -> None:
        if recovered and completed.is_aborted:
            index_aborted_txn(segments, completed, only=recovered)

    log.rebuild_producer_state(on_completed)
    # The checkpointed HW (none: the log start offset), never the log end offset: an
    # unreplicated tail must not count as committed after a restart.
    log.update_high_watermark(start if high_watermark is None else high_watermark)
    return log


def _recover(
    dir: Path,
    segments: list[LogSegment],
    recovery_point: int,
    had_clean_shutdown: bool,
    on_batch: Callable[[BatchHeader], None],
    recovered: set[int],
) -> list[LogSegment]:
    """Step 3 of the module docstring: scan what may be unflushed, dropping everything after
    its first bad batch; check the rest cheaply, recovering only what fails. The base offsets
    of the recovered segments are added to ``recovered``."""
    last = len(segments) - 1
    for i, seg in enumerate(segments):
        nxt = segments[i + 1].base_offset if i < last else None
        unflushed = not had_clean_shutdown and (nxt is None or nxt > recovery_point)
        if unflushed:
            recovered.add(seg.base_offset)
            truncated = seg.recover(on_batch)
            if truncated > 0:
                logger.warning("recovery of %s truncated %d invalid bytes; deleting %d later "
                               "segment(s)", seg.log.path, truncated, last - i)
                for later in segments[i + 1:]:
                    later.delete()
                return segments[: i + 1]
            continue
        try:
            seg.offset_index.sanity_check()
            seg.time_index.sanity_check()
            seg.txn_index.sanity_check()
        except CorruptIndexError as exc:
            logger.warning("rebuilding indexes of %s: %s", seg.log.path, exc)
        else:
            damage = seg.check_tail() if i == last else None
            if damage is None:
                continue
            logger.warning("%s is damaged after a clean shutdown (%s): recovering it",
                           seg.log.path, damage)
        recovered.add(seg.base_offset)
        truncated = seg.recover(on_batch if i == last else None)
        if truncated > 0 and i < last:
            logger.error("%s was damaged on disk: cut %d bytes after offset %d; the offsets "
                         "up to %d are lost (later segments kept)", seg.log.path, truncated,
                         seg.read_next_offset() - 1, segments[i + 1].base_offset - 1)
    return segments


def _delete_orphan_indexes(dir: Path) -> None:
    logs = {p.stem for p in dir.iterdir() if p.name.endswith(names.LOG_FILE_SUFFIX)}
    for p in dir.iterdir():
        if p.name.endswith((names.INDEX_FILE_SUFFIX, names.TIME_INDEX_FILE_SUFFIX,
                            names.TXN_INDEX_FILE_SUFFIX)) and \
                p.stem not in logs:
            p.unlink()
