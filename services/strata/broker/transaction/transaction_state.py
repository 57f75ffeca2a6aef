"""The states of a transaction, their ids in ``__transaction_state``, and how each answers.

Kafka's ``TransactionState``. Before the per-state answers, every request passes the same
checks, in Kafka's order: the ``__transaction_state`` partition of the transactional id must be
led here (NOT_COORDINATOR) and loaded (COORDINATOR_LOAD_IN_PROGRESS); an unknown transactional
id is INVALID_PRODUCER_ID_MAPPING (InitProducerId creates it instead); a transaction with a
write in flight (a *pending* state: its last change is not yet acknowledged by the log, or its
markers are being written) answers CONCURRENT_TRANSACTIONS; another producer id is
INVALID_PRODUCER_ID_MAPPING; another epoch is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for
clients older than InitProducerId v4, EndTxn / AddPartitionsToTxn / AddOffsetsToTxn v2).

================  ===============  ==============  ============  ===============  ===============
request           Empty            Ongoing         Prepare*      CompleteCommit   CompleteAbort
================  ===============  ==============  ============  ===============  ===============
InitProducerId    epoch + 1        fence, abort,   CONCURRENT    epoch + 1        epoch + 1
                                   CONCURRENT
AddPartitions     -> Ongoing       add (or NONE)   CONCURRENT    -> Ongoing       -> Ongoing
verify (v4+)      ABORTABLE        NONE/ABORTABLE  CONCURRENT    ABORTABLE        ABORTABLE
EndTxn commit v1  INVALID_TXN      PrepareCommit   CONC./INVAL.  NONE (retry)     INVALID_TXN
EndTxn abort v1   INVALID_TXN      PrepareAbort    CONC./INVAL.  INVALID_TXN      NONE (retry)
EndTxn commit v2  INVALID_TXN      PrepareCommit   CONC./INVAL.  retry: NONE      INVALID_TXN
EndTxn abort v2   PrepareAbort     PrepareAbort    CONC./INVAL.  PrepareAbort     retry: NONE
                                                                 (retry: INVAL.)  else PrepAbort
timeout           -                fence, abort    -             -                -
expiration        Dead (tomb.)     -               -             Dead (tomb.)     Dead (tomb.)
================  ===============  ==============  ============  ===============  ===============

Notes on the entries:

* "epoch + 1": the producer epoch is bumped (fencing any older producer of the id); an epoch at
  ``Short.MAX_VALUE - 1`` instead rotates to a new producer id at epoch 0 (Empty). KIP-360: a
  request naming the current producer id and epoch (or the last epoch: a retry) is a producer
  recovering itself, not a new one.
* "fence, abort, CONCURRENT": the epoch is bumped (PrepareEpochFence, never returned to a
  client), the open transaction is aborted with it, and the client is told
  CONCURRENT_TRANSACTIONS; its retry then bumps the epoch again.
* "CONC./INVAL.": the same result as the one being prepared is CONCURRENT_TRANSACTIONS (v2:
  only from a retry, the epoch before the bump), the other result INVALID_TXN_STATE.
* Transactions v2 (KIP-890): every EndTxn bumps the epoch, so the client's "current" epoch
  after an EndTxn is the bumped one; an EndTxn at the epoch before the bump is a retry of the
  one that completed ("retry: NONE" answers with the current producer id and epoch). A v2
  client may abort when unsure whether a transaction is open: from Empty and Complete* it is
  prepared like any abort, with no partitions to write markers to.
* ABORTABLE = TRANSACTION_ABORTABLE: the partition was not added to the transaction (a
  produce it guards is refused and the producer aborts, KIP-890 part 1).
* "timeout": an Ongoing transaction older than its ``transaction.timeout.ms`` is fenced and
  aborted by the coordinator. "expiration": an id idle for ``transactional.id.expiration.ms``
  in a state that allows it is written as a tombstone and forgotten.

Transitions (``VALID_PREVIOUS_STATES``, Kafka 4's)::

    Empty             <- Empty, CompleteCommit, CompleteAbort       (InitProducerId)
    Ongoing           <- Ongoing, Empty, CompleteCommit, CompleteAbort  (AddPartitions)
    PrepareCommit     <- Ongoing                                    (EndTxn commit)
    PrepareAbort      <- Ongoing, PrepareEpochFence, and in v2 Empty, CompleteCommit,
                         CompleteAbort                              (EndTxn abort, timeout)
    CompleteCommit    <- PrepareCommit                              (markers written)
    CompleteAbort     <- PrepareAbort                               (markers written)
    Dead              <- Empty, CompleteCommit, CompleteAbort       (expiration)
    PrepareEpochFence <- Ongoing                                    (fencing; never written)

Pure: constants only.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final


class TransactionState(enum.Enum):
    """A transaction's state: its id in ``__transaction_state`` and its Kafka name
    (DescribeTransactions, ListTransactions)."""

    EMPTY = (0, "Empty", True)
    ONGOING = (1, "Ongoing", False)
    PREPARE_COMMIT = (2, "PrepareCommit", False)
    PREPARE_ABORT = (3, "PrepareAbort", False)
    COMPLETE_COMMIT = (4, "CompleteCommit", True)
    COMPLETE_ABORT = (5, "CompleteAbort", True)
    DEAD = (6, "Dead", False)
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence", False)

    def __init__(self, state_id: int, state_name: str, expiration_allowed: bool) -> None:
        self.id = state_id
        self.state_name = state_name
        self.expiration_allowed = expiration_allowed

    def __str__(self) -> str:
        return self.state_name

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        """The state of a ``TransactionStatus`` byte; ``ValueError`` for an unknown id."""
        state = _BY_ID.get(state_id)
        if state is None:
            raise ValueError(f"unknown transaction state id {state_id}")
        return state

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state Kafka calls ``name`` (ListTransactions' state filter), else None."""
        return _BY_NAME.get(name)

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return VALID_PREVIOUS_STATES[self]

    @property
    def is_prepare(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


class TransactionResult(enum.Enum):
    """What EndTxn asks for and what a marker writes (WriteTxnMarkers' ``transaction_result``:
    true = COMMIT)."""

    COMMIT = True
    ABORT = False

    @property
    def prepare_state(self) -> TransactionState:
        return (TransactionState.PREPARE_COMMIT if self is TransactionResult.COMMIT
                else TransactionState.PREPARE_ABORT)

    @property
    def complete_state(self) -> TransactionState:
        return (TransactionState.COMPLETE_COMMIT if self is TransactionResult.COMMIT
                else TransactionState.COMPLETE_ABORT)


_BY_ID: Final[Mapping[int, TransactionState]] = MappingProxyType(
    {state.id: state for state in TransactionState})
_BY_NAME: Final[Mapping[str, TransactionState]] = MappingProxyType(
    {state.state_name: state for state in TransactionState})

_EMPTY, _ONGOING = TransactionState.EMPTY, TransactionState.ONGOING
_PC, _PA = TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT
_CC, _CA = TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT
_DEAD, _FENCE = TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE

VALID_PREVIOUS_STATES: Final[Mapping[TransactionState, frozenset[TransactionState]]] = (
    MappingProxyType({
        _EMPTY: frozenset({_EMPTY, _CC, _CA}),
        _ONGOING: frozenset({_ONGOING, _EMPTY, _CC, _CA}),
        _PC: frozenset({_ONGOING}),
        # Empty / Complete*: transactions v2's abort when the client is unsure (checked by
        # TransactionMetadata.complete_transition_to).
        _PA: frozenset({_ONGOING, _FENCE, _EMPTY, _CC, _CA}),
        _CC: frozenset({_PC}),
        _CA: frozenset({_PA}),
        _DEAD: frozenset({_EMPTY, _CA, _CC}),
        _FENCE: frozenset({_ONGOING}),
    }))
"""Target state -> the states a transaction may move to it from (Kafka's
``VALID_PREVIOUS_STATES``)."""


def can_transition(current: TransactionState, target: TransactionState) -> bool:
    return current in VALID_PREVIOUS_STATES[target]
