"""Kafka's text checkpoint files: format, atomic write, missing and malformed files."""

from pathlib import Path

import pytest

from strata.storage.checkpoints import (
    CheckpointFile,
    CorruptCheckpointError,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    atomic_write,
)
from strata.storage.errors import KafkaStorageError


def test_offset_checkpoint_round_trip_and_exact_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    cp = OffsetCheckpointFile(path)
    cp.write({("orders", 1): 99, ("orders", 0): 1234, ("audit", 7): 0})
    assert path.read_text() == "0\n3\naudit 7 0\norders 0 1234\norders 1 99\n"
    assert OffsetCheckpointFile(path).read() == {("audit", 7): 0, ("orders", 0): 1234,
                                                 ("orders", 1): 99}


def test_reads_a_file_written_with_other_whitespace(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text("0\r\n2\r\nmy-topic\t3   42\r\n__consumer_offsets 12 7\r\n")
    assert OffsetCheckpointFile(path).read() == {("my-topic", 3): 42,
                                                 ("__consumer_offsets", 12): 7}


def test_missing_and_empty_files_read_as_no_entries(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "absent").read() == {}
    (tmp_path / "empty").write_bytes(b"")
    assert OffsetCheckpointFile(tmp_path / "empty").read() == {}
    OffsetCheckpointFile(tmp_path / "none").write({})
    assert (tmp_path / "none").read_text() == "0\n0\n"
    assert OffsetCheckpointFile(tmp_path / "none").read() == {}


@pytest.mark.parametrize(
    ("content", "line", "fragment"),
    [
        ("x\n1\nt 0 1\n", 1, "not a number"),
        ("1\n1\nt 0 1\n", 1, "unrecognised version 1"),
        ("0\nmany\nt 0 1\n", 2, "entry count"),
        ("0\n-1\n", 2, "entry count"),
        ("0\n2\nt 0 1\n", 2, "expected 2 entries but found 1"),
        ("0\n1\nt 0 1\nu 0 2\n", 2, "expected 1 entries but found 2"),
        ("0\n2\nt 0 1\nt zero 1\n", 4, "malformed entry"),
        ("0\n1\nt 0\n", 3, "malformed entry"),
        ("0\n1\nt 0 1 extra\n", 3, "malformed entry"),
        ("0\n2\nt 0 1\n\n", 4, "malformed entry"),
        ("0\n1\nt 0 1.5\n", 3, "malformed entry"),
    ],
)
def test_malformed_file_names_file_and_line(
    tmp_path: Path, content: str, line: int, fragment: str
) -> None:
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_text(content)
    with pytest.raises(CorruptCheckpointError) as info:
        OffsetCheckpointFile(path).read()
    assert info.value.path == path
    assert info.value.line_number == line
    assert str(path) in str(info.value) and f"line {line}" in str(info.value)
    assert fragment in str(info.value)
    assert OffsetCheckpointFile(path).read_or_empty() == {}


def test_non_utf8_file_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\n1\n\xff\xfe 0 1\n")
    with pytest.raises(CorruptCheckpointError, match="UTF-8"):
        OffsetCheckpointFile(path).read()


def test_write_replaces_atomically_and_leaves_no_tmp(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    (tmp_path / "cp.tmp").write_text("stale leftover of a crashed write")
    cp = OffsetCheckpointFile(path)
    cp.write({("t", 0): 1})
    cp.write({("t", 0): 2})
    assert cp.read() == {("t", 0): 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cp"]


def test_failed_write_raises_storage_error_and_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    OffsetCheckpointFile(path).write({("t", 0): 1})
    (tmp_path / "cp.tmp").mkdir()  # opening the tmp file for writing now fails (EISDIR)
    with pytest.raises(KafkaStorageError, match="cannot write"):
        OffsetCheckpointFile(path).write({("t", 0): 2})
    assert OffsetCheckpointFile(path).read() == {("t", 0): 1}
    with pytest.raises(KafkaStorageError):
        atomic_write(tmp_path / "no-such-dir" / "cp", b"x")


def test_topic_names_that_cannot_be_read_back_are_refused(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    with pytest.raises(ValueError, match="topic name"):
        cp.write({("bad topic", 0): 1})
    with pytest.raises(ValueError, match="topic name"):
        cp.write({("", 0): 1})
    assert not (tmp_path / "cp").exists()


def test_leader_epoch_checkpoint_format(tmp_path: Path) -> None:
    path = LeaderEpochCheckpointFile.new_file(tmp_path)
    assert path.name == "leader-epoch-checkpoint"
    cp = LeaderEpochCheckpointFile(path)
    cp.write([EpochEntry(0, 0), EpochEntry(3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert cp.read() == [EpochEntry(0, 0), EpochEntry(3, 120)]
    path.write_text("0\n1\n-1 5\n")
    with pytest.raises(CorruptCheckpointError, match="line 3"):
        cp.read()


class _PairFormatter:
    def to_string(self, entry: tuple[str, str]) -> str:
        return f"{entry[0]}={entry[1]}"

    def from_string(self, line: str) -> tuple[str, str] | None:
        key, sep, value = line.partition("=")
        return (key, value) if sep else None


def test_generic_checkpoint_file_with_own_formatter_and_version(tmp_path: Path) -> None:
    cp = CheckpointFile(tmp_path / "generic", 3, _PairFormatter())
    cp.write([("a", "1"), ("b", "2")])
    assert (tmp_path / "generic").read_text() == "3\n2\na=1\nb=2\n"
    assert cp.read() == [("a", "1"), ("b", "2")]
    with pytest.raises(CorruptCheckpointError, match="expected 0"):
        CheckpointFile(tmp_path / "generic", 0, _PairFormatter()).read()
