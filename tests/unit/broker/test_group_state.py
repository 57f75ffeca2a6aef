"""The group state table, checked against the membership protocol: every state x request.

For each state a group is driven there through the real protocol (no state is set by hand but
Dead, which only unloading reaches), then a follower of the current generation (``m2``) sends
each request; the answer must be the table's. Pure: no asyncio, a ``ManualClock``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from strata.broker.group.classic_group import ClassicGroup
from strata.broker.group.member import JoinGroupResult, SyncGroupResult
from strata.broker.group.membership import GroupMembership, JoinRequest
from strata.broker.group.rebalance import GroupConfig, StoreCallback
from strata.broker.group.state import (
    ANSWERS,
    VALID_PREVIOUS_STATES,
    Action,
    GroupRequest,
    GroupState,
    IllegalGroupTransition,
    answer,
    can_transition,
)
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import ManualClock

from .helpers import consumer_subscription

PROTOCOLS = (("range", consumer_subscription("t")),)


@dataclass
class RecordingStore:
    """``GroupStore`` that records each write and succeeds at once (or fails with ``error``)."""

    error: ErrorCode = ErrorCode.none
    writes: list[tuple[str, int, dict[str, bytes]]] = field(default_factory=list)

    def store_group(self, group: ClassicGroup, assignment: Mapping[str, bytes],
                    on_done: StoreCallback) -> None:
        self.writes.append((group.group_id, group.generation_id, dict(assignment)))
        on_done(self.error)


def join_request(member_id: str = "", *, instance: str | None = None, require_known: bool = False,
                 protocols: tuple[tuple[str, bytes], ...] = PROTOCOLS, session_ms: int = 10_000,
                 rebalance_ms: int = 30_000, client_id: str = "c") -> JoinRequest:
    return JoinRequest(member_id, instance, require_known, client_id, "/127.0.0.1", rebalance_ms,
                       session_ms, "consumer", protocols)


class Harness:
    """One group and the protocol around it, with answers collected per call."""

    def __init__(self, **config: int) -> None:
        self.clock = ManualClock()
        self.store = RecordingStore()
        self.membership = GroupMembership(
            GroupConfig(**{"initial_rebalance_delay_ms": 0, **config}), self.store)
        self.group = ClassicGroup("g", self.clock)

    def expire(self) -> None:
        self.membership.expire_due(self.group, self.clock.monotonic_ms())

    def join(self, request: JoinRequest) -> list[JoinGroupResult]:
        answers: list[JoinGroupResult] = []
        self.membership.join_group(self.group, request, answers.append)
        return answers

    def sync(self, member_id: str, assignments: Mapping[str, bytes] | None = None,
             generation: int | None = None, instance: str | None = None) -> list[SyncGroupResult]:
        answers: list[SyncGroupResult] = []
        gen = self.group.generation_id if generation is None else generation
        self.membership.sync_group(self.group, gen, member_id, instance, assignments or {},
                                   answers.append)
        return answers

    def new_member(self) -> tuple[str, list[JoinGroupResult]]:
        """A dynamic member joins (no member id required); returns its id and answers."""
        before = set(self.group.members)
        answers = self.join(join_request())
        (member_id,) = set(self.group.members) - before
        return member_id, answers


def stable_pair() -> tuple[Harness, str, str]:
    """A Stable group of a leader m1 and a follower m2 at generation 2."""
    h = Harness()
    m1, first = h.new_member()
    h.expire()  # the initial delay (0) expires: generation 1 with m1
    assert first[0].error == ErrorCode.none and first[0].generation_id == 1
    h.sync(m1, {m1: b"a1"})
    m2, second = h.new_member()
    assert h.group.state is GroupState.PREPARING_REBALANCE and not second
    rejoin = h.join(join_request(m1))
    assert h.group.state is GroupState.COMPLETING_REBALANCE
    assert rejoin[0].leader_id == m1 and len(rejoin[0].members) == 2
    follower = h.sync(m2)
    assert not follower  # parked until the leader's assignment
    h.sync(m1, {m1: b"a1", m2: b"a2"})
    assert follower == [SyncGroupResult(ErrorCode.none, b"a2", "consumer", "range")]
    assert h.group.state is GroupState.STABLE and h.group.generation_id == 2
    return h, m1, m2


def group_in(state: GroupState) -> tuple[Harness, str]:
    """A group in ``state`` and the follower ``m2`` (of its current generation, if any)."""
    h, m1, m2 = stable_pair()
    if state is GroupState.PREPARING_REBALANCE:
        h.new_member()  # m3 joins: m1 and m2 have not rejoined yet
    elif state is GroupState.COMPLETING_REBALANCE:
        h.join(join_request(m1))  # the leader rejoins: rebalance
        h.join(join_request(m2))
    elif state is GroupState.EMPTY:
        h.membership.leave_group(h.group, [(m1, None), (m2, None)])
        h.expire()
    elif state is GroupState.DEAD:
        h.membership.on_group_unloaded(h.group)
    assert h.group.state is state
    return h, m2


def send(h: Harness, request: GroupRequest, member_id: str) -> list[ErrorCode]:
    """``request`` from ``member_id``: the errors answered so far (none while parked)."""
    group, generation = h.group, h.group.generation_id
    if request is GroupRequest.JOIN_NEW_MEMBER:
        return [a.error for a in h.join(join_request())]
    if request is GroupRequest.JOIN:
        return [a.error for a in h.join(join_request(member_id))]
    if request is GroupRequest.SYNC:
        return [a.error for a in h.sync(member_id)]
    if request is GroupRequest.HEARTBEAT:
        return [h.membership.heartbeat(group, member_id, None, generation)]
    if request is GroupRequest.LEAVE:
        top, errors = h.membership.leave_group(group, [(member_id, None)])
        return [top] if top != ErrorCode.none else errors
    if request is GroupRequest.MEMBER_OFFSET_COMMIT:
        return [h.membership.validate_offset_commit(group, member_id, None, generation)]
    return [h.membership.validate_offset_commit(group, "", None, -1)]


CASES = [(s, r) for s in GroupState for r in GroupRequest]


@pytest.mark.parametrize(("state", "request_kind"), CASES,
                         ids=[f"{s.value}-{r.name}" for s, r in CASES])
def test_every_state_answers_every_request_as_the_table_says(
        state: GroupState, request_kind: GroupRequest) -> None:
    h, member = group_in(state)
    size_before = h.group.size + len(h.group.pending_members)
    expected = answer(state, request_kind)
    answered = send(h, request_kind, member)
    if expected.action in (Action.AWAIT_JOIN, Action.AWAIT_ASSIGNMENT):
        assert answered == []  # parked
    elif expected.action is Action.ADD_MEMBER:
        assert h.group.size + len(h.group.pending_members) == size_before + 1
        # parked until the join completes, except an Empty group whose delay (0) is due now
        assert answered == []
    else:
        assert answered == [expected.error]
    if expected.action is Action.REMOVE_MEMBER:
        assert not h.group.has(member)


def test_stable_leader_join_rebalances_where_a_follower_gets_the_generation() -> None:
    h, m1, m2 = stable_pair()
    follower = h.join(join_request(m2))
    assert follower[0].error == ErrorCode.none and follower[0].generation_id == 2
    assert follower[0].members == () and h.group.state is GroupState.STABLE
    assert h.join(join_request(m1)) == []
    assert h.group.state is GroupState.PREPARING_REBALANCE


@pytest.mark.parametrize("state", [GroupState.COMPLETING_REBALANCE, GroupState.STABLE])
def test_changed_metadata_always_rebalances(state: GroupState) -> None:
    h, member = group_in(state)
    changed = (("range", consumer_subscription("t", "u")),)
    assert h.join(join_request(member, protocols=changed)) == []
    assert h.group.state is GroupState.PREPARING_REBALANCE


def test_member_checks_come_before_the_table() -> None:
    h, _m1, m2 = stable_pair()
    assert h.membership.heartbeat(h.group, m2, None, 1) == ErrorCode.illegal_generation
    assert h.membership.heartbeat(h.group, "nobody", None, 2) == ErrorCode.unknown_member_id
    assert h.sync(m2, generation=7) == [SyncGroupResult(ErrorCode.illegal_generation)]
    assert h.membership.validate_offset_commit(h.group, m2, None, 3) == \
        ErrorCode.illegal_generation


def test_the_table_covers_every_state_and_request() -> None:
    assert set(ANSWERS) == set(GroupState)
    for state in GroupState:
        assert set(ANSWERS[state]) == set(GroupRequest)
        assert answer(GroupState.DEAD, next(iter(GroupRequest))).error == \
            ErrorCode.coordinator_not_available


TRANSITIONS = [(a, b) for a in GroupState for b in GroupState]


@pytest.mark.parametrize(("current", "target"), TRANSITIONS,
                         ids=[f"{a.value}-{b.value}" for a, b in TRANSITIONS])
def test_transitions_follow_the_table(current: GroupState, target: GroupState) -> None:
    allowed = current in VALID_PREVIOUS_STATES[target]
    assert can_transition(current, target) is allowed
    group = ClassicGroup("g", ManualClock(), current)
    if allowed:
        group.transition_to(target)
        assert group.state is target
    else:
        with pytest.raises(IllegalGroupTransition):
            group.transition_to(target)


def test_kafka_transitions() -> None:
    e, p, c, s, d = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                     GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)
    assert {(a, b) for a, b in TRANSITIONS if can_transition(a, b)} == {
        (e, p), (p, c), (p, e), (c, s), (c, p), (s, p),
        (e, d), (p, d), (c, d), (s, d), (d, d)}
