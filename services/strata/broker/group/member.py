"""``GroupMember``: one member of a classic group, and what the protocol answers members.

Kafka's ``MemberMetadata`` plus the results of JoinGroup and SyncGroup. A member holds its
protocols (name + metadata, in its order of preference), timeouts, its assignment, and the
callbacks of a parked JoinGroup or SyncGroup (each answered at most once, by the group). Its
session deadline is monotonic ms of the group's clock. Pure; mutated only through the group
(``group.ClassicGroup``) on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from strata.protocol.error_codes import ErrorCode

NO_GENERATION: Final = -1
UNKNOWN_MEMBER_ID: Final = ""

Protocols = tuple[tuple[str, bytes], ...]
"""A member's (protocol name, metadata) pairs in its order of preference."""


# ---------------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """One member as the leader's JoinGroup response lists it."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False
    """JoinGroup v9+ (KIP-814): the leader gets the members but must not run the assignor
    (a static leader rejoined a Stable group; the group keeps its assignment)."""


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


# ---------------------------------------------------------------------------------- member


class GroupMember:
    """One member of a classic group (Kafka's ``MemberMetadata``)."""

    __slots__ = (
        "assignment",
        "awaiting_join",
        "awaiting_sync",
        "client_host",
        "client_id",
        "group_instance_id",
        "heartbeat_deadline",
        "is_new",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "session_timeout_ms",
    )

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str,
                 client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                 protocol_type: str, protocols: Protocols, assignment: bytes = b"") -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = assignment
        self.awaiting_join: JoinCallback | None = None
        self.awaiting_sync: SyncCallback | None = None
        self.is_new = False
        self.heartbeat_deadline: float | None = None

    def __repr__(self) -> str:
        return (f"GroupMember({self.member_id!r}, instance={self.group_instance_id!r}, "
                f"client={self.client_id!r}@{self.client_host})")

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    @property
    def survives_session_expiry(self) -> bool:
        """Whether the session deadline passing now spares the member (Kafka's
        ``hasSatisfiedHeartbeat``): a member parked in a JoinGroup or SyncGroup is alive, unless
        it is new (its parked JoinGroup is bounded by ``NEW_MEMBER_JOIN_TIMEOUT_MS``)."""
        return not self.is_new and (self.is_awaiting_join or self.is_awaiting_sync)

    def summary(self, protocol: str | None) -> MemberSummary:
        metadata = self.metadata(protocol) if protocol is not None else b""
        assignment = self.assignment if protocol is not None else b""
        return MemberSummary(self.member_id, self.group_instance_id, self.client_id,
                             self.client_host, metadata, assignment)
