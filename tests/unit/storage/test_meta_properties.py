"""meta.properties: Kafka KRaft v1 keys plus Strata's format version; identity checks."""

from pathlib import Path

import pytest

from strata.storage.meta_properties import (
    CURRENT_STRATA_FORMAT_VERSION,
    InconsistentClusterIdError,
    InconsistentNodeIdError,
    MetaProperties,
    MetaPropertiesError,
    ensure_meta_properties,
    format_properties,
    generate_directory_id,
    is_valid_directory_id,
    parse_properties,
    read_meta_properties,
    write_meta_properties,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"

# What `kafka-storage.sh format` writes in KRaft mode (Properties.store: comment, date, keys).
KAFKA_WRITTEN = """#
#Thu Feb 01 10:00:00 UTC 2024
node.id=3
directory.id=8wQ2Tj4bQ_i3Kkq0pGY2Rw
version=1
cluster.id=MkU3OEVBNTcwNTJENDM2Qk
"""


def test_ensure_creates_the_file_with_kafka_keys_and_format_version(tmp_path: Path) -> None:
    log_dir = tmp_path / "data"
    meta = ensure_meta_properties(log_dir, CLUSTER, 3)
    props = parse_properties((log_dir / "meta.properties").read_text())
    assert props["version"] == "1"
    assert props["cluster.id"] == CLUSTER
    assert props["node.id"] == "3"
    assert props["strata.format.version"] == str(CURRENT_STRATA_FORMAT_VERSION)
    assert meta.directory_id is not None and props["directory.id"] == meta.directory_id
    assert is_valid_directory_id(meta.directory_id)
    assert read_meta_properties(log_dir) == meta
    assert not (log_dir / "meta.properties.tmp").exists()


def test_ensure_is_idempotent_and_does_not_rewrite(tmp_path: Path) -> None:
    first = ensure_meta_properties(tmp_path, CLUSTER, 1)
    before = (tmp_path / "meta.properties").read_bytes()
    again = ensure_meta_properties(tmp_path, CLUSTER, 1)
    assert again == first
    assert (tmp_path / "meta.properties").read_bytes() == before


def test_another_cluster_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    ensure_meta_properties(tmp_path, CLUSTER, 1)
    with pytest.raises(InconsistentClusterIdError) as info:
        ensure_meta_properties(tmp_path, "OtherClusterIdAAAAAAAAA", 1)
    message = str(info.value)
    assert CLUSTER in message and "OtherClusterIdAAAAAAAAA" in message
    assert "meta.properties" in message
    assert info.value.error_name == "INCONSISTENT_CLUSTER_ID"


def test_another_node_is_refused(tmp_path: Path) -> None:
    ensure_meta_properties(tmp_path, CLUSTER, 1)
    with pytest.raises(InconsistentNodeIdError, match=r"node\.id 1.*node\.id 2"):
        ensure_meta_properties(tmp_path, CLUSTER, 2)


def test_a_kafka_formatted_dir_is_accepted_and_gets_the_strata_key(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(KAFKA_WRITTEN)
    meta = read_meta_properties(tmp_path)
    assert meta == MetaProperties(CLUSTER, 3, "8wQ2Tj4bQ_i3Kkq0pGY2Rw", 1, 0)
    upgraded = ensure_meta_properties(tmp_path, CLUSTER, 3)
    assert upgraded.directory_id == "8wQ2Tj4bQ_i3Kkq0pGY2Rw"
    assert upgraded.strata_format_version == CURRENT_STRATA_FORMAT_VERSION
    assert read_meta_properties(tmp_path) == upgraded


def test_a_missing_directory_id_is_added(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(
        f"version=1\ncluster.id={CLUSTER}\nnode.id=0\nstrata.format.version=1\n")
    meta = ensure_meta_properties(tmp_path, CLUSTER, 0)
    assert meta.directory_id is not None
    reread = read_meta_properties(tmp_path)
    assert reread is not None and reread.directory_id == meta.directory_id


def test_a_newer_strata_format_is_refused(tmp_path: Path) -> None:
    write_meta_properties(tmp_path, MetaProperties(CLUSTER, 1, generate_directory_id(),
                                                   strata_format_version=99))
    with pytest.raises(MetaPropertiesError, match="newer Strata"):
        ensure_meta_properties(tmp_path, CLUSTER, 1)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("broker.id=1\nversion=0\ncluster.id=x\n", "ZooKeeper"),
        ("version=2\ncluster.id=x\nnode.id=1\n", "unsupported version=2"),
        ("cluster.id=x\nnode.id=1\n", "no version"),
        ("version=1\nnode.id=1\n", "no cluster.id"),
        ("version=1\ncluster.id=x\n", "no node.id"),
        ("version=1\ncluster.id=x\nnode.id=one\n", "non-integer node.id"),
        ("version=1\ncluster.id=x\nnode.id=-4\n", "negative node.id"),
        ("version=1\ncluster.id=x\nnode.id=1\ndirectory.id=nope\n", "invalid directory.id"),
        ("version=1\ncluster.id=x\nnode.id=1\nstrata.format.version=0\n", "invalid strata"),
        ("version=1\ncluster.id=x\nnode.id=1\nbad=\\uZZZZ\n", "not a valid properties file"),
    ],
)
def test_malformed_files_raise_naming_the_file(
    tmp_path: Path, content: str, fragment: str
) -> None:
    (tmp_path / "meta.properties").write_text(content)
    with pytest.raises(MetaPropertiesError) as info:
        ensure_meta_properties(tmp_path, "x", 1)
    assert fragment in str(info.value)
    assert str(tmp_path / "meta.properties") in str(info.value)


def test_absent_file_reads_as_none(tmp_path: Path) -> None:
    assert read_meta_properties(tmp_path) is None


def test_ensure_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        ensure_meta_properties(tmp_path, "", 1)
    with pytest.raises(ValueError):
        ensure_meta_properties(tmp_path, CLUSTER, -1)


def test_java_properties_syntax() -> None:
    text = (
        "# comment\n"
        "   ! another comment\n"
        "\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "d\t=  spaced value \n"
        "e=multi\\\n"
        "    line\n"
        "f=back\\\\slash\n"
        "g\\ key=x\\:y\\=z\n"
        "h=\\u00e9t\\u00E9\\n\n"
        "a=override\n"
        "empty=\n"
        "lonely\n"
        "even=ends\\\\\n"
        "next=1\n"
    )
    assert parse_properties(text) == {
        "a": "override", "b": "2", "c": "3", "d": "spaced value ", "e": "multiline",
        "f": "back\\slash", "g key": "x:y=z", "h": "été\n", "empty": "", "lonely": "",
        "even": "ends\\", "next": "1",
    }


def test_format_properties_round_trips_special_characters() -> None:
    props = {"plain": "v", "we ird:key=": " lead#ing!\\ \t\n", "unicode": "ünï", "ctl": "\x01"}
    text = format_properties(props)
    assert text.startswith("#\n")
    assert "plain=v\n" in text
    assert parse_properties(text) == props


def test_generated_directory_ids_are_kafka_uuids() -> None:
    for _ in range(50):
        text = generate_directory_id()
        assert is_valid_directory_id(text)
        assert len(text) == 22 and not text.startswith("-")
    assert not is_valid_directory_id("AAAAAAAAAAAAAAAAAAAAAA")  # Uuid.ZERO_UUID is reserved
    assert not is_valid_directory_id("AAAAAAAAAAAAAAAAAAAAAQ")  # Uuid(0, 1) is reserved
