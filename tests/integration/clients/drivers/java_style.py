"""What kafka-python and aiokafka share: both mirror the Java client's consumer API.

A poll returns ``{TopicPartition: [ConsumerRecord]}`` whose records carry ``offset``, ``key``,
``value``, ``headers`` (a list of ``(str, bytes)``) and ``timestamp``; ``offsets_for_times``
answers ``{TopicPartition: OffsetAndTimestamp | None}``. These turn both into the matrix's
client-neutral values (``model``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model import ConsumedRecord, ReadToEnd


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
