"""The classic group membership protocol on one group: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, the commit check, and the expiry of the delayed join, sync and sessions.

Kafka's ``GroupCoordinator`` logic (the classic protocol, KIP-62/345/394 included), applied to a
``ClassicGroup`` the coordinator has already looked up; what a request gets in each state comes
from ``group_state.answer`` (the table). The coordinator (``group_coordinator``) does the
checks that come first — group id, coordinator loaded, session timeout bounds — and owns the
groups map, the timers and the log.

Responses of parked requests (a JoinGroup waiting for the rebalance, a follower's SyncGroup
waiting for the leader's assignment) go through the callbacks the requests brought; a callback
is called at most once. Group metadata is persisted through ``GroupStore.store_group``, whose
``on_done`` may be called at once (one broker: the append is done when it returns) or later
(once replicated); the code re-checks state and generation when it is.

Delayed operations are deadlines on the group (see ``group``), on the injected clock, expired
by ``expire_due`` in deadline order:

* delayed join: ``rebalance timeout`` (the members' largest) after a rebalance starts, or early
  once every member rejoined and no member is pending. A rebalance of an Empty group first
  waits ``group.initial.rebalance.delay.ms`` (again while new members keep arriving, up to
  the rebalance timeout) and never completes early (Kafka's ``InitialDelayedJoin``);
* sessions: ``session.timeout.ms`` after each heartbeat (or commit, or join/sync answer); a new
  member's parked JoinGroup gets ``NEW_MEMBER_JOIN_TIMEOUT_MS``; a pending member id expires
  after its session timeout;
* pending sync: ``rebalance timeout`` after the join completes, members that sent no SyncGroup
  are removed and the group rebalances (Kafka 3.x's ``DelayedSync``).

Pure: no I/O, no asyncio. Called only on the event loop, by the coordinator.

Why one module of ~650 lines: join, sync, leave and the three expiries are the transitions of
one state machine over the same group; they call each other (an expiry removes a member and
prepares a rebalance, which may complete the join) and share its invariants. Split apart, each
half would need the other's private steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from strata.broker.group.classic_group import ClassicGroup, InitialJoin
from strata.broker.group.member import (
    UNKNOWN_MEMBER_ID,
    GroupMember,
    JoinCallback,
    JoinGroupResult,
    Protocols,
    SyncCallback,
    SyncGroupResult,
)
from strata.broker.group.state import Action, GroupRequest, GroupState, answer
from strata.protocol.error_codes import ErrorCode

logger = logging.getLogger(__name__)

_E, _P, _C, _S, _D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                      GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)
MAX_EXPIRATIONS_PER_CALL: Final = 10_000
NEW_MEMBER_JOIN_TIMEOUT_MS: Final = 5 * 60 * 1000
"""A new member's parked JoinGroup expires after this (it cannot heartbeat yet; Kafka's value)."""


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker's ``group.*`` settings (Kafka's defaults)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup, version-neutral (v0's rebalance timeout is its session timeout)."""

    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols


StoreCallback = Callable[[ErrorCode], None]


class GroupStore(Protocol):
    """Where group metadata is persisted (``__consumer_offsets``)."""

    def store_group(self, group: ClassicGroup, assignment: Mapping[str, bytes],
                    on_done: StoreCallback) -> None:
        """Write the group's metadata with ``assignment`` (member id -> bytes); call
        ``on_done(error)`` once it is durable (NONE) or failed."""
        ...


