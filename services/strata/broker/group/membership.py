"""The classic group membership protocol on one group: the members' requests — JoinGroup,
SyncGroup, Heartbeat, LeaveGroup — and the check of a member's offset commit.

Kafka's ``GroupCoordinator`` logic (the classic protocol, KIP-62/345/394 included), applied to a
``ClassicGroup`` the coordinator has already looked up; what a request gets in each state comes
from ``state.answer`` (the table). The coordinator (``coordinator``) does the checks that come
first — group id, coordinator loaded, session timeout bounds — and owns the groups map, the
timers and the log. What the requests trigger — preparing and completing a rebalance, handing
out the assignment, the delayed join / sync / session expiry — is the base class's
(``rebalance.GroupRebalance``).

Responses of parked requests (a JoinGroup waiting for the rebalance, a follower's SyncGroup
waiting for the leader's assignment) go through the callbacks the requests brought; a callback
is called at most once. Pure: no I/O, no asyncio. Called only on the event loop, by the
coordinator.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from strata.broker.group.classic_group import ClassicGroup
from strata.broker.group.member import (
    UNKNOWN_MEMBER_ID,
    GroupMember,
    JoinCallback,
    JoinGroupResult,
    Protocols,
    SyncCallback,
    SyncGroupResult,
)
from strata.broker.group.rebalance import GroupRebalance
from strata.broker.group.state import Action, GroupRequest, GroupState, answer
from strata.protocol.error_codes import ErrorCode

logger = logging.getLogger(__name__)

_E, _P, _C, _S, _D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                      GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)

NEW_MEMBER_JOIN_TIMEOUT_MS: Final = 5 * 60 * 1000
"""A new member's parked JoinGroup expires after this (it cannot heartbeat yet; Kafka's value)."""


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
    supports_skip_assignment: bool = False
    """v9+ (KIP-814): a static leader rejoining a Stable group is told it leads, with the
    members, and to skip the assignment; older versions keep the old leader id instead."""
    reason: str | None = None
    """v8+ (KIP-800): why the member (re)joins, for the rebalance log."""


class GroupMembership(GroupRebalance):
    """Kafka's classic-group protocol over ``ClassicGroup`` objects (see the module docstring)."""

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
                   f"{request.group_instance_id}{_because(request.reason)}")

    def _update_member_and_rebalance(self, group: ClassicGroup, member: GroupMember,
                                     request: JoinRequest, respond: JoinCallback) -> None:
        group.update_member(member, request.protocols, request.rebalance_timeout_ms,
                            request.session_timeout_ms, respond)
        self._maybe_prepare_rebalance(
            group, f"member {member.member_id} joining in state {group.state}"
                   f"{_because(request.reason)}")

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
                    if request.supports_skip_assignment and group.is_leader(new_member_id):
                        # KIP-814: it leads again (it keeps watching metadata) but must not
                        # assign: a Stable group would not broadcast a new assignment.
                        group.maybe_invoke_join_callback(member, JoinGroupResult(
                            ErrorCode.none, new_member_id, generation, group.protocol_type,
                            group.protocol_name, new_member_id, group.current_member_metadata(),
                            skip_assignment=True))
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
                   respond: SyncCallback, protocol_type: str | None = None,
                   protocol_name: str | None = None) -> None:
        """A SyncGroup; ``protocol_type`` / ``protocol_name`` (v5+, null before) must match
        the group's when both are known, else INCONSISTENT_GROUP_PROTOCOL."""
        if group.state is _D:
            respond(SyncGroupResult(answer(_D, GroupRequest.SYNC).error))
            return
        error = self.validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = ErrorCode.illegal_generation
        if error is None and (_inconsistent(protocol_type, group.protocol_type)
                              or _inconsistent(protocol_name, group.protocol_name)):
            error = ErrorCode.inconsistent_group_protocol
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


def _inconsistent(asked: str | None, current: str | None) -> bool:
    """Kafka's ``isProtocolInconsistent``: both known and different."""
    return asked is not None and current is not None and asked != current


def _because(reason: str | None) -> str:
    return f" (client reason: {reason})" if reason else ""
