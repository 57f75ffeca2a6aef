"""FileRecords (.log): appends that survive only whole, preads, slices, batch scans with CRC,
disk errors (ENOSPC/EIO) that leave no partial batch behind, truncation, renames."""

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from strata.storage import record_batch as rb
from strata.storage.errors import CorruptRecordError, KafkaStorageError
from strata.storage.file_records import FileRecords, FileSlice
from strata.storage.records import RecordSpec, build_batch


def batch(base_offset: int, count: int = 2, ts: int = 1000, value: bytes = b"value") -> bytes:
    return build_batch(
        [RecordSpec(key=b"k", value=value, timestamp=ts + i) for i in range(count)],
        base_offset=base_offset,
    )


@pytest.fixture
def records(tmp_path: Path) -> Iterator[FileRecords]:
    fr = FileRecords.open(tmp_path / "00000000000000000000.log")
    yield fr
    fr.close()


def fill(fr: FileRecords, n: int = 3) -> list[bytes]:
    batches = [batch(i * 10, count=i + 1, ts=1000 * (i + 1)) for i in range(n)]
    for b in batches:
        fr.append(b)
    return batches


def test_append_read_and_slice(records: FileRecords) -> None:
    batches = fill(records)
    data = b"".join(batches)
    assert records.size_in_bytes == len(data) == records.path.stat().st_size
    assert records.read(0, len(data)) == data
    assert records.read(len(batches[0]), 10**6) == data[len(batches[0]):]
    assert records.read(len(data), 10) == b""
    piece = records.slice(5, 20)
    assert piece == FileSlice(records.fd, 5, 20)
    assert piece.read_bytes() == data[5:25]
    assert records.slice(10, 10**6).length == len(data) - 10  # clamped to the end
    assert records.slice(len(data), 5).length == 0
    with pytest.raises(ValueError):
        records.slice(len(data) + 1, 1)
    with pytest.raises(ValueError):
        records.read(-1, 1)
    assert records.append(b"") == 0


def test_batches_positions_and_headers(records: FileRecords) -> None:
    batches = fill(records)
    found = list(records.batches())
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [p for p, _ in found] == positions
    assert [h.base_offset for _, h in found] == [0, 10, 20]
    assert [h.last_offset for _, h in found] == [0, 11, 22]
    assert [h.size for _, h in found] == [len(b) for b in batches]
    assert list(records.batches(verify_crc=True)) == found
    assert list(records.batches(positions[2])) == found[2:]
    assert list(records.batches(records.size_in_bytes)) == []


