"""``TransactionVersion``: the ``transaction.version`` feature levels and what each one changes.

Kafka's ``TransactionVersion`` (KIP-890). The broker's level is the finalized feature (here the
``transaction.version`` broker setting); a client's level is read from the version of the
request it sent:

===== ===================================================================================
level meaning
===== ===================================================================================
TV_0  transactions v1: ``__transaction_state`` values written as v0 (not flexible)
TV_1  values written as v1 (flexible, with tagged fields)
TV_2  transactions v2: every EndTxn bumps the producer epoch, an exhausted epoch rotates
      to a new producer id, partitions are added by the partition leaders (KIP-890 part 2)
===== ===================================================================================

A client speaks TV_2 when it sends EndTxn v5+ or (through its partition leader)
AddPartitionsToTxn v4+; anything older is TV_0. Requests the coordinator starts itself
(proactive aborts, fencing) use the broker's level. Pure constants.
"""

from __future__ import annotations

import enum
from typing import Final

FEATURE_NAME: Final = "transaction.version"

FIRST_END_TXN_VERSION_OF_TV_2: Final = 5
FIRST_ADD_PARTITIONS_TO_TXN_VERSION_OF_TV_2: Final = 4


class TransactionVersion(enum.IntEnum):
    """A ``transaction.version`` feature level."""

    TV_0 = 0
    TV_1 = 1
    TV_2 = 2

    @property
    def transaction_log_value_version(self) -> int:
        """The ``TransactionLogValue`` version written at this level (1 = flexible)."""
        return 1 if self >= TransactionVersion.TV_1 else 0

    @property
    def supports_epoch_bump(self) -> bool:
        """Transactions v2: the epoch is bumped at every transaction end."""
        return self >= TransactionVersion.TV_2

    @classmethod
    def from_feature_level(cls, level: int) -> TransactionVersion:
        """The version of a feature level; a level above the newest known is the newest."""
        if level < 0:
            raise ValueError(f"{FEATURE_NAME} level must not be negative, got {level}")
        return cls(min(level, max(cls)))

    @classmethod
    def for_end_txn(cls, api_version: int) -> TransactionVersion:
        return cls.TV_2 if api_version >= FIRST_END_TXN_VERSION_OF_TV_2 else cls.TV_0

    @classmethod
    def for_add_partitions_to_txn(cls, api_version: int) -> TransactionVersion:
        return cls.TV_2 if api_version >= FIRST_ADD_PARTITIONS_TO_TXN_VERSION_OF_TV_2 else cls.TV_0
