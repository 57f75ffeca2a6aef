"""Segments damaged on disk *after a clean shutdown*: the marker must not let a torn
or garbage tail stop the broker. The last segment's tail is validated and recovered; a log that
cannot be loaded at all is taken offline alone; damage in an older segment neither stops the
load nor breaks reads."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import pytest

from strata.storage import record_batch as rb
from strata.storage.clock import ManualClock
from strata.storage.errors import KafkaStorageError, StorageError
from strata.storage.log import Log
from strata.storage.log_manager import LogManager
from strata.storage.records import RecordSpec, build_batch, iter_records

TOPIC = "t"


def batch(i: int) -> bytes:
    return build_batch([RecordSpec(key=b"k%d" % i, value=b"value-%03d" % i * 8,
                                   timestamp=1_000 + i)])


def manager(data: Path, **config: str) -> LogManager:
    props = {"log.index.interval.bytes": "64",
             **{k.replace("_", "."): v for k, v in config.items()}}
    lm = LogManager([data], props, ManualClock(),
                    cluster_id="c-1", node_id=1)
    lm.startup()
    return lm


def build(data: Path, partitions: int = 2, batches: int = 12, **config: str) -> None:
    """``partitions`` logs of ``batches`` one-record batches, then a clean shutdown."""
    lm = manager(data, **config)
    for p in range(partitions):
        log = lm.get_or_create_log(TOPIC, p)
        for i in range(batches):
            log.append_as_leader(batch(i), leader_epoch=0)
    lm.shutdown()


def readable_offsets(log: Log, start: int | None = None) -> list[int]:
    """Every record offset a consumer reading from ``start`` (default: the log start) gets:
    stops at a read error, which must be a ``StorageError``, never anything else."""
    out: list[int] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        try:
            data = log.read(offset, 1 << 20).read_bytes()
        except StorageError:
            break
        pos, got = 0, []
        while (size := rb.peek_size(data, pos)) is not None and pos + size <= len(data):
            with contextlib.suppress(StorageError):  # a bad CRC: a client's CORRUPT_MESSAGE
                got.extend(r.offset for r in iter_records(data, pos))
            pos += size
        if not got:
            break
        out.extend(got)
        offset = got[-1] + 1
    return out


def last_log(data: Path, partition: int = 0) -> Path:
    return sorted((data / f"{TOPIC}-{partition}").glob("*.log"))[-1]


def batch_positions(path: Path) -> list[tuple[int, rb.BatchHeader]]:
    return list(rb.iter_headers(path.read_bytes()))


def corrupt_crc(path: Path, index: int) -> rb.BatchHeader:
    """Flip the last byte of batch ``index`` of a ``.log``: framing intact, CRC wrong."""
    position, header = batch_positions(path)[index]
    raw = bytearray(path.read_bytes())
    raw[position + header.size - 1] ^= 0xFF
    path.write_bytes(bytes(raw))
    return header


def assert_loads_whole(data: Path, log_end_offset: int) -> None:
    """Partition 0 loads ending at ``log_end_offset``, every offset below it readable."""
    lm = manager(data)
    log = lm.get_log(TOPIC, 0)
    assert log is not None and log.log_end_offset == log_end_offset
    assert readable_offsets(log) == list(range(log_end_offset))
    lm.shutdown()


def test_torn_last_batch_after_clean_shutdown_is_recovered(tmp_path: Path) -> None:
    build(tmp_path)
    seg = last_log(tmp_path)
    position, last = batch_positions(seg)[-1]
    os.truncate(seg, position + last.size // 2)  # "record batch truncated: 97 of 195 bytes"
    lm = manager(tmp_path)
    log = lm.get_log(TOPIC, 0)
    assert log is not None and log.log_end_offset == last.base_offset
    assert readable_offsets(log) == list(range(last.base_offset))
    assert log.append_as_leader(batch(99), leader_epoch=1).first_offset == last.base_offset
    other = lm.get_log(TOPIC, 1)
    assert other is not None and other.log_end_offset == 12
    lm.shutdown()


@pytest.mark.parametrize("garbage", [b"\x00" * 40, os.urandom(300), b"\xff" * 5])
def test_garbage_appended_after_clean_shutdown_is_cut(tmp_path: Path, garbage: bytes) -> None:
    build(tmp_path)
    seg = last_log(tmp_path)
    with seg.open("ab") as f:
        f.write(garbage)
    assert_loads_whole(tmp_path, 12)


def test_bad_crc_in_the_last_batch_is_cut(tmp_path: Path) -> None:
    build(tmp_path)
    seg = last_log(tmp_path)
    last = corrupt_crc(seg, -1)
    lm = manager(tmp_path)
    log = lm.get_log(TOPIC, 0)
    assert log is not None and log.log_end_offset == last.base_offset
    lm.shutdown()


def test_bad_crc_in_the_middle_of_the_last_segment_still_loads(tmp_path: Path) -> None:
    build(tmp_path, batches=40)
    seg = last_log(tmp_path)
    middle = corrupt_crc(seg, 3)
    lm = manager(tmp_path)
    log = lm.get_log(TOPIC, 0)
    assert log is not None and log.log_end_offset == 40  # nothing acknowledged is cut
    offsets = readable_offsets(log)
    assert 0 in offsets and 39 in offsets and middle.base_offset not in offsets
    lm.shutdown()


@pytest.mark.parametrize("damage", ["truncate", "delete", "zero", "garbage"])
def test_damaged_index_after_clean_shutdown_is_rebuilt(tmp_path: Path, damage: str) -> None:
    build(tmp_path, log_segment_bytes="700")
    for index in (tmp_path / f"{TOPIC}-0").glob("*.index"):
        if damage == "truncate":
            os.truncate(index, 3)
        elif damage == "delete":
            index.unlink()
        elif damage == "zero":
            index.write_bytes(bytes(64))
        else:
            index.write_bytes(b"\x7f" * 64)
    assert_loads_whole(tmp_path, 12)


def test_zero_length_last_log_loads_empty_tail(tmp_path: Path) -> None:
    build(tmp_path, log_segment_bytes="700")
    segments = sorted((tmp_path / f"{TOPIC}-0").glob("*.log"))
    assert len(segments) > 1
    os.truncate(segments[-1], 0)
    lm = manager(tmp_path)
    log = lm.get_log(TOPIC, 0)
    assert log is not None
    assert log.log_end_offset == int(segments[-1].stem)
    assert readable_offsets(log) == list(range(int(segments[-1].stem)))
    log.append_as_leader(batch(1), leader_epoch=0)
    lm.shutdown()


def test_missing_log_file_drops_only_its_indexes(tmp_path: Path) -> None:
    build(tmp_path, log_segment_bytes="700")
    segments = sorted((tmp_path / f"{TOPIC}-0").glob("*.log"))
    segments[-1].unlink()
    assert_loads_whole(tmp_path, int(segments[-1].stem))


@pytest.mark.parametrize("damage", ["torn", "garbage", "crc", "empty"])
def test_damage_in_an_older_segment_does_not_stop_the_load(tmp_path: Path, damage: str) -> None:
    build(tmp_path, log_segment_bytes="700", batches=20)
    segments = sorted((tmp_path / f"{TOPIC}-0").glob("*.log"))
    assert len(segments) >= 3
    old = segments[0]
    positions = batch_positions(old)
    position, last = positions[-1]
    if damage == "torn":
        os.truncate(old, position + 7)
    elif damage == "garbage":
        raw = bytearray(old.read_bytes())
        raw[positions[1][0]: positions[1][0] + 12] = b"\xee" * 12  # framing of batch 1 broken
        old.write_bytes(bytes(raw))
    elif damage == "crc":
        raw = bytearray(old.read_bytes())
        raw[position + last.size - 1] ^= 0xFF
        old.write_bytes(bytes(raw))
    else:
        os.truncate(old, 0)
    lm = manager(tmp_path)
    log = lm.get_log(TOPIC, 0)
    assert log is not None and log.log_end_offset == 20  # later segments are kept
    for offset in range(20):  # no read crashes: data, or a Kafka error
        with contextlib.suppress(StorageError):
            log.read(offset, 1 << 20)
    later = int(segments[1].stem)
    assert readable_offsets(log, later) == list(range(later, 20))
    lm.shutdown()


def test_unloadable_partition_goes_offline_alone(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    build(tmp_path, partitions=3)
    part = tmp_path / f"{TOPIC}-1"
    seg = last_log(tmp_path, 1)
    seg.unlink()
    seg.mkdir()  # a .log that is a directory: cannot be opened, cannot be recovered
    with caplog.at_level(logging.ERROR):
        lm = manager(tmp_path)
    assert lm.get_log(TOPIC, 1) is None
    assert (TOPIC, 1) in lm.offline_partitions
    with pytest.raises(KafkaStorageError):
        lm.get_or_create_log(TOPIC, 1)
    assert part.exists()  # left alone for an operator (or re-replication)
    for p in (0, 2):
        log = lm.get_log(TOPIC, p)
        assert log is not None and log.log_end_offset == 12
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None
    assert f"{TOPIC}-1" in errors[0].getMessage()
    lm.shutdown()
