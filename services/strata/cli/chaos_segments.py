"""Segment damage and replica reads: the fault campaign's work on a broker's log files.

Owns two things done to the ``<topic>-<partition>/`` directories of a broker's ``log.dirs``
(formats: ``strata.storage``), always while that broker is stopped:

* ``damage_tail`` — what a crash may leave behind, on one partition's active (last) segment:

  - after kill -9 (``clean=False``), only bytes past the partition's recovery point (what
    ``recovery-point-offset-checkpoint`` says was fsynced) are touched, i.e. only what an OS
    crash could lose or tear: ``truncate`` cuts the file at a random byte inside that region (a
    torn write), ``corrupt`` flips one byte inside a batch's CRC-covered range there. Recovery
    (scan, CRC, truncate at the first bad batch) must repair both; the lost tail is acknowledged
    data only this replica held a copy of.
  - after SIGTERM (``clean=True``), the last 1-5 whole batches are cut (a replica that lost
    fsynced, acknowledged data) and the dir's ``.kafka_cleanshutdown`` marker removed, so the
    broker recovers the log instead of trusting its indexes. The cluster must repair this
    replica from the ISR without losing anything (RF 3, ``min.insync.replicas`` 2).

* ``read_replica`` — every record of one replica below a given offset, decoded from its
  segments with ``strata.storage``'s batch and record grammar (the divergence check), and
  ``batch_writers`` — the producer id, epoch and sequence each of those records was written
  with (the duplicate and sequence checks).

The caller (``chaos_nemesis``) passes as ``eligible`` only partitions whose ISR holds another
broker than the damaged one: Kafka's promise is that an acknowledged record survives while one
in-sync replica keeps it intact, so damaging the only in-sync copy would test nothing Kafka
promises (measured: after ``term-all`` the ISR is briefly the one broker that stopped last).

Nothing here runs against a live broker's files except ``read_replica`` after the campaign
stopped every broker. ``random.Random`` is passed in so a run is reproducible from its seed.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from strata.storage import log_file_names as names
from strata.storage import record_batch as rb
from strata.storage.checkpoints import OffsetCheckpointFile
from strata.storage.errors import StorageError
from strata.storage.log_manager import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT
from strata.storage.records import iter_records

CRC_COVERED_FROM = 21  # RecordBatch v2: the CRC32C covers attributes (byte 21) to the end


@dataclass(frozen=True)
class BatchPlace:
    position: int
    base_offset: int
    size: int


def partition_dirs(log_dir: Path, topic: str) -> dict[int, Path]:
    """The topic's partition directories in one log dir, by partition."""
    out: dict[int, Path] = {}
    if not log_dir.is_dir():
        return out
    for path in log_dir.iterdir():
        if not path.is_dir():
            continue
        try:
            name, partition = names.parse_topic_partition_name(path.name)
        except (ValueError, StorageError):
            continue
        if name == topic and path.name == names.topic_partition_dir_name(name, partition):
            out[partition] = path  # not a ``<topic>-<p>.<id>-delete`` dir awaiting deletion
    return out


def segment_files(partition_dir: Path) -> list[Path]:
    """The ``.log`` files of a partition, by base offset."""
    logs = [p for p in partition_dir.iterdir() if p.name.endswith(names.LOG_FILE_SUFFIX)]
    return sorted(logs, key=lambda p: names.offset_from_file_name(p.name))


def whole_batches(data: bytes) -> list[BatchPlace]:
    """The whole batches at the start of a segment's bytes (stops at a partial or bad header)."""
    out: list[BatchPlace] = []
    pos = 0
    while pos < len(data):
        if rb.peek_size(data, pos) is None:
            break
        try:
            header = rb.parse_header(data, pos)
        except (StorageError, ValueError):
            break
        if header.size <= 0 or pos + header.size > len(data):
            break
        out.append(BatchPlace(pos, header.base_offset, header.size))
        pos += header.size
    return out


