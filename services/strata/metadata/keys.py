"""Keys as bytes, and prefix ranges (pure).

Keys are ``str`` in the API and UTF-8 bytes in both backends, so every ordering and range is
bytewise (etcd's, and SQLite's BLOB ``memcmp``): ``list`` sorts by the UTF-8 bytes, and the
prefix ``p`` is the half-open range ``[p, prefix_end(p))``.
"""

from __future__ import annotations


def encode_key(key: str) -> bytes:
    """The key's stored form; ``ValueError`` for an empty key."""
    if not key:
        raise ValueError("metadata keys must be non-empty")
    return key.encode()


def decode_key(raw: bytes) -> str:
    return raw.decode()


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``; None when
    there is none (an empty prefix, or one of only 0xff bytes): the range is unbounded.

    Same rule as etcd's ``clientv3.GetPrefixRangeEnd``: drop trailing 0xff bytes, then add one
    to the last byte."""
    end = bytearray(prefix)
    while end and end[-1] == 0xFF:
        end.pop()
    if not end:
        return None
    end[-1] += 1
    return bytes(end)
