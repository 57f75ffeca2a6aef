"""``metadata.store`` URL parsing."""

from __future__ import annotations

import pytest

from strata.metadata import EtcdUrl, SqliteUrl, parse_store_url


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("sqlite:///meta.db", SqliteUrl("meta.db")),
        ("sqlite:///relative/dir/meta.db", SqliteUrl("relative/dir/meta.db")),
        ("sqlite:////abs/dir/meta.db", SqliteUrl("/abs/dir/meta.db")),
        ("SQLITE:///meta.db", SqliteUrl("meta.db")),
        ("etcd://h1:2379", EtcdUrl((("h1", 2379),))),
        ("etcd://h1", EtcdUrl((("h1", 2379),))),
        ("etcd://h1:2379,h2:12379, h3", EtcdUrl((("h1", 2379), ("h2", 12379), ("h3", 2379)))),
        ("etcd://127.0.0.1:23790", EtcdUrl((("127.0.0.1", 23790),))),
        ("etcd://[::1]:2379,[fe80::1]", EtcdUrl((("::1", 2379), ("fe80::1", 2379)))),
    ],
)
def test_valid_urls(url: str, parsed: object) -> None:
    assert parse_store_url(url) == parsed


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("meta.db", "scheme"),
        ("postgres://h/db", "unknown scheme"),
        ("sqlite://host/meta.db", "no host"),
        ("sqlite://", "no host"),
        ("sqlite:///", "no database file"),
        ("sqlite:///dir/", "no database file"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite:///meta.db?mode=ro", "query"),
        ("etcd://", "no etcd endpoint"),
        ("etcd://h1:2379/chroot", "no path"),
        ("etcd://user@h1", "no path or user"),
        ("etcd://h1:2379,,h2", "empty endpoint"),
        ("etcd://:2379", "no host"),
        ("etcd://h1:0", "bad port"),
        ("etcd://h1:65536", "bad port"),
        ("etcd://h1:http", "bad port"),
        ("etcd://::1:2379", "bracket IPv6"),
        ("etcd://[::1", "bad IPv6"),
        ("etcd://[::1]x", "bad endpoint"),
    ],
)
def test_bad_urls_name_the_url_and_the_problem(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=r"bad metadata\.store URL") as raised:
        parse_store_url(url)
    assert repr(url) in str(raised.value)
    assert why in str(raised.value)
    assert "sqlite:///" in str(raised.value)  # and shows what a good one looks like


def test_open_store_rejects_a_bad_url_before_any_io() -> None:
    from strata.metadata import open_store

    with pytest.raises(ValueError, match="'zk://h:2181'"):
        open_store("zk://h:2181")