def recovery_point(log_dir: Path, topic: str, partition: int) -> int:
    try:
        points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
    except (OSError, StorageError):
        return 0
    return points.get((topic, partition), 0)


def damage_tail(log_dir: Path, topic: str, rng: random.Random, *, clean: bool,
                mode: str = "truncate", eligible: Collection[int] | None = None) -> str:
    """Damage the active segment of one of ``topic``'s partitions (see the module docstring),
    only among ``eligible`` partitions when given; returns what was done, or why nothing was."""
    candidates = []
    for partition, path in sorted(partition_dirs(log_dir, topic).items()):
        if eligible is not None and partition not in eligible:
            continue
        segments = segment_files(path)
        if segments and segments[-1].stat().st_size > 0:
            candidates.append((partition, segments[-1]))
    if not candidates:
        return "no eligible non-empty segment to damage"
    partition, segment = rng.choice(candidates)
    data = segment.read_bytes()
    batches = whole_batches(data)
    where = f"{segment.parent.name}/{segment.name} ({len(data)} bytes)"
    if clean:
        if not batches:
            return f"{where}: no whole batch to cut"
        cut = rng.randint(1, min(5, len(batches)))
        keep = batches[-cut].position
        with segment.open("r+b") as f:
            f.truncate(keep)
        (log_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        return (f"{where}: cut the last {cut} whole batch(es) from offset "
                f"{batches[-cut].base_offset} (byte {keep}); clean-shutdown marker removed")
    point = recovery_point(log_dir, topic, partition)
    unflushed = [b for b in batches if b.base_offset >= point]
    torn_from = unflushed[0].position if unflushed else (
        batches[-1].position + batches[-1].size if batches else 0)
    if torn_from >= len(data):
        return f"{where}: nothing past recovery point {point}; left intact"
    if mode == "corrupt" and unflushed:
        victim = rng.choice(unflushed)
        at = rng.randrange(victim.position + CRC_COVERED_FROM, victim.position + victim.size)
        with segment.open("r+b") as f:
            f.seek(at)
            f.write(bytes([data[at] ^ 0xFF]))
        return (f"{where}: flipped byte {at} in the batch at offset {victim.base_offset} "
                f"(recovery point {point})")
    cut_at = rng.randrange(torn_from, len(data))
    with segment.open("r+b") as f:
        f.truncate(cut_at)
    return f"{where}: torn at byte {cut_at} of {len(data)} (recovery point {point})"


def read_replica(partition_dir: Path, below: int) -> dict[int, bytes | None]:
    """offset -> value of every record below ``below`` in a replica's segments (whole, CRC-valid
    batches only: a bad batch ends the read, as recovery would)."""
    out: dict[int, bytes | None] = {}
    for segment in segment_files(partition_dir):
        data = segment.read_bytes()
        for batch in whole_batches(data):
            if batch.base_offset >= below:
                return out
            try:
                for record in iter_records(data, batch.position):
                    if record.offset < below:
                        out[record.offset] = record.value
            except StorageError:
                return out
    return out


def batch_writers(partition_dir: Path, below: int) -> dict[int, tuple[int, int, int]]:
    """offset -> (producer id, producer epoch, sequence) of every record below ``below`` in a
    replica's segments, from the batch headers (whole, CRC-valid batches only, as
    ``read_replica``; -1s for a batch written without a producer id): what tells a client's
    re-send under a new producer epoch from a broker's missed duplicate, and what the
    per-epoch sequence check reads."""
    out: dict[int, tuple[int, int, int]] = {}
    for segment in segment_files(partition_dir):
        data = segment.read_bytes()
        for batch in whole_batches(data):
            if batch.base_offset >= below:
                return out
            header = rb.parse_header(data, batch.position)
            if not rb.is_valid_crc(data, batch.position, header):
                return out
            sequenced = header.base_sequence >= 0
            for offset in range(batch.base_offset, min(header.last_offset + 1, below)):
                sequence = header.base_sequence + offset - batch.base_offset if sequenced else -1
                out[offset] = (header.producer_id, header.producer_epoch, sequence)
    return out
