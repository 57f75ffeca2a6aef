"""log_file_names: suffixes, 20-digit names and partition directory names (Kafka's LogFileUtils)."""

from pathlib import Path

import pytest

from strata.storage import log_file_names as names


def test_file_name_prefix_is_20_zero_padded_digits() -> None:
    assert names.filename_prefix_from_offset(0) == "0" * 20
    assert names.filename_prefix_from_offset(1234) == "00000000000000001234"
    assert names.filename_prefix_from_offset(2**63 - 1) == "09223372036854775807"
    with pytest.raises(ValueError):
        names.filename_prefix_from_offset(-1)


def test_path_builders() -> None:
    d = Path("/data/t-0")
    assert names.log_file(d, 5) == d / "00000000000000000005.log"
    assert names.offset_index_file(d, 5) == d / "00000000000000000005.index"
    assert names.time_index_file(d, 5) == d / "00000000000000000005.timeindex"
    assert names.producer_snapshot_file(d, 7) == d / "00000000000000000007.snapshot"
    assert names.log_file(d, 5, names.CLEANED_FILE_SUFFIX) == d / "00000000000000000005.log.cleaned"
    assert names.offset_index_file(d, 5, names.SWAP_FILE_SUFFIX).name == \
        "00000000000000000005.index.swap"
    assert names.time_index_file(d, 5, names.DELETED_FILE_SUFFIX).name == \
        "00000000000000000005.timeindex.deleted"


@pytest.mark.parametrize(
    ("file_name", "offset"),
    [
        ("00000000000000000000.log", 0),
        ("00000000000000000042.index", 42),
        ("00000000000000000042.timeindex", 42),
        ("00000000000000001000.snapshot", 1000),
        ("00000000000000000042.log.deleted", 42),
        ("00000000000000000042.index.swap", 42),
    ],
)
def test_offset_from_file_name(file_name: str, offset: int) -> None:
    assert names.offset_from_file_name(file_name) == offset


@pytest.mark.parametrize("file_name", ["leader-epoch-checkpoint", ".log", "abc.log", "-1.log"])
def test_offset_from_file_name_rejects_other_files(file_name: str) -> None:
    with pytest.raises(ValueError):
        names.offset_from_file_name(file_name)


def test_name_predicates_and_replace_suffix() -> None:
    assert names.is_log_file(Path("00000000000000000000.log"))
    assert not names.is_log_file(Path("00000000000000000000.log.deleted"))
    assert names.is_index_file(Path("00000000000000000000.index"))
    assert names.is_index_file(Path("00000000000000000000.timeindex"))
    assert not names.is_index_file(Path("00000000000000000000.log"))
    assert names.replace_suffix("0.log", "", ".deleted") == "0.log.deleted"
    assert names.replace_suffix("0.log.cleaned", ".cleaned", ".swap") == "0.log.swap"
    assert names.replace_suffix("0.log.swap", ".swap", "") == "0.log"
    with pytest.raises(ValueError):
        names.replace_suffix("0.log", ".swap", "")


@pytest.mark.parametrize(
    ("dir_name", "expected"),
    [
        ("orders-0", ("orders", 0)),
        ("my-topic-12", ("my-topic", 12)),
        ("a-b-c-3", ("a-b-c", 3)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49)),
        ("my-topic-12.0123abcd-delete", ("my-topic", 12)),
    ],
)
def test_parse_topic_partition_name(dir_name: str, expected: tuple[str, int]) -> None:
    assert names.parse_topic_partition_name(dir_name) == expected


@pytest.mark.parametrize(
    "dir_name",
    ["orders", "-0", "orders-", "orders-x", "orders-1x", "orders-+1", "orders-1-delete",
     "orders-1.-delete", ""],
)
def test_parse_topic_partition_name_rejects(dir_name: str) -> None:
    with pytest.raises(ValueError):
        names.parse_topic_partition_name(dir_name)


def test_dir_names_round_trip() -> None:
    assert names.topic_partition_dir_name("my-topic", 3) == "my-topic-3"
    doomed = names.log_delete_dir_name("my-topic", 3, "ab12")
    assert doomed == "my-topic-3.ab12-delete"
    assert doomed.endswith(names.DELETE_DIR_SUFFIX)
    assert names.parse_topic_partition_name(doomed) == ("my-topic", 3)
    with pytest.raises(ValueError):
        names.topic_partition_dir_name("", 0)
    with pytest.raises(ValueError):
        names.topic_partition_dir_name("t", -1)
