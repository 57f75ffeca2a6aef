"""What kafka-python and aiokafka share: both mirror the Java client's API.

``client_settings`` are the settings both take, under the Java client's names: the matrix's
client id and loopback timeouts and backoffs (``model``).

A poll returns ``{TopicPartition: [ConsumerRecord]}`` whose records carry ``offset``, ``key``,
``value``, ``headers`` (a list of ``(str, bytes)``) and ``timestamp``; ``offsets_for_times``
answers ``{TopicPartition: OffsetAndTimestamp | None}``. These turn both into the matrix's
client-neutral values (``model``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model import REQUEST_TIMEOUT_MS, ConsumedRecord, ReadToEnd


def client_settings(bootstrap: str, name: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "client_id": f"strata-matrix-{name}",
        "request_timeout_ms": REQUEST_TIMEOUT_MS,
        "retry_backoff_ms": 50,
    }


def take_polled(batches: Mapping[Any, Sequence[Any]], reading: ReadToEnd) -> None:
    """Add every record of one poll to ``reading``."""
    for tp, batch in batches.items():
        for m in batch:
            reading.add(ConsumedRecord(
                partition=tp.partition,
                offset=m.offset,
                key=m.key,
                value=m.value,
                headers=tuple((k, v) for k, v in m.headers),
                timestamp=m.timestamp,
            ))


def found_offsets(answers: Mapping[Any, Any]) -> dict[int, int | None]:
    """Per partition, the offset ``offsets_for_times`` found (None: no record that late)."""
    return {
        tp.partition: (None if found is None else found.offset)
        for tp, found in answers.items()
    }
