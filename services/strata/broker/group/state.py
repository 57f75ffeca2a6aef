"""The states of a classic consumer group, how each state answers each request, and the moves.

Kafka's ``ClassicGroupState`` (its enum documents the same, in prose); here the answers are a
table the membership code consults (``answer``), so the prose and the behaviour cannot drift. A
table entry is how a group in that state answers a request from a *member of the current
generation* (or, for the two commit kinds and a new member's JoinGroup, from whoever sends
one), after two checks every request passes first, in Kafka's order: a request naming a static
member whose ``group.instance.id`` maps to another member id is FENCED_INSTANCE_ID, an unknown
member id is UNKNOWN_MEMBER_ID, and a SyncGroup, Heartbeat or member OffsetCommit naming another
generation is ILLEGAL_GENERATION. A Dead group answers before those checks.

===================== ==============  ==================  ===================  ===============  ====
request               Empty           PreparingRebalance  CompletingRebalance  Stable           Dead
===================== ==============  ==================  ===================  ===============  ====
JoinGroup, new member add member      add member          add member           add member       CNA
JoinGroup, member     UNKNOWN_MEMBER  park until joined   current generation   followers: cur.  CNA
SyncGroup             UNKNOWN_MEMBER  REBALANCE_IN_PROG.  park until assigned  assignment       CNA
Heartbeat             UNKNOWN_MEMBER  keep alive, RIP     keep alive           keep alive       CNA
LeaveGroup            UNKNOWN_MEMBER  remove member       remove member        remove member    CNA
OffsetCommit, member  UNKNOWN_MEMBER  store offsets       REBALANCE_IN_PROG.   store offsets    CNA
OffsetCommit, simple  store offsets   UNKNOWN_MEMBER      UNKNOWN_MEMBER       UNKNOWN_MEMBER   CNA
===================== ==============  ==================  ===================  ===============  ====

(CNA = COORDINATOR_NOT_AVAILABLE: the group was just unloaded or deleted; the client finds the
coordinator again. RIP = REBALANCE_IN_PROGRESS.) Notes on the entries:

* "add member": a new dynamic member of JoinGroup v4+ is first only *pending* (answered
  MEMBER_ID_REQUIRED with its new id, KIP-394); otherwise it joins and the group rebalances. A
  static member whose ``group.instance.id`` is known replaces the old member id; in Stable that
  does not rebalance unless the group's protocol would change (KIP-345).
* "current generation" (JoinGroup from a member): unchanged metadata gets the current generation
  back (the leader also the member list); changed metadata starts a rebalance. In Stable
  ("followers: cur.") a JoinGroup from the leader always starts one: it is how a leader asks for
  a new assignment when topic metadata changed.
* "keep alive" in CompletingRebalance answers NONE: clients heartbeat between their JoinGroup
  and SyncGroup responses (Kafka's coordinator code does this; its enum's prose still says
  REBALANCE_IN_PROGRESS).
* OffsetCommit during PreparingRebalance is accepted from members of the current generation, so
  a consumer committing in its revocation callback loses nothing (Kafka does the same). A simple
  commit (generation -1, empty member id: ``assign()`` consumers, admin tools) is accepted only
  while the group has no members. OffsetFetch is answered in every state.

Transitions (``VALID_PREVIOUS_STATES``, Kafka's)::

    Empty               -> PreparingRebalance (a member joins)       | Dead (expired, deleted)
    PreparingRebalance  -> CompletingRebalance (the join completed)  | Empty (none left) | Dead
    CompletingRebalance -> Stable (the leader's assignment stored)   | PreparingRebalance | Dead
    Stable              -> PreparingRebalance (join, leave, failure) | Dead
    Dead                -> Dead

Pure: no I/O, no clock. Owned by nobody (constants).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from strata.protocol.error_codes import ErrorCode


class GroupState(enum.Enum):
    """A classic group's state; the value is Kafka's name (DescribeGroups, ListGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


class GroupRequest(enum.Enum):
    """The requests whose answer depends on the group's state (the rows of the table)."""

    JOIN_NEW_MEMBER = "JoinGroup from a new member"
    JOIN = "JoinGroup from a member"
    SYNC = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    LEAVE = "LeaveGroup"
    MEMBER_OFFSET_COMMIT = "OffsetCommit from a member"
    SIMPLE_OFFSET_COMMIT = "OffsetCommit without a member (generation -1)"


class Action(enum.Enum):
    """What the group does with a request that passed the member checks."""

    REJECT = "answer the error only"
    ADD_MEMBER = "add the member (or make it pending), rebalance"
    AWAIT_JOIN = "update the member's metadata, answer when the join completes"
    RETURN_GENERATION = "answer the current generation, or rebalance on changed metadata"
    RETURN_GENERATION_TO_FOLLOWER = "as RETURN_GENERATION, but the leader always rebalances"
    AWAIT_ASSIGNMENT = "answer when the leader's assignment is stored"
    RETURN_ASSIGNMENT = "answer the member's current assignment"
    KEEP_ALIVE = "reset the member's session timer"
    REMOVE_MEMBER = "remove the member, rebalance"
    STORE_OFFSETS = "append the offsets to __consumer_offsets"


@dataclass(frozen=True, slots=True)
class Answer:
    action: Action
    error: ErrorCode = ErrorCode.none


_CNA: Final = Answer(Action.REJECT, ErrorCode.coordinator_not_available)
_UNKNOWN: Final = Answer(Action.REJECT, ErrorCode.unknown_member_id)
_RIP: Final = Answer(Action.REJECT, ErrorCode.rebalance_in_progress)

_E, _P, _C, _S, _D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                      GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)
_R = GroupRequest

