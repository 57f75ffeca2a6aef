"""The ``metadata.store`` URL: which backend, and where (pure; no I/O).

Grammar::

    sqlite:///relative/path/meta.db     -> SqliteUrl(path="relative/path/meta.db")
    sqlite:////absolute/path/meta.db    -> SqliteUrl(path="/absolute/path/meta.db")
    etcd://host[:port][,host[:port]...] -> EtcdUrl(endpoints=(("host", port), ...))
    etcds://host[:port][,...]           -> EtcdUrl(endpoints=..., tls=True)

``etcds://`` is etcd over TLS (gRPC with the ``metadata.store.ssl.*`` PEM files; see
``store_tls.py``): the scheme, not a separate flag, says TLS, so a URL in a log or a
``--metadata-store`` option tells how the store is reached.

The etcd port defaults to 2379; IPv6 hosts are bracketed (``etcd://[::1]:2379``). Anything
else — an unknown scheme, a sqlite URL with a host, query or fragment, an etcd URL with a path,
an empty host, a port out of range — raises ``ValueError`` naming the URL and what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

ETCD_DEFAULT_PORT = 2379
EXAMPLES = (
    "sqlite:///relative/meta.db, sqlite:////abs/meta.db, etcd://host:2379,host:2379 "
    "or etcds://host:2379 (TLS)"
)


@dataclass(frozen=True, slots=True)
class SqliteUrl:
    """A SQLite file shared by the brokers of one host (relative to the working directory
    unless absolute)."""

    path: str


@dataclass(frozen=True, slots=True)
class EtcdUrl:
    """The client endpoints of one etcd cluster, in the order given; ``tls`` for ``etcds://``."""

    endpoints: tuple[tuple[str, int], ...]
    tls: bool = False


StoreUrl = SqliteUrl | EtcdUrl


def parse_store_url(url: str) -> StoreUrl:
    """Parse a ``metadata.store`` value; ``ValueError`` naming the URL when it is malformed."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise _bad(url, "expected scheme://...")
    scheme = scheme.lower()
    if scheme == "sqlite":
        return _parse_sqlite(url, rest)
    if scheme in ("etcd", "etcds"):
        return _parse_etcd(url, rest, tls=scheme == "etcds")
    raise _bad(url, f"unknown scheme {scheme!r}")


def _parse_sqlite(url: str, rest: str) -> SqliteUrl:
    if "?" in rest or "#" in rest:
        raise _bad(url, "sqlite URLs take no query or fragment")
    if not rest.startswith("/"):
        raise _bad(url, "sqlite URLs have no host: write sqlite:///relative or sqlite:////abs")
    path = rest[1:]
    if not path or path.endswith("/"):
        raise _bad(url, "no database file named")
    if path == ":memory:":
        raise _bad(url, "an in-memory database cannot be shared between brokers; name a file")
    return SqliteUrl(path=path)


def _parse_etcd(url: str, rest: str, *, tls: bool) -> EtcdUrl:
    if any(c in rest for c in "/?#@"):
        raise _bad(url, "etcd URLs are etcd[s]://host:port[,host:port...] with no path or user")
    if not rest:
        raise _bad(url, "no etcd endpoint")
    endpoints = tuple(_parse_endpoint(url, part.strip()) for part in rest.split(","))
    return EtcdUrl(endpoints=endpoints, tls=tls)


def _parse_endpoint(url: str, part: str) -> tuple[str, int]:
    if not part:
        raise _bad(url, "empty endpoint")
    if part.startswith("["):
        host, bracket, tail = part[1:].partition("]")
        if not bracket or not host:
            raise _bad(url, f"bad IPv6 endpoint {part!r}")
        if tail and not tail.startswith(":"):
            raise _bad(url, f"bad endpoint {part!r}")
        port_text = tail[1:] if tail else ""
    else:
        if part.count(":") > 1:
            raise _bad(url, f"endpoint {part!r}: bracket IPv6 addresses, e.g. [::1]:2379")
        host, _, port_text = part.partition(":")
        if not host:
            raise _bad(url, f"endpoint {part!r} has no host")
    if not port_text:
        return host, ETCD_DEFAULT_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise _bad(url, f"endpoint {part!r} has a bad port")
    return host, int(port_text)


def _bad(url: str, why: str) -> ValueError:
    return ValueError(f"bad metadata.store URL {url!r}: {why} (expected {EXAMPLES})")
