"""The rebalance of one classic group: prepare it, complete the join, hand out the
assignment, and the delayed operations that drive it (expired by ``expire_due``).

Kafka's rebalance steps (``GroupCoordinator.prepareRebalance``, ``onCompleteJoin``,
``propagateAssignment``) and its delayed operations, applied to a ``ClassicGroup``. Members'
requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the commit check) are the subclass's,
``membership.GroupMembership``; this base owns what they trigger. Group metadata is persisted
through ``GroupStore.store_group``, whose ``on_done`` may be called at once (one broker: the
append is done when it returns) or later (once replicated); the code re-checks state and
generation when it is.

Delayed operations are deadlines on the group (see ``classic_group``), on the injected clock,
expired by ``expire_due`` in deadline order:

* delayed join: ``rebalance timeout`` (the members' largest) after a rebalance starts, or early
  once every member rejoined and no member is pending. A rebalance of an Empty group first
  waits ``group.initial.rebalance.delay.ms`` (again while new members keep arriving, up to
  the rebalance timeout) and never completes early (Kafka's ``InitialDelayedJoin``);
* sessions: ``session.timeout.ms`` after each heartbeat (or commit, or join/sync answer); a new
  member's parked JoinGroup gets ``NEW_MEMBER_JOIN_TIMEOUT_MS`` (``membership``); a pending
  member id expires after its session timeout;
* pending sync: ``rebalance timeout`` after the join completes, members that sent no SyncGroup
  are removed and the group rebalances (Kafka 3.x's ``DelayedSync``).

Invariants: a parked JoinGroup or SyncGroup callback is called at most once (through the
group); a join completes only in PreparingRebalance; an assignment reaches members only for the
generation it was stored for. Pure: no I/O, no asyncio. Called only on the event loop, by the
coordinator.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from strata.broker.group.classic_group import ClassicGroup, InitialJoin
from strata.broker.group.member import (
    UNKNOWN_MEMBER_ID,
    GroupMember,
    JoinGroupResult,
    SyncGroupResult,
)
from strata.broker.group.state import GroupState
from strata.protocol.error_codes import ErrorCode

logger = logging.getLogger(__name__)

_E, _P, _C, _S, _D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                      GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)
MAX_EXPIRATIONS_PER_CALL: Final = 10_000


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker's ``group.*`` settings (Kafka's defaults)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1


StoreCallback = Callable[[ErrorCode], None]


class GroupStore(Protocol):
    """Where group metadata is persisted (``__consumer_offsets``)."""

    def store_group(self, group: ClassicGroup, assignment: Mapping[str, bytes],
                    on_done: StoreCallback) -> None:
        """Write the group's metadata with ``assignment`` (member id -> bytes); call
        ``on_done(error)`` once it is durable (NONE) or failed."""
        ...


class GroupRebalance:
    """Kafka's rebalance of a classic group and its delayed operations (see the module
    docstring); ``GroupMembership`` adds the members' requests."""

    def __init__(self, config: GroupConfig, store: GroupStore) -> None:
        self.config = config
        self.store = store

    # ============================================================== rebalance
    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance:
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.state is _C:
            self._propagate_assignment(group, ErrorCode.rebalance_in_progress, reset=True)
        group.pending_sync_members.clear()
        group.sync_deadline = None
        if group.state is _E:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_join = InitialJoin(delay, delay,
                                             max(group.rebalance_timeout_ms - delay, 0))
            group.join_deadline = group.deadline_after(delay)
        else:
            group.initial_join = None
            group.join_deadline = group.deadline_after(group.rebalance_timeout_ms)
        group.transition_to(_P)
        logger.info("preparing to rebalance group %s with old generation %d (reason: %s)",
                    group.group_id, group.generation_id, reason)
        self._try_complete_join(group)

    def _remove_member_and_update_group(self, group: ClassicGroup, member: GroupMember,
                                        reason: str) -> None:
        # A parked JoinGroup (a new member timing out) is answered so the client rejoins.
        group.maybe_invoke_join_callback(
            member, JoinGroupResult(ErrorCode.unknown_member_id, UNKNOWN_MEMBER_ID))
        group.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        member.heartbeat_deadline = None
        if group.state in (_S, _C):
            self._maybe_prepare_rebalance(group, reason)
        elif group.state is _P:
            self._try_complete_join(group)

    def _try_complete_join(self, group: ClassicGroup) -> None:
        """The delayed join completes early once everyone rejoined (not the initial delay)."""
        if (group.state is _P and group.join_deadline is not None
                and group.initial_join is None and group.has_all_members_joined):
            group.join_deadline = None
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """The join phase ends: dynamic members that did not rejoin are dropped, then either a
        new generation starts (CompletingRebalance; every parked JoinGroup is answered, the
        leader's with the member list) or, nobody left, the group is Empty."""
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                group.remove(member.member_id)
                member.heartbeat_deadline = None
                logger.info("group %s removed member %s: it did not rejoin in time",
                            group.group_id, member.member_id)
        if group.state is _D:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait until they do or expire.
            logger.error("group %s could not complete the rebalance: no member rejoined",
                         group.group_id)
            group.initial_join = None
            group.join_deadline = group.deadline_after(max(group.rebalance_timeout_ms, 1))
            return
        group.init_next_generation()
        if group.state is _E:
            logger.info("group %s with generation %d is now empty", group.group_id,
                        group.generation_id)

            def stored(error: ErrorCode) -> None:
                if error != ErrorCode.none:
                    logger.warning("cannot write the empty metadata of group %s: %s",
                                   group.group_id, error.name)

            self.store.store_group(group, {}, stored)
            return
        logger.info("stabilized group %s generation %d with %d members", group.group_id,
                    group.generation_id, group.size)
        all_members = group.current_member_metadata()
        for member in list(group.members.values()):
            leader = group.is_leader(member.member_id)
            group.maybe_invoke_join_callback(member, JoinGroupResult(
                ErrorCode.none, member.member_id, group.generation_id, group.protocol_type,
                group.protocol_name, group.leader_id or "", all_members if leader else ()))
            self._schedule_session(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.sync_deadline = group.deadline_after(group.rebalance_timeout_ms)
        group.sync_generation = group.generation_id

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode, *,
                              reset: bool = False) -> None:
        ok = error == ErrorCode.none
        for member in group.members.values():
            if reset:
                member.assignment = b""
            result = SyncGroupResult(error, member.assignment,
                                     group.protocol_type if ok else None,
                                     group.protocol_name if ok else None)
            if group.maybe_invoke_sync_callback(member, result):
                # Its session may have lapsed while it waited: start a fresh one.
                self._schedule_session(group, member)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            group.sync_deadline = None

    def _schedule_session(self, group: ClassicGroup, member: GroupMember,
                          timeout_ms: int | None = None) -> None:
        """The member was heard from: its session runs again from now."""
        member.heartbeat_deadline = group.deadline_after(
            member.session_timeout_ms if timeout_ms is None else timeout_ms)

    # ================================================================ loading
    def on_group_loaded(self, group: ClassicGroup) -> None:
        """A group replayed from the log: its members' sessions start now."""
        if group.size > self.config.max_size:
            self.prepare_rebalance(group, f"loaded group is over capacity "
                                          f"({self.config.max_size})")
        for member in group.members.values():
            self._schedule_session(group, member)

    def on_group_unloaded(self, group: ClassicGroup) -> None:
        """This broker stops coordinating the group: parked requests are answered
        NOT_COORDINATOR (clients find the new coordinator) and the group is Dead."""
        previous = group.state
        group.transition_to(_D)
        for member in list(group.members.values()):
            if previous is _P:
                group.maybe_invoke_join_callback(
                    member, JoinGroupResult(ErrorCode.not_coordinator, member.member_id))
            elif previous in (_S, _C):
                group.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.not_coordinator))
            member.heartbeat_deadline = None
        group.join_deadline = group.sync_deadline = None
        group.initial_join = None
        group.pending_members.clear()
        group.pending_sync_members.clear()

    # ================================================================= expiry
    @staticmethod
    def next_deadline(group: ClassicGroup) -> float | None:
        deadlines = [d for d in (group.join_deadline, group.sync_deadline) if d is not None]
        deadlines.extend(group.pending_members.values())
        deadlines.extend(m.heartbeat_deadline for m in group.members.values()
                         if m.heartbeat_deadline is not None)
        return min(deadlines, default=None)

    def expire_due(self, group: ClassicGroup, now: float) -> None:
        """Run every delayed operation of ``group`` due at ``now``, earliest first (one may
        schedule or cancel others, e.g. the initial join with a delay of 0)."""
        for _ in range(MAX_EXPIRATIONS_PER_CALL):
            due = self._earliest_due(group, now)
            if due is None:
                return
            kind, key = due
            if kind == "pending":
                del group.pending_members[key]
                logger.info("pending member %s of group %s expired", key, group.group_id)
                self._try_complete_join(group)
            elif kind == "session":
                member = group.members[key]
                member.heartbeat_deadline = None
                if not member.survives_session_expiry:
                    logger.info("member %s of group %s failed (session timeout), removing it",
                                key, group.group_id)
                    self._remove_member_and_update_group(
                        group, member, f"member {key} failed its session timeout")
            elif kind == "join":
                group.join_deadline = None
                self._expire_join(group)
            else:
                group.sync_deadline = None
                self._expire_pending_sync(group)
        logger.warning("group %s: more than %d expirations at once; the rest wait",
                       group.group_id, MAX_EXPIRATIONS_PER_CALL)

    @staticmethod
    def _earliest_due(group: ClassicGroup, now: float) -> tuple[str, str] | None:
        best: tuple[float, str, str] | None = None

        def consider(deadline: float | None, kind: str, key: str) -> None:
            nonlocal best
            if deadline is not None and deadline <= now and (best is None or deadline < best[0]):
                best = (deadline, kind, key)

        for member_id, deadline in group.pending_members.items():
            consider(deadline, "pending", member_id)
        for member in group.members.values():
            consider(member.heartbeat_deadline, "session", member.member_id)
        consider(group.join_deadline, "join", "")
        consider(group.sync_deadline, "sync", "")
        return None if best is None else (best[1], best[2])

    def _expire_join(self, group: ClassicGroup) -> None:
        initial = group.initial_join
        if initial is None:
            self._complete_join(group)
            return
        if group.new_member_added and initial.remaining_ms != 0:
            # Kafka's InitialDelayedJoin: another member arrived, wait once more.
            group.new_member_added = False
            delay = min(initial.configured_delay_ms, initial.remaining_ms)
            remaining = max(initial.remaining_ms - initial.delay_ms, 0)
            group.initial_join = InitialJoin(initial.configured_delay_ms, delay, remaining)
            group.join_deadline = group.deadline_after(delay)
            return
        group.initial_join = None
        self._complete_join(group)

    def _expire_pending_sync(self, group: ClassicGroup) -> None:
        if group.sync_generation != group.generation_id or group.state not in (_C, _S):
            return
        missing = sorted(group.pending_sync_members)
        if not missing:
            return
        for member_id in missing:
            member = group.remove(member_id)
            if member is not None:
                member.heartbeat_deadline = None
        logger.info("group %s removed members %s: no SyncGroup within the rebalance timeout",
                    group.group_id, missing)
        self.prepare_rebalance(group, f"members {missing} sent no SyncGroup in time")
