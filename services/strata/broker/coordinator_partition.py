"""Which partition of a coordinator's internal topic a key belongs to.

Kafka places a group id in ``__consumer_offsets`` and a transactional id in
``__transaction_state`` the same way: ``Utils.abs(key.hashCode()) % partitions``, with Java's
``String.hashCode``. Clients never compute it (they ask FindCoordinator), but a broker that
placed keys differently from Kafka would read another partition's records after a migration,
so the arithmetic is Java's to the bit.

Invariants: ``java_string_hashcode`` is an int32 over UTF-16 code units (a character outside
the BMP counts as its two surrogates); ``partition_for`` is in ``[0, partitions)`` for every key,
``abs(Integer.MIN_VALUE)`` counting as 0 as in Kafka's ``Utils.abs``. Pure.
"""

from __future__ import annotations


def java_string_hashcode(value: str) -> int:
    """Java's ``String.hashCode`` (``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    int32 overflow)."""
    h = 0
    data = value.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode) % partitions``; ValueError without a partition."""
    if partitions < 1:
        raise ValueError(f"a coordinator topic needs a partition, got {partitions}")
    h = java_string_hashcode(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