def test_batches_with_small_read_chunks(records: FileRecords,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("strata.storage.file_records.READ_CHUNK", 7)
    batches = fill(records, 5)
    assert [h.base_offset for _, h in records.batches(verify_crc=True)] == [0, 10, 20, 30, 40]
    assert len(list(records.batches())) == len(batches)


def test_batches_raise_on_truncated_tail_at_every_length(tmp_path: Path) -> None:
    first, last = batch(0), batch(5, count=3)
    for cut in range(1, len(last)):
        path = tmp_path / f"{cut}.log"
        path.write_bytes(first + last[:cut])
        fr = FileRecords.open(path, create=False)
        it = fr.batches(verify_crc=True)
        assert next(it)[0] == 0
        with pytest.raises(CorruptRecordError, match="at position"):
            next(it)
        fr.close()


def test_batches_verify_crc_detects_flipped_byte(tmp_path: Path) -> None:
    data = bytearray(batch(0) + batch(2))
    second = len(batch(0))
    data[second + 40] ^= 0x10
    path = tmp_path / "flip.log"
    path.write_bytes(bytes(data))
    fr = FileRecords.open(path, create=False)
    assert len(list(fr.batches())) == 2  # headers alone look fine
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(fr.batches(verify_crc=True))
    fr.close()


def test_legacy_magic_in_a_log_file_is_corrupt(tmp_path: Path) -> None:
    data = bytearray(batch(0))
    data[rb.MAGIC_OFFSET] = 1
    path = tmp_path / "legacy.log"
    path.write_bytes(bytes(data))
    fr = FileRecords.open(path, create=False)
    with pytest.raises(CorruptRecordError):
        list(fr.batches())
    fr.close()


def failing_write(fail_after_bytes: int, err: int) -> Callable[[int, object], int]:
    """An ``os.write`` that writes ``fail_after_bytes`` bytes for real, then raises ``err``."""
    real_write = os.write
    budget = [fail_after_bytes]

    def fake(fd: int, data: object) -> int:
        view = memoryview(data)  # type: ignore[arg-type]
        if budget[0] <= 0:
            raise OSError(err, os.strerror(err))
        n = real_write(fd, view[: budget[0]])
        budget[0] -= n
        return n

    return fake


@pytest.mark.parametrize(("err", "partial"), [(errno.ENOSPC, 17), (errno.EIO, 0),
                                              (errno.ENOSPC, 1)])
def test_failed_write_leaves_no_partial_batch(
    records: FileRecords, monkeypatch: pytest.MonkeyPatch, err: int, partial: int
) -> None:
    before = fill(records, 2)
    size = records.size_in_bytes
    monkeypatch.setattr(os, "write", failing_write(partial, err))
    with pytest.raises(KafkaStorageError) as info:
        records.append(batch(30, count=4))
    monkeypatch.undo()
    message = str(info.value)
    assert str(records.path) in message and errno.errorcode[err] in message
    assert info.value.error_code == 56
    assert records.size_in_bytes == size
    assert records.path.stat().st_size == size
    # The file is still usable and holds exactly the acknowledged batches, then the next one.
    after = batch(30, count=1)
    records.append(after)
    assert records.read(0, 10**6) == b"".join(before) + after
    assert [h.base_offset for _, h in records.batches(verify_crc=True)] == [0, 10, 30]


def test_short_writes_are_completed(records: FileRecords,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def trickle(fd: int, data: object) -> int:
        calls.append(1)
        return real_write(fd, memoryview(data)[:7])  # type: ignore[arg-type]

    monkeypatch.setattr(os, "write", trickle)
    data = batch(0, count=3)
    assert records.append(bytearray(data)) == len(data)
    monkeypatch.undo()
    assert len(calls) == -(-len(data) // 7)
    assert records.read(0, len(data)) == data


def test_truncate_to(records: FileRecords) -> None:
    batches = fill(records)
    size = records.size_in_bytes
    assert records.truncate_to(size) == 0
    removed = records.truncate_to(len(batches[0]))
    assert removed == size - len(batches[0])
    assert records.size_in_bytes == records.path.stat().st_size == len(batches[0])
    with pytest.raises(ValueError):
        records.truncate_to(len(batches[0]) + 1)
    with pytest.raises(ValueError):
        records.truncate_to(-1)
    records.append(batches[2])  # appends continue at the new end
    assert records.read(0, 10**6) == batches[0] + batches[2]
    records.flush()


def test_preallocated_file_is_trimmed_on_close(tmp_path: Path) -> None:
    path = tmp_path / "pre.log"
    fr = FileRecords.open(path, preallocate_size=4096)
    assert fr.size_in_bytes == 0 and path.stat().st_size == 4096
    data = batch(0)
    fr.append(data)
    assert fr.size_in_bytes == len(data)
    assert [h.base_offset for _, h in fr.batches(verify_crc=True)] == [0]  # stops at the end
    fr.close()
    fr.close()
    assert path.read_bytes() == data
    reopened = FileRecords.open(path, create=False, preallocate_size=4096)
    assert reopened.size_in_bytes == len(data)  # an existing file is never preallocated again
    reopened.close()


def test_open_missing_without_create(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        FileRecords.open(tmp_path / "absent.log", create=False)


def test_rename_keeps_slices_readable_and_delete(records: FileRecords, tmp_path: Path) -> None:
    data = b"".join(fill(records))
    piece = records.slice(0, len(data))
    target = tmp_path / "00000000000000000000.log.deleted"
    records.rename_to(target)
    assert records.path == target and target.exists()
    assert piece.read_bytes() == data
    assert records.last_modified > 0
    assert records.delete() is True
    assert not target.exists()
    assert records.delete() is False


def test_searches(records: FileRecords) -> None:
    # batch 0: offset 0 ts 1000; batch 10: offsets 10-11 ts 2000-2001; batch 20: ts 3000-3002
    fill(records)
    positions = [p for p, _ in records.batches()]
    found = records.search_for_offset_from_position(11, 0)
    assert found is not None and found[0] == positions[1] and found[1].base_offset == 10
    found = records.search_for_offset_from_position(5, 0)  # in a gap: the next batch
    assert found is not None and found[1].base_offset == 10
    assert records.search_for_offset_from_position(23, 0) is None
    assert records.search_for_offset_from_position(0, records.size_in_bytes + 1) is None
    assert records.search_for_timestamp(2001, 0, 0) == (2001, 11)
    assert records.search_for_timestamp(1500, 0, 0) == (2000, 10)
    assert records.search_for_timestamp(0, 0, 21) == (3001, 21)
    assert records.search_for_timestamp(3003, 0, 0) is None
    assert records.largest_timestamp_after(0) == (3002, 22)
    assert records.largest_timestamp_after(records.size_in_bytes) == (-1, -1)


def test_vectored_append_survives_short_writes(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Several buffers go out with os.writev; a short write resumes mid-buffer."""
    fr = FileRecords.open(tmp_path / "v.log")
    real_writev, real_write = os.writev, os.write

    def short_writev(fd: int, buffers: list[memoryview]) -> int:
        first = buffers[0]
        return real_write(fd, first[: max(1, first.nbytes // 2)])  # at most half of one buffer

    monkeypatch.setattr(os, "writev", short_writev)
    chunks = [b"a" * 7, memoryview(b"bcdefgh" * 3), bytearray(b"zz"), b"!"]
    assert fr.append(chunks) == 7 + 21 + 2 + 1
    monkeypatch.setattr(os, "writev", real_writev)
    assert fr.read(0, fr.size_in_bytes) == b"".join(bytes(c) for c in chunks)
    fr.close()
