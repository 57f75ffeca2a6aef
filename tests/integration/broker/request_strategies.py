"""Hypothesis strategies for well-formed Kafka requests, derived from kio's request classes.

``request_strategy(api_key, version, world)`` walks the fields of kio's request dataclass for
that version and draws each by its Kafka type (``field.metadata["kafka_type"]``), so every
value fits the grammar and kio encodes it; only the *values* are arbitrary:

==============  ==============================================================================
int8 ... int64  small values (-2..16, where enums and partition indexes live; -1..2 most),
                the type's boundaries, anything in range; ``max_wait`` and
                ``rebalance_timeout`` at most ``MAX_WAIT_MS`` (a legitimate long poll must not
                stall the run); times also as clients send them (0 to 60 s, a session timeout
                at most ``MAX_SESSION_TIMEOUT_MS``); an int64 of
                milliseconds within what a Python ``timedelta`` holds (+-999999999 days: kio
                builds one to write it)
string          the world's topics and groups (a third of the time, so requests reach them),
                known words (users, config keys, mechanisms, quota keys), arbitrary text
                (empty, unicode, control characters); None where the version allows null
bytes           arbitrary bytes (at most 32)
records         None, empty, small valid RecordBatch v2 (any codec, keys or not), or invalid
                ones (random bytes, a batch cut short, a flipped CRC byte, another magic,
                a length of 0, -1 or 2**31-1)
uuid            the world's topic ids, the zero uuid, any uuid
float64         0, small, negative, huge, NaN and infinities
arrays          0 to ``MAX_ARRAY`` elements; None where the version allows null
tagged fields   drawn like the others, or left out (kio's default)
client values   half the time, a field named in ``_CLIENT_VALUES`` takes what a client sends
==============  ==============================================================================

The fields go through ``build_request`` (Strata's kio adapter), as every other test builds
requests, so an int of milliseconds is accepted for kio's time fields.

Pure: no I/O; ``World`` carries what the live broker has (topic ids are only known then).
"""

from __future__ import annotations

import dataclasses
import types
import typing
import uuid
from collections.abc import Sequence
from typing import Any, Final

from hypothesis import strategies as st

from strata.protocol.messages import build_request, request_type
from strata.storage.records import RecordSpec, build_batch

MAX_ARRAY: Final = 3
MAX_WAIT_MS: Final = 300
MAX_SESSION_TIMEOUT_MS: Final = 1000  # the test broker's group.max.session.timeout.ms
MIN_SESSION_TIMEOUT_MS: Final = 10  # and its group.min.session.timeout.ms
TIMEDELTA_MAX_MS: Final = 86_399_999_913_600_000  # 999999999 days
# kio's names of fields whose value is how long the broker may legitimately hold the answer.
_WAITS: Final = frozenset({"max_wait", "rebalance_timeout"})
_INT_BITS: Final = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "timedelta_i32": 32,
                    "timedelta_i64": 64, "uint16": 16, "error_code": 16}
WORDS: Final = (
    "", "consumer", "range", "roundrobin", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI",
    "alice", "User:alice", "User:ANONYMOUS", "User:*", "*", "1", "0", "-1", "127.0.0.1",
    "cleanup.policy", "compact", "delete", "retention.ms", "segment.bytes", "max.message.bytes",
    "min.insync.replicas", "message.format.version", "log.retention.ms", "log.cleaner.threads",
    "user", "client-id", "ip", "producer_byte_rate", "consumer_byte_rate",
    "request_percentage", "controller_mutation_rate", "__consumer_offsets", "..", "a" * 249,
)


