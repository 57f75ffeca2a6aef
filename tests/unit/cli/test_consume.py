"""``strata consume``'s pure parts: ``--from`` positions and the output formats."""

from __future__ import annotations

import json

import pytest

from strata.cli.consume import (
    Record,
    StartKind,
    StartPosition,
    Template,
    format_json,
    format_value,
    parse_start,
    tail_start,
)

RECORD = Record(topic="t", partition=2, offset=41, timestamp=1_700_000_000_123, key=b"k1",
                value=b"hello", headers=(("h", b"v"), ("h", None), ("bin", b"\xff")))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("earliest", StartPosition(StartKind.EARLIEST)),
        ("beginning", StartPosition(StartKind.EARLIEST)),
        ("LATEST", StartPosition(StartKind.LATEST)),
        ("end", StartPosition(StartKind.LATEST)),
        ("0", StartPosition(StartKind.OFFSET, 0)),
        ("1234", StartPosition(StartKind.OFFSET, 1234)),
        ("-10", StartPosition(StartKind.TAIL, 10)),
        ("@1700000000000", StartPosition(StartKind.TIMESTAMP, 1_700_000_000_000)),
    ],
)
def test_parse_start(text: str, expected: StartPosition) -> None:
    assert parse_start(text) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "@", "@-5", "@1.5", "1.5", "--3", "- 3"])
def test_parse_start_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        parse_start(text)


def test_tail_start_stays_within_the_log() -> None:
    assert tail_start(low=0, high=10, count=3) == 7
    assert tail_start(low=5, high=10, count=30) == 5
    assert tail_start(low=0, high=0, count=3) == 0


def test_format_value_is_raw_bytes_and_a_newline() -> None:
    assert format_value(RECORD) == b"hello\n"
    assert format_value(Record("t", 0, 0, 0, None, None, ())) == b"\n"


def test_format_json_fields_and_encoding() -> None:
    document = json.loads(format_json(RECORD))
    assert document == {
        "topic": "t", "partition": 2, "offset": 41, "timestamp": 1_700_000_000_123,
        "key": "k1", "value": "hello",
        "headers": [["h", "v"], ["h", None], ["bin", "\\xff"]],
    }
    assert format_json(RECORD).endswith(b"}\n")
    tombstone = json.loads(format_json(Record("t", 0, 0, 0, None, None, ())))
    assert tombstone["key"] is None and tombstone["value"] is None


def test_template_fields_and_escapes() -> None:
    template = Template(r"%t|%p|%o|%T|%k|%s|%K|%S|%h|100%%\t\n")
    assert template(RECORD) == (
        b"t|2|41|1700000000123|k1|hello|2|5|h=v,h=,bin=\xff|100%\t\n"
    )
    null = Record("t", 0, 0, 0, None, None, ())
    assert Template("%K %S [%k][%s][%h]")(null) == b"-1 -1 [][][]"
    assert Template("plain")(RECORD) == b"plain"
    assert Template(r"a\qb\\")(RECORD) == b"a\\qb\\"


def test_template_rejects_unknown_fields() -> None:
    with pytest.raises(ValueError, match="unknown field %z"):
        Template("%z")
