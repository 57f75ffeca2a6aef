"""Golden-byte round trips of the group and offset APIs through the broker's own path.

``round_trip`` is what a connection does with one request, minus the socket: kio builds and
encodes the request (``encode_request``: header + body, as any client would), an unknown tagged
field is spliced into the top-level tag buffer of a flexible body (Kafka's readers skip tags
they do not know; so must the broker), the broker's codec decodes the frame against the
registry's served ranges, the registered handler answers, the codec encodes the response, and
kio decodes it back. The response bytes must equal kio's own encoding of what it decoded: the
broker's bytes are byte-for-byte what Kafka's schema says for that version.

``fresh_state`` is the socket-less broker of ``test_group_handlers`` (a ``ManualClock``, the
coordinator started without timers, topic ``t`` with 2 partitions, ``__consumer_offsets``
created by a FindCoordinator).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

from strata.broker.broker_state import BrokerState
from strata.broker.handlers import build_registry
from strata.broker.network.request_context import RequestContext
from strata.protocol import (
    ApiKey,
    RequestHeader,
    build_request,
    decode_request,
    decode_response,
)
from strata.protocol.codec import encode_request, encode_response
from strata.protocol.header import response_header_version
from strata.protocol.messages import encode_body, is_flexible
from strata.storage.clock import ManualClock

from .helpers import add_topics, consumer_subscription, group_broker_state

ANSWER_TIMEOUT_S: Final = 10.0
CORRELATION_ID: Final = 4242
CLIENT_ID: Final = "golden"
UNKNOWN_TAG: Final = 1000
"""A tag no group API declares: uvarint 0xE8 0x07."""
UNKNOWN_TAGGED_FIELD: Final = b"\x01" + b"\xe8\x07" + b"\x03" + b"xyz"
"""A tag buffer of one field (count 1, tag 1000, 3 bytes of data)."""
SUBSCRIPTION: Final = consumer_subscription("t")
REGISTRY: Final = build_registry()


def with_unknown_tagged_field(frame: bytes) -> bytes:
    """``frame`` (a flexible request, no size prefix) with its empty top-level tag buffer
    replaced by one holding ``UNKNOWN_TAGGED_FIELD``."""
    assert frame.endswith(b"\x00"), "a flexible body ends with its top-level tag buffer"
    return frame[:-1] + UNKNOWN_TAGGED_FIELD


async def round_trip(state: BrokerState, api_key: int, version: int,
                     fields: Mapping[str, object],
                     splice: Callable[[bytes], bytes] = with_unknown_tagged_field) -> Any:
    """The kio-decoded response of the broker to the ``version`` request built from
    ``fields`` (version-neutral), after the checks in the module docstring; ``splice`` adds
    the unknown tagged field to a flexible request's frame."""
    body = build_request(api_key, version, fields)
    header = RequestHeader(api_key, version, CORRELATION_ID, CLIENT_ID)
    frame = encode_request(header, body)[4:]
    if is_flexible(api_key, version):
        frame = splice(frame)
    decoded = decode_request(frame, REGISTRY.version_ranges())
    assert decoded.body == body  # the unknown tag is skipped, nothing else changes
    handler = REGISTRY.lookup(api_key, version)
    assert handler is not None
    response = await asyncio.wait_for(  # a parked request would hang: bound it
        handler(RequestContext(decoded.header, "127.0.0.1", 50000, state), decoded.body),
        ANSWER_TIMEOUT_S)
    wire = encode_response(decoded.header, response)
    correlation_id, answer = decode_response(wire[4:], api_key, version)
    assert correlation_id == CORRELATION_ID
    header_size = 4 + (1 if response_header_version(api_key, version) == 1 else 0)
    assert wire[4 + header_size:] == encode_body(answer)  # golden: kio writes the same bytes
    return answer


@asynccontextmanager
async def fresh_state(tmp_path: Path) -> AsyncIterator[BrokerState]:
    state = group_broker_state(tmp_path, ManualClock(), offsets_topic_num_partitions="5")
    await add_topics(state, ("t", 2))
    await state.group_coordinator.startup(run_timers=False)
    found = await round_trip(state, ApiKey.FIND_COORDINATOR, 2, {"key": "g", "key_type": 0})
    assert found.error_code == 0  # ``__consumer_offsets`` exists: this broker coordinates
    try:
        yield state
    finally:
        await state.group_coordinator.shutdown()
        state.log_manager.shutdown()


def served(api_key: int) -> range:
    """Every version the registry serves for ``api_key``."""
    versions = REGISTRY.version_ranges()[api_key]  # type: ignore[index]
    return range(versions.min_version, versions.max_version + 1)


def join_fields(version: int, member_id: str = "", instance: str | None = None,
                group_id: str = "g", reason: str | None = None) -> dict[str, Any]:
    return {"group_id": group_id, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 30_000,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUBSCRIPTION}], "reason": reason}


async def joined_member(state: BrokerState, version: int, instance: str | None = None,
                        group_id: str = "g") -> Any:
    """A member of a one-member group, generation 1: JoinGroup (twice for a dynamic member of
    v4+, KIP-394) and the leader's SyncGroup (v3, assigning ``b"mine"``)."""
    answer = await round_trip(state, ApiKey.JOIN_GROUP, version,
                              join_fields(version, instance=instance, group_id=group_id))
    if answer.error_code != 0 and answer.member_id:  # MEMBER_ID_REQUIRED
        answer = await round_trip(state, ApiKey.JOIN_GROUP, version,
                                  join_fields(version, answer.member_id, instance,
                                              group_id=group_id))
    assert answer.error_code == 0, answer
    synced = await round_trip(state, ApiKey.SYNC_GROUP, 3, {
        "group_id": group_id, "generation_id": answer.generation_id,
        "member_id": answer.member_id, "group_instance_id": instance,
        "assignments": [{"member_id": answer.member_id, "assignment": b"mine"}]})
    assert synced.error_code == 0
    return answer


async def simple_group(state: BrokerState, group_id: str = "simple") -> None:
    """A group with committed offsets and no members (what the Java client's ``assign()``
    users leave behind): one OffsetCommit v9 outside any generation."""
    committed = await round_trip(state, ApiKey.OFFSET_COMMIT, 9, {
        "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_metadata": None}]}]})
    assert [p.error_code for t in committed.topics for p in t.partitions] == [0]
