"""Transaction verification state of one producer on one partition (Kafka's
``VerificationStateEntry`` and ``VerificationGuard``, KIP-890 part 1).

Before a partition leader appends the first transactional batch of a producer that has no
open transaction on the partition, the broker asks the transaction coordinator whether the
partition is part of the producer's transaction. Between the question and the append, the
transaction may end (its marker lands) and a new one start; a late append would then open a
transaction the coordinator never heard of — a *hanging* transaction that holds the last stable
offset forever. The guard closes that window:

* ``VerificationState`` is created when verification starts; its ``guard`` is a number unique
  in the process (never ``SENTINEL_GUARD``), carried by the produce request to its append;
* any transactional batch of the producer appended to the partition (its first data batch, or
  a marker) removes the state, so a guard taken before a marker no longer matches after it;
* an append of a transactional batch with no open transaction is refused unless its guard is
  the state's guard (``ProducerStateManager.check``);
* ``lowest_sequence``: while verifying, a batch with a higher sequence of the same epoch is
  out of order (a retried lower sequence must go first); a higher epoch resets it.

Pure: the clock is the caller's ``now_ms``. Not thread-safe (the owning log's thread).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Final

SENTINEL_GUARD: Final = 0
"""No guard: never verifies anything (Kafka's ``VerificationGuard.SENTINEL``)."""

_next_guard = itertools.count(1)


@dataclass
class VerificationState:
    """One producer's verification in progress on one partition."""

    timestamp_ms: int
    lowest_sequence: int
    epoch: int
    guard: int = field(default_factory=lambda: next(_next_guard))

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        """A lower sequence of the same epoch lowers the bar; a higher epoch resets it."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence

    def verifies(self, guard: int) -> bool:
        return guard != SENTINEL_GUARD and guard == self.guard