class GroupMembership:
    """Kafka's classic-group protocol over ``ClassicGroup`` objects (see the module docstring)."""

    def __init__(self, config: GroupConfig, store: GroupStore) -> None:
        self.config = config
        self.store = store

    # ============================================================== JoinGroup
    def join_group(self, group: ClassicGroup, request: JoinRequest,
                   respond: JoinCallback) -> None:
        """A JoinGroup on an existing (or just created) group; answers through ``respond``,
        now or when the rebalance completes."""
        member_id = request.member_id
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            respond(JoinGroupResult(ErrorCode.group_max_size_reached, UNKNOWN_MEMBER_ID))
        elif member_id == UNKNOWN_MEMBER_ID:
            self._new_member_join(group, request, respond)
        else:
            self._current_member_join(group, request, respond)
        if group.state is _P:
            self._try_complete_join(group)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """``group.max.size``: members already parked are kept, new ones fill what is left."""
        max_size = self.config.max_size
        if group.state in (_E, _D):
            return True
        if group.state is _P:
            return ((group.has(member_id) and group.get(member_id).is_awaiting_join)
                    or group.num_members_awaiting_join < max_size)
        return group.has(member_id) or group.size < max_size

    def _new_member_join(self, group: ClassicGroup, request: JoinRequest,
                         respond: JoinCallback) -> None:
        verdict = answer(group.state, GroupRequest.JOIN_NEW_MEMBER)
        if verdict.action is Action.REJECT:
            respond(JoinGroupResult(verdict.error, UNKNOWN_MEMBER_ID))
            return
        names = [name for name, _ in request.protocols]
        if not group.supports_protocols(request.protocol_type, names):
            respond(JoinGroupResult(ErrorCode.inconsistent_group_protocol, UNKNOWN_MEMBER_ID))
            return
        new_member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        instance = request.group_instance_id
        if instance is not None:
            old_member_id = group.static_member_id(instance)
            if old_member_id is not None:
                logger.info("static member %s of group %s rejoins with a new member id %s "
                            "(replacing %s) in state %s", instance, group.group_id,
                            new_member_id, old_member_id, group.state)
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id,
                                                         instance, request, respond)
            else:
                self._add_member_and_rebalance(group, request, new_member_id, respond)
        elif request.require_known_member_id:
            # KIP-394: hand out the id first; the member joins for real with it.
            group.add_pending_member(new_member_id,
                                     group.deadline_after(request.session_timeout_ms))
            respond(JoinGroupResult(ErrorCode.member_id_required, new_member_id))
        else:
            self._add_member_and_rebalance(group, request, new_member_id, respond)

    def _current_member_join(self, group: ClassicGroup, request: JoinRequest,
                             respond: JoinCallback) -> None:
        member_id = request.member_id
        if group.state is _D:
            respond(JoinGroupResult(answer(_D, GroupRequest.JOIN).error, member_id))
            return
        names = [name for name, _ in request.protocols]
        if not group.supports_protocols(request.protocol_type, names):
            respond(JoinGroupResult(ErrorCode.inconsistent_group_protocol, member_id))
            return
        if group.is_pending_member(member_id):
            if request.group_instance_id is not None:  # pending ids are only handed to dynamic
                respond(JoinGroupResult(ErrorCode.unknown_member_id, member_id))  # members
                return
            self._add_member_and_rebalance(group, request, member_id, respond)
            return
        error = self.validate_current_member(group, member_id, request.group_instance_id)
        if error is not None:
            respond(JoinGroupResult(error, member_id))
            return
        member = group.get(member_id)
        verdict = answer(group.state, GroupRequest.JOIN)
        action = verdict.action
        if action is Action.AWAIT_JOIN:
            self._update_member_and_rebalance(group, member, request, respond)
        elif action is Action.RETURN_GENERATION:
            if member.matches(request.protocols):  # a retry: it lost the first answer
                respond(self._current_generation(group, member_id, with_members=True))
            else:
                self._update_member_and_rebalance(group, member, request, respond)
        elif action is Action.RETURN_GENERATION_TO_FOLLOWER:
            if group.is_leader(member_id) or not member.matches(request.protocols):
                self._update_member_and_rebalance(group, member, request, respond)
            else:
                respond(self._current_generation(group, member_id, with_members=False))
        else:
            logger.warning("member %s rejoins group %s in unexpected state %s", member_id,
                           group.group_id, group.state)
            respond(JoinGroupResult(verdict.error, member_id))

    def _current_generation(self, group: ClassicGroup, member_id: str, *,
                            with_members: bool) -> JoinGroupResult:
        members = (group.current_member_metadata()
                   if with_members and group.is_leader(member_id) else ())
        return JoinGroupResult(ErrorCode.none, member_id, group.generation_id,
                               group.protocol_type, group.protocol_name, group.leader_id or "",
                               members)

    def _add_member_and_rebalance(self, group: ClassicGroup, request: JoinRequest,
                                  member_id: str, respond: JoinCallback) -> None:
        member = GroupMember(member_id, request.group_instance_id, request.client_id,
                             request.client_host, request.rebalance_timeout_ms,
                             request.session_timeout_ms, request.protocol_type,
                             request.protocols)
        member.is_new = True
        if group.state is _P and group.generation_id == 0:
            group.new_member_added = True  # lets the initial delayed join wait once more
        group.add(member, respond)
        # It cannot heartbeat before it has its generation; bound its parked JoinGroup instead.
        self._schedule_session(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(
            group, f"adding new member {member_id} with group instance id "
                   f"{request.group_instance_id}")

    def _update_member_and_rebalance(self, group: ClassicGroup, member: GroupMember,
                                     request: JoinRequest, respond: JoinCallback) -> None:
        group.update_member(member, request.protocols, request.rebalance_timeout_ms,
                            request.session_timeout_ms, respond)
        self._maybe_prepare_rebalance(
            group, f"member {member.member_id} joining in state {group.state}")

    def _update_static_member_and_rebalance(self, group: ClassicGroup, old_member_id: str,
                                            new_member_id: str, instance: str,
                                            request: JoinRequest,
                                            respond: JoinCallback) -> None:
        current_leader = group.leader_id or ""
        member = group.replace_static_member(instance, old_member_id, new_member_id)
        self._schedule_session(group, member)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, request.protocols, request.rebalance_timeout_ms,
                            request.session_timeout_ms, respond)
        if group.state is _S:
            if group.protocol_name == group.select_protocol():
                # KIP-345: a known static member coming back changes nothing but its id.
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                generation = group.generation_id

                def stored(error: ErrorCode) -> None:
                    if error != ErrorCode.none:
                        logger.warning("cannot persist group %s after static member %s "
                                       "rejoined: %s", group.group_id, instance, error.name)
                        group.update_member(member, old[0], old[1], old[2], None)
                        restored = group.replace_static_member(instance, new_member_id,
                                                               old_member_id)
                        self._schedule_session(group, restored)
                        respond(JoinGroupResult(error, UNKNOWN_MEMBER_ID, generation,
                                                group.protocol_type, group.protocol_name,
                                                current_leader))
                        return
                    # The old leader id is returned so the (possibly new) leader does not run
                    # an assignment a Stable group would not broadcast.
                    group.maybe_invoke_join_callback(member, JoinGroupResult(
                        ErrorCode.none, new_member_id, generation, group.protocol_type,
                        group.protocol_name, current_leader))

                self.store.store_group(group, assignment, stored)
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {instance} rejoined with a change of protocol")
        elif group.state is _C:
            # The leader may already assign to the old member id: start over.
            self.prepare_rebalance(group, f"static member {instance} rejoined during "
                                          "CompletingRebalance")
        # PreparingRebalance: the parked JoinGroup is answered when the join completes.

    # ============================================================== SyncGroup
    def sync_group(self, group: ClassicGroup, generation_id: int, member_id: str,
                   group_instance_id: str | None, assignments: Mapping[str, bytes],
                   respond: SyncCallback) -> None:
        if group.state is _D:
            respond(SyncGroupResult(answer(_D, GroupRequest.SYNC).error))
            return
        error = self.validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = ErrorCode.illegal_generation
        if error is not None:
            respond(SyncGroupResult(error))
            return
        verdict = answer(group.state, GroupRequest.SYNC)
        member = group.get(member_id)
        if verdict.action is Action.AWAIT_ASSIGNMENT:
            group.set_sync_callback(member, respond)
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._store_assignment(group, generation_id, member_id, assignments)
        elif verdict.action is Action.RETURN_ASSIGNMENT:
            self._remove_pending_sync_member(group, member_id)
            respond(SyncGroupResult(ErrorCode.none, member.assignment, group.protocol_type,
                                    group.protocol_name))
            self._schedule_session(group, member)
        else:
            respond(SyncGroupResult(verdict.error))

    def _store_assignment(self, group: ClassicGroup, generation_id: int, leader_id: str,
                          assignments: Mapping[str, bytes]) -> None:
        missing = [m for m in group.members if m not in assignments]
        if missing:
            logger.warning("group %s generation %d: no assignment for %s; they get an empty "
                           "one", group.group_id, generation_id, missing)
        assignment = {m: assignments.get(m, b"") for m in group.members}
        logger.info("assignment received from leader %s of group %s for generation %d "
                    "(%d members)", leader_id, group.group_id, generation_id, group.size)

        def stored(error: ErrorCode) -> None:
            # Another member may have joined meanwhile: only the same rebalance may complete.
            if group.state is not _C or group.generation_id != generation_id:
                return
            if error != ErrorCode.none:
                self._propagate_assignment(group, error, reset=True)
                self._maybe_prepare_rebalance(
                    group, f"error {error.name} storing the assignment of {leader_id}")
                return
            for member in group.members.values():
                member.assignment = assignment[member.member_id]
            self._propagate_assignment(group, ErrorCode.none)
            group.transition_to(_S)

        self.store.store_group(group, assignment, stored)

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

    # ============================================================== Heartbeat
    def heartbeat(self, group: ClassicGroup, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        if group.state is _D:
            return answer(_D, GroupRequest.HEARTBEAT).error
        error = self.validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = ErrorCode.illegal_generation
        if error is not None:
            return error
        verdict = answer(group.state, GroupRequest.HEARTBEAT)
        if verdict.action is Action.KEEP_ALIVE:
            self._schedule_session(group, group.get(member_id))
        return verdict.error

    # ============================================================= LeaveGroup
    def leave_group(self, group: ClassicGroup,
                    members: Sequence[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup of ``(member id, group instance id)`` pairs: (top-level error, one error
        per member). An empty member id with an instance id removes that static member
        (administrative removal, KIP-345)."""
        if group.state is _D:
            return answer(_D, GroupRequest.LEAVE).error, []
        errors = []
        for member_id, instance in members:
            if member_id == UNKNOWN_MEMBER_ID:
                current = group.static_member_id(instance) if instance is not None else None
                if current is None:
                    errors.append(ErrorCode.unknown_member_id)
                else:
                    errors.append(self._leave(group, current))
            elif group.is_pending_member(member_id):
                del group.pending_members[member_id]
                logger.info("pending member %s left group %s", member_id, group.group_id)
                if group.state is _P:
                    self._try_complete_join(group)
                errors.append(ErrorCode.none)
            else:
                error = self.validate_current_member(group, member_id, instance)
                errors.append(error if error is not None else self._leave(group, member_id))
        return ErrorCode.none, errors

    def _leave(self, group: ClassicGroup, member_id: str) -> ErrorCode:
        verdict = answer(group.state, GroupRequest.LEAVE)
        if verdict.action is not Action.REMOVE_MEMBER:
            return verdict.error
        member = group.get(member_id)
        logger.info("member %s (instance %s) left group %s", member_id,
                    member.group_instance_id, group.group_id)
        self._remove_member_and_update_group(group, member, f"member {member_id} left")
        return ErrorCode.none

    # ============================================================ OffsetCommit
    def validate_offset_commit(self, group: ClassicGroup, member_id: str,
                               group_instance_id: str | None, generation_id: int) -> ErrorCode:
        """NONE when the commit may be stored (and the member's session is renewed), else the
        error every partition is answered with."""
        if group.state is _D:
            return answer(_D, GroupRequest.MEMBER_OFFSET_COMMIT).error
        if generation_id < 0 and group.state is _E:
            return answer(_E, GroupRequest.SIMPLE_OFFSET_COMMIT).error
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self.validate_current_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.illegal_generation
            if error is not None:
                return error
            verdict = answer(group.state, GroupRequest.MEMBER_OFFSET_COMMIT)
            if verdict.action is Action.STORE_OFFSETS:
                self._schedule_session(group, group.get(member_id))
            return verdict.error
        return answer(group.state, GroupRequest.SIMPLE_OFFSET_COMMIT).error

    # ============================================================ validation
    @staticmethod
    def validate_current_member(group: ClassicGroup, member_id: str,
                                group_instance_id: str | None) -> ErrorCode | None:
        """FENCED_INSTANCE_ID when the instance id maps to another member id, UNKNOWN_MEMBER_ID
        when the instance id or the member id is unknown, else None."""
        if group_instance_id is not None:
            current = group.static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                logger.info("member %s of static instance %s in group %s is fenced by %s",
                            member_id, group_instance_id, group.group_id, current)
                return ErrorCode.fenced_instance_id
        if not group.has(member_id):
            return ErrorCode.unknown_member_id
        return None

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
