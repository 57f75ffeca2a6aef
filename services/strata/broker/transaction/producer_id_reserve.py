"""``ProducerIdReserve``: producer ids handed out synchronously, refilled by the async shell.

The coordinator's decisions are synchronous and take their producer ids from a plain callable;
the broker's ``ProducerIdManager`` is asynchronous (a block may have to be written or taken from
the metadata store first). The reserve sits between them, as Kafka's RPC producer id manager
does with its prefetched block: ``take`` hands out an id it already holds, or raises
``ProducerIdUnavailableError`` (answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry);
the shell keeps it topped up to ``target`` ids (``missing``, ``refill``), e.g. after every
decision that took one. Invariant: ids come out in the order they were put in, each once.
Owned by the broker's event loop; pure.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from strata.broker.transaction.transaction_decision import ProducerIdUnavailableError


class ProducerIdReserve:
    def __init__(self, target: int = 8) -> None:
        if target < 1:
            raise ValueError(f"a producer id reserve holds at least one id, got {target}")
        self.target = target
        self._ids: deque[int] = deque()

    def __call__(self) -> int:
        return self.take()

    def __len__(self) -> int:
        return len(self._ids)

    def take(self) -> int:
        if not self._ids:
            raise ProducerIdUnavailableError("no producer id in reserve yet")
        return self._ids.popleft()

    @property
    def missing(self) -> int:
        """How many ids the shell should fetch to reach ``target``."""
        return max(self.target - len(self._ids), 0)

    def refill(self, producer_ids: Iterable[int]) -> None:
        self._ids.extend(producer_ids)