@dataclasses.dataclass(frozen=True)
class World:
    """What the broker under test holds, so drawn requests name real things half the time."""

    topics: Sequence[str] = ("fuzz",)
    topic_ids: Sequence[uuid.UUID] = ()
    groups: Sequence[str] = ("fuzz-group",)
    words: Sequence[str] = WORDS


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the annotation without ``| None``, whether None was allowed)."""
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members[0], True
    return annotation, False


def integers(bits: int, name: str = "", *, limit: int | None = None) -> st.SearchStrategy[int]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if limit is not None:
        low, high = max(low, -limit), min(high, limit)
    if name in _WAITS:
        return st.one_of(st.integers(-2, MAX_WAIT_MS), st.sampled_from((low, -1)))
    edges = sorted({low, low + 1, -1, 0, 1, high - 1, high, 0x7F & high, 0x7FFF & high,
                    1 << min(bits - 2, 30)})
    return st.one_of(st.integers(-1, 2), st.integers(-2, 16), st.sampled_from(edges),
                     st.integers(low, high))


# Half of the draws of these fields (by kio's name) take the value a client sends, so stateful
# APIs get past their first check: a new member, a session timeout the broker accepts.
_CLIENT_VALUES: Final[dict[str, st.SearchStrategy[Any]]] = {
    "member_id": st.just(""),
    "session_timeout": st.integers(MIN_SESSION_TIMEOUT_MS, MAX_SESSION_TIMEOUT_MS),
    "protocol_type": st.just("consumer"),
    "generation_id": st.integers(-1, 3),
}


def _milliseconds(name: str) -> st.SearchStrategy[int]:
    """Times as clients send them; session timeouts within what the test broker allows."""
    if name in _WAITS:
        return st.integers(0, MAX_WAIT_MS)
    return st.integers(0, MAX_SESSION_TIMEOUT_MS if name == "session_timeout" else 60_000)


def strings(world: World, nullable: bool) -> st.SearchStrategy[str | None]:
    drawn: st.SearchStrategy[str | None] = st.one_of(
        st.sampled_from([*world.topics, *world.groups]), st.sampled_from(world.words),
        st.text(max_size=16))
    return st.one_of(st.none(), drawn) if nullable else drawn


@st.composite
def _valid_batch(draw: st.DrawFn) -> bytes:
    count = draw(st.integers(1, 3))
    keyed = draw(st.booleans())
    timestamp = draw(st.sampled_from((1_700_000_000_000, 0, -1, 4_102_444_800_000)))
    specs = [RecordSpec(key=b"k%d" % i if keyed else None, value=draw(st.binary(max_size=16)),
                        timestamp=timestamp) for i in range(count)]
    producer_id = draw(st.sampled_from((-1, -1, 0, 1000)))
    return build_batch(
        specs, compression=draw(st.integers(0, 4)), producer_id=producer_id,
        producer_epoch=-1 if producer_id < 0 else 0,
        base_sequence=-1 if producer_id < 0 else draw(st.integers(0, 5)),
        is_transactional=draw(st.booleans()) and producer_id >= 0,
        timestamp_type=draw(st.integers(0, 1)))


@st.composite
def _invalid_batch(draw: st.DrawFn) -> bytes:
    batch = bytearray(draw(_valid_batch()))
    how = draw(st.sampled_from(("cut", "crc", "magic", "length", "random")))
    if how == "cut":
        return bytes(batch[:draw(st.integers(0, len(batch) - 1))])
    if how == "crc":
        batch[17] ^= 0xFF  # a byte of the CRC (offset 8 + length 4 + epoch 4 + magic 1)
    elif how == "magic":
        batch[16] = draw(st.sampled_from((0, 1, 3, 0xFF)))
    elif how == "length":
        batch[8:12] = draw(st.sampled_from((b"\x00\x00\x00\x00", b"\xff\xff\xff\xff",
                                            b"\x7f\xff\xff\xff")))
    else:
        return draw(st.binary(min_size=1, max_size=80))
    return bytes(batch)


def records() -> st.SearchStrategy[bytes | None]:
    return st.one_of(st.none(), st.just(b""), _valid_batch(),
                     st.lists(_valid_batch(), min_size=2, max_size=2).map(b"".join),
                     _invalid_batch())


def floats() -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from((0.0, 1.0, 1024.0, -1.0, 1e300, float("nan"),
                                      float("inf"), float("-inf"), 5e-324)),
                     st.floats(allow_nan=True, allow_infinity=True))


def uuids(world: World) -> st.SearchStrategy[uuid.UUID]:
    return st.one_of(st.sampled_from([*world.topic_ids, uuid.UUID(int=0)]), st.uuids())


def _leaf(kind: str, name: str, nullable: bool, world: World) -> st.SearchStrategy[Any]:
    if kind == "string":
        return strings(world, nullable)
    if kind == "records":
        return records()
    if kind == "bytes":
        drawn: st.SearchStrategy[Any] = st.binary(max_size=32)
    elif kind == "bool":
        drawn = st.booleans()
    elif kind == "uuid":
        drawn = uuids(world)
    elif kind == "float64":
        drawn = floats()
    elif kind == "timedelta_i64":  # kio holds it in a ``timedelta``: at most 999999999 days
        drawn = st.one_of(integers(64, name, limit=TIMEDELTA_MAX_MS), _milliseconds(name))
    elif kind == "timedelta_i32":
        drawn = st.one_of(integers(32, name), _milliseconds(name))
    elif kind in _INT_BITS:
        drawn = integers(_INT_BITS[kind], name)
    else:  # pragma: no cover - a kafka type kio added after this module was written
        raise AssertionError(f"no strategy for kafka type {kind!r} ({name})")
    return st.one_of(st.none(), drawn) if nullable else drawn


def field_strategy(field: dataclasses.Field[Any], world: World) -> st.SearchStrategy[Any]:
    drawn = _field_strategy(field, world)
    client_value = _CLIENT_VALUES.get(field.name)
    return drawn if client_value is None else st.one_of(client_value, drawn)


def _field_strategy(field: dataclasses.Field[Any], world: World) -> st.SearchStrategy[Any]:
    annotation, nullable = _unwrap(field.type)
    kind = field.metadata.get("kafka_type", "")
    if typing.get_origin(annotation) is tuple:
        element, _ = _unwrap(typing.get_args(annotation)[0])
        if dataclasses.is_dataclass(element):
            items: st.SearchStrategy[Any] = entity_strategy(typing.cast(type[Any], element),
                                                           world)
        else:
            items = _leaf(kind, field.name, False, world)
        array: st.SearchStrategy[Any] = st.lists(items, max_size=MAX_ARRAY)
        return st.one_of(st.none(), array) if nullable else array
    if dataclasses.is_dataclass(annotation):
        struct = entity_strategy(typing.cast(type[Any], annotation), world)
        return st.one_of(st.none(), struct) if nullable else struct
    return _leaf(kind, field.name, nullable, world)


_MISSING: Final = object()


def entity_strategy(entity_type: type[Any], world: World) -> st.SearchStrategy[dict[str, Any]]:
    """A version-neutral field mapping for the kio dataclass ``entity_type``."""
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for field in dataclasses.fields(entity_type):
        drawn = field_strategy(field, world)
        has_default = (field.default is not dataclasses.MISSING
                       or field.default_factory is not dataclasses.MISSING)
        parts[field.name] = st.one_of(st.just(_MISSING), drawn) if has_default else drawn

    def present(values: dict[str, Any]) -> dict[str, Any]:
        return {name: value for name, value in values.items() if value is not _MISSING}

    return st.fixed_dictionaries(parts).map(present)


def request_strategy(api_key: int, version: int, world: World) -> st.SearchStrategy[Any]:
    """kio request objects of ``api_key`` at ``version`` with arbitrary well-formed values."""
    return entity_strategy(request_type(api_key, version), world).map(
        lambda fields: build_request(api_key, version, fields))
