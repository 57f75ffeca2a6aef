"""Key encoding, prefix ranges, transaction checks, etcd's watch range and compaction
error."""

from __future__ import annotations

import pytest

from strata.metadata import CompactedError, Compare, Delete, Put
from strata.metadata.etcd_watch import watch_range
from strata.metadata.keys import decode_key, encode_key, prefix_end
from strata.metadata.store import check_txn


@pytest.mark.parametrize(
    ("prefix", "end"),
    [
        (b"a", b"b"),
        (b"/brokers/", b"/brokers0"),
        (b"a\xff", b"b"),
        (b"a\xfe", b"a\xff"),
        (b"\xff\xff", None),
        (b"", None),
    ],
)
def test_prefix_end(prefix: bytes, end: bytes | None) -> None:
    assert prefix_end(prefix) == end


def test_prefix_end_bounds_exactly_the_prefixed_keys() -> None:
    keys = [b"/a", b"/a/", b"/a/1", b"/a/\xff\xff", b"/a0", b"/b", b"/`"]
    end = prefix_end(b"/a/")
    assert end is not None
    assert [k for k in keys if b"/a/" <= k < end] == [k for k in keys if k.startswith(b"/a/")]


def test_keys_are_utf8_and_non_empty() -> None:
    assert encode_key("/topics/é") == "/topics/é".encode()
    assert decode_key(encode_key("/topics/é")) == "/topics/é"
    with pytest.raises(ValueError):
        encode_key("")


def test_watch_range_for_etcd() -> None:
    assert watch_range("/brokers/") == (b"/brokers/", b"/brokers0")
    assert watch_range("") == (b"\0", b"\0")  # every key


def test_check_txn_refuses_duplicate_and_empty_keys() -> None:
    check_txn([Compare("/e", 3), Compare("/p", 0)], [Put("/p", b"x"), Delete("/q")])
    with pytest.raises(ValueError, match="twice"):
        check_txn([], [Put("/p", b"x"), Delete("/p")])
    with pytest.raises(ValueError):
        check_txn([], [Put("", b"x")])
    with pytest.raises(ValueError):
        check_txn([Compare("/p", -1)], [])


def test_compacted_error_tells_the_caller_to_relist() -> None:
    error = CompactedError(5, 9)
    assert (error.from_revision, error.compact_revision) == (5, 9)
    assert "re-list" in str(error)