ANSWERS: Final[Mapping[GroupState, Mapping[GroupRequest, Answer]]] = MappingProxyType({
    _E: MappingProxyType({
        _R.JOIN_NEW_MEMBER: Answer(Action.ADD_MEMBER),
        _R.JOIN: _UNKNOWN,
        _R.SYNC: _UNKNOWN,
        _R.HEARTBEAT: _UNKNOWN,
        _R.LEAVE: _UNKNOWN,
        _R.MEMBER_OFFSET_COMMIT: _UNKNOWN,
        _R.SIMPLE_OFFSET_COMMIT: Answer(Action.STORE_OFFSETS),
    }),
    _P: MappingProxyType({
        _R.JOIN_NEW_MEMBER: Answer(Action.ADD_MEMBER),
        _R.JOIN: Answer(Action.AWAIT_JOIN),
        _R.SYNC: _RIP,
        _R.HEARTBEAT: Answer(Action.KEEP_ALIVE, ErrorCode.rebalance_in_progress),
        _R.LEAVE: Answer(Action.REMOVE_MEMBER),
        _R.MEMBER_OFFSET_COMMIT: Answer(Action.STORE_OFFSETS),
        _R.SIMPLE_OFFSET_COMMIT: _UNKNOWN,
    }),
    _C: MappingProxyType({
        _R.JOIN_NEW_MEMBER: Answer(Action.ADD_MEMBER),
        _R.JOIN: Answer(Action.RETURN_GENERATION),
        _R.SYNC: Answer(Action.AWAIT_ASSIGNMENT),
        _R.HEARTBEAT: Answer(Action.KEEP_ALIVE),
        _R.LEAVE: Answer(Action.REMOVE_MEMBER),
        _R.MEMBER_OFFSET_COMMIT: _RIP,
        _R.SIMPLE_OFFSET_COMMIT: _UNKNOWN,
    }),
    _S: MappingProxyType({
        _R.JOIN_NEW_MEMBER: Answer(Action.ADD_MEMBER),
        _R.JOIN: Answer(Action.RETURN_GENERATION_TO_FOLLOWER),
        _R.SYNC: Answer(Action.RETURN_ASSIGNMENT),
        _R.HEARTBEAT: Answer(Action.KEEP_ALIVE),
        _R.LEAVE: Answer(Action.REMOVE_MEMBER),
        _R.MEMBER_OFFSET_COMMIT: Answer(Action.STORE_OFFSETS),
        _R.SIMPLE_OFFSET_COMMIT: _UNKNOWN,
    }),
    _D: MappingProxyType({request: _CNA for request in GroupRequest}),
})
"""State -> request -> answer: the table of the module docstring."""

VALID_PREVIOUS_STATES: Final[Mapping[GroupState, frozenset[GroupState]]] = MappingProxyType({
    _E: frozenset({_P}),
    _P: frozenset({_S, _C, _E}),
    _C: frozenset({_P}),
    _S: frozenset({_C}),
    _D: frozenset({_S, _P, _C, _E, _D}),
})
"""Target state -> the states a group may move to it from (Kafka's ``validPreviousStates``)."""


def answer(state: GroupState, request: GroupRequest) -> Answer:
    """How a group in ``state`` answers ``request`` (see the table)."""
    return ANSWERS[state][request]


def can_transition(current: GroupState, target: GroupState) -> bool:
    return current in VALID_PREVIOUS_STATES[target]


class IllegalGroupTransition(RuntimeError):
    """A move the table does not allow: a coordinator bug, never a client's error."""
