"""``strata produce`` and ``strata consume`` against a real broker: what goes in comes out, from
the position asked for, in the format asked for, with exit codes scripts can rely on."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import Result, StrataCli

pytestmark = pytest.mark.integration


def records(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.ok().stdout.splitlines()]


def consume_json(strata_cli: StrataCli, topic: str, *args: str) -> list[dict[str, Any]]:
    return records(strata_cli("consume", topic, "--format", "json", *args))


def test_produce_keys_and_headers_then_consume_json(strata_cli: StrataCli) -> None:
    strata_cli("topic", "create", "keyed", "-p", "3").ok()
    lines = ["alice:1", "bob:2", "carol:3", "alice:4", "no key here", ":empty key",
             "dave:a:b:c", ""]
    produced = strata_cli("produce", "keyed", "--key-separator", ":",
                          "-H", "trace=abc", "-H", "origin=cli=x", "-H", "trace=again",
                          input="\n".join(lines) + "\n").ok()
    assert produced.stderr == "strata produce: 8 records sent to 'keyed'\n"
    assert produced.stdout == ""

    got = consume_json(strata_cli, "keyed", "--count", "8")
    assert len(got) == 8
    headers = [["trace", "abc"], ["origin", "cli=x"], ["trace", "again"]]
    assert all(r["headers"] == headers and r["topic"] == "keyed" for r in got)
    assert sorted((r["key"], r["value"]) for r in got if r["key"] is not None) == [
        ("", "empty key"), ("alice", "1"), ("alice", "4"), ("bob", "2"), ("carol", "3"),
        ("dave", "a:b:c"),
    ]
    assert sorted(r["value"] for r in got if r["key"] is None) == ["", "no key here"]
    # Offsets are dense from 0 in each partition, read in order; a key has one partition.
    by_partition: dict[int, list[int]] = {}
    for r in got:
        by_partition.setdefault(r["partition"], []).append(r["offset"])
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())
    assert len({r["partition"] for r in got if r["key"] == "alice"}) == 1
    assert all(isinstance(r["timestamp"], int) and r["timestamp"] > 0 for r in got)

    # The same records with --exit-at-end instead of --count, and described offsets agree.
    assert sorted(map(json.dumps, consume_json(strata_cli, "keyed", "--exit-at-end"))) == (
        sorted(map(json.dumps, got))
    )
    [described] = records(strata_cli("topic", "describe", "keyed", "--format", "json"))
    assert {p["partition"]: p["high_watermark"] for p in described["partitions"]} == {
        p: len(by_partition.get(p, [])) for p in range(3)
    }


def test_consume_from_timestamp(strata_cli: StrataCli) -> None:
    strata_cli("topic", "create", "timed", "-p", "2").ok()
    strata_cli("produce", "timed", input="a1\na2\na3\n").ok()
    before = consume_json(strata_cli, "timed", "--exit-at-end")
    last_before = max(r["timestamp"] for r in before)
    deadline = time.monotonic() + 5
    while time.time() * 1000 <= last_before:  # at most a millisecond: the next one is later
        assert time.monotonic() < deadline
    strata_cli("produce", "timed", input="b1\nb2\n").ok()
    after = [r for r in consume_json(strata_cli, "timed", "--exit-at-end")
             if r["value"].startswith("b")]
    since = min(r["timestamp"] for r in after)
    assert since > last_before

    got = consume_json(strata_cli, "timed", "--from", f"@{since}", "--exit-at-end")
    assert sorted(r["value"] for r in got) == ["b1", "b2"]
    everything = consume_json(strata_cli, "timed", "--exit-at-end")
    from_last = consume_json(strata_cli, "timed", "--from", f"@{last_before}", "--exit-at-end")
    assert sorted(r["value"] for r in from_last) == sorted(
        r["value"] for r in everything if r["timestamp"] >= last_before
    )
    future = consume_json(strata_cli, "timed", "--from", f"@{since + 10**9}", "--exit-at-end")
    assert future == []


def test_consume_positions_partitions_and_formats(strata_cli: StrataCli) -> None:
    strata_cli("topic", "create", "positions", "-p", "2").ok()
    values = [f"v{i}" for i in range(6)]
    strata_cli("produce", "positions", "--partition", "1", "-K", "=",
               input="".join(f"k{i}={v}\n" for i, v in enumerate(values))).ok()

    def read(*args: str) -> list[str]:
        return strata_cli("consume", "positions", "--exit-at-end", *args).ok().stdout.splitlines()

    assert read() == values  # --format value is the default
    assert read("--partition", "1", "--from", "4") == ["v4", "v5"]
    assert read("--from", "-2") == ["v4", "v5"]
    assert read("--from", "latest") == []
    assert read("--partition", "0") == []
    assert read("--count", "2") == ["v0", "v1"]
    assert read("--partition", "1", "--from", "5", "--template", r"%t %p %o %k=%s %S\n") == [
        "positions 1 5 k5=v5 2"
    ]


def test_produce_from_file_with_rate_compression_and_acks(
    strata_cli: StrataCli, tmp_path: Path
) -> None:
    strata_cli("topic", "create", "paced", "-p", "3").ok()
    source = tmp_path / "records.txt"
    source.write_text("".join(f"line {i}\n" for i in range(40)))
    started = time.monotonic()
    produced = strata_cli("produce", "paced", "--file", str(source), "--partition", "2",
                          "--rate", "200", "--compression", "gzip", "--acks", "1").ok()
    # 40 records at 200/s take at least 39 intervals of 5 ms.
    assert time.monotonic() - started >= 39 / 200
    assert produced.stderr == "strata produce: 40 records sent to 'paced'\n"
    got = consume_json(strata_cli, "paced", "--partition", "2", "--exit-at-end")
    assert [r["value"] for r in got] == [f"line {i}" for i in range(40)]
    assert [r["offset"] for r in got] == list(range(40))
    assert all(r["key"] is None and r["headers"] == [] for r in got)


def test_missing_topic_partition_and_offset_are_exit_1(strata_cli: StrataCli) -> None:
    strata_cli("topic", "create", "small", "-p", "1").ok()
    strata_cli("produce", "small", input="only\n").ok()
    cases = [
        (strata_cli("produce", "absent", input="x\n"),
         "strata produce: UNKNOWN_TOPIC_OR_PARTITION: topic 'absent' does not exist"),
        (strata_cli("consume", "absent", "--exit-at-end"),
         "strata consume: UNKNOWN_TOPIC_OR_PARTITION: topic 'absent' does not exist"),
        (strata_cli("produce", "small", "--partition", "4", input="x\n"),
         "strata produce: UNKNOWN_TOPIC_OR_PARTITION: topic 'small' has 1 partitions; "
         "there is no partition 4"),
        (strata_cli("consume", "small", "--from", "7", "--exit-at-end"),
         "strata consume: _AUTO_OFFSET_RESET: "),
    ]
    for result, line in cases:
        assert result.returncode == 1, str(result)
        assert result.stdout == ""
        [error] = result.error_lines
        assert error.startswith(line), error
