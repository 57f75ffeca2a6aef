"""Replay of one ``__transaction_state`` partition into transaction metadata.

Kafka's ``TransactionStateManager.loadTransactionMetadata``: records are read from the log
start to the log end, in offset order; the last value of a transactional id wins and a
tombstone (null value) forgets it. Keys of another coordinator record type are skipped (Kafka
logs and ignores them: a newer coordinator's records). A key or value that does not parse
raises ``TransactionLogError``: the caller stops the load and keeps the partition unloaded.

What the coordinator does with the result (``TransactionStateManager.complete_loading``):
a transaction found in PrepareCommit or PrepareAbort was prepared by the previous coordinator,
whose markers may not all have been written; its completion is prepared again and its markers
are sent again (markers are idempotent at the partitions).

Pure: iterates what it is given.
"""

from __future__ import annotations

from collections.abc import Iterable

from strata.broker.transaction.transaction_log import read_key, read_value
from strata.broker.transaction.transaction_metadata import TransactionMetadata


def replay(records: Iterable[tuple[bytes, bytes | None]]) -> dict[str, TransactionMetadata]:
    """``(key, value)`` pairs in offset order -> transactional id -> metadata."""
    loaded: dict[str, TransactionMetadata] = {}
    for key, value in records:
        transactional_id = read_key(key)
        if isinstance(transactional_id, int):
            continue
        decoded = read_value(value)
        if decoded is None:
            loaded.pop(transactional_id, None)
        else:
            loaded[transactional_id] = decoded.to_metadata(transactional_id)
    return loaded
