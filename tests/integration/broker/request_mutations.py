"""Valid requests as clients send them, and deterministic mutations of them, for protocol fuzzing.

``seed_request(api_key, version)`` fills every field of the version's kio request class with the
value a real client would send (topic ``fuzz``, partition 0, group ``fuzz-group``, a real
RecordBatch v2 for ``records``, short timeouts, no fetch session), chosen by Kafka's field names.
``mutate(frame, rng)`` returns one mutated copy of an encoded request frame payload (no size
prefix), by one of:

============  ==================================================================================
bit flips     1-4 random bits anywhere after the correlation id
truncation    the frame cut at a random point (the header included, now and then)
int overwrite a boundary value (-1, 0, int16/int32/int64 extremes, a random int) written over
              2, 4 or 8 bytes of the body: lengths, counts, null markers, sizes
field value   1-3 leaves of the decoded request changed: a number to a boundary value, a
              string to an odd one (empty, null, 300 bytes, ``..``, an internal topic), an
              array emptied, doubled, multiplied by 50 or nulled; re-encoded with kio: a
              request that (mostly) parses and carries values no client sends
version       the api version replaced (unsupported, negative, a neighbour)
api key       the api key replaced (unknown, another served one)
garbage       random bytes appended, or a run of the body repeated
============  ==================================================================================

Pure and deterministic for a given ``random.Random``: the live run (``test_protocol_fuzz``)
and a reproduction of one of its findings build the same bytes from the same seed.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import struct
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any, Final

from strata.protocol.errors import ProtocolError
from strata.protocol.header import RequestHeader, encode_request_header
from strata.protocol.messages import (
    MessageBuildError,
    UnknownMessageVersion,
    build_request,
    decode_request_body,
    encode_body,
    request_type,
)
from strata.storage.records import RecordSpec, build_batch

TOPIC: Final = "fuzz"
GROUP: Final = "fuzz-group"
CLIENT_ID: Final = "strata-fuzz"
_TIME_KINDS: Final = {"timedelta_i32", "timedelta_i64", "datetime_i64"}
BOUNDARY_INTS: Final = (-1, 0, 1, -2, 0x7F, -0x80, 0x7FFF, -0x8000, 0x7FFFFFFF, -0x80000000,
                        0x7FFFFFFFFFFFFFFF, -0x8000000000000000, 65536, 1 << 30)
ODD_STRINGS: Final = ("", None, "x" * 300, "__consumer_offsets", "..", "a/../b", "ü" * 20,
                      "\x00", "*", "User:*", "-1")
_FIXED_OFFSET: Final = 8  # api key, version, correlation id: the bytes mutations leave alone


def _record_batch() -> bytes:
    return build_batch([RecordSpec(key=b"k", value=b"fuzz-value", timestamp=1_700_000_000_000)])


RECORDS: Final = _record_batch()


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members[0], True
    return annotation, False


def kafka_name(field: dataclasses.Field[Any]) -> str:
    """Kafka's name of a kio field (kio drops ``_ms`` from its time fields)."""
    if field.metadata.get("kafka_type") in _TIME_KINDS and not field.name.endswith("_ms"):
        return field.name + "_ms"
    return field.name


def _string(name: str, nullable: bool) -> str | None:
    if name in ("topic", "name", "topic_name", "resource_name", "topics"):
        return TOPIC
    if name in ("group_id", "group", "key", "groups", "group_ids"):
        return GROUP
    if name in ("member_id", "rack_id", "rack"):
        return ""
    if name in ("transactional_id", "group_instance_id"):
        return None if nullable else ""
    if name == "protocol_type":
        return "consumer"
    if name == "mechanism":
        return "PLAIN"
    if name in ("principal", "principal_filter"):
        return "User:fuzz"
    if name in ("host", "host_filter"):
        return "*"
    if name == "client_software_version":
        return "1.0"
    return CLIENT_ID if name == "client_software_name" else "fuzz"


def _integer(name: str) -> int:
    if name in ("partition", "partition_index", "index", "partitions", "partition_indexes"):
        return 0
    if "epoch" in name or name in ("replica_id", "producer_id", "timestamp", "broker_id"):
        return -1
    if "timeout" in name:
        return 1000
    if name in ("max_wait_ms", "throttle_time_ms"):
        return 0
    if name == "min_bytes":
        return 1
    if "max_bytes" in name:
        return 1 << 20
    if name == "acks":
        return 1
    if name in ("resource_type", "resource_type_filter"):
        return 2  # TOPIC
    if name in ("pattern_type", "pattern_type_filter", "operation", "permission_type"):
        return 3  # LITERAL / ANY-ish: valid enum values
    if name == "iterations":
        return 4096
    return 0


def _leaf(field: dataclasses.Field[Any], kind: str, nullable: bool) -> Any:
    name = kafka_name(field)
    if kind == "string":
        return _string(field.name, nullable)
    if kind == "records":
        return RECORDS
    if kind == "bytes":
        return b"fuzz"
    if kind == "bool":
        return False
    if kind == "uuid":
        return uuid.UUID(int=0)
    if kind == "float64":
        return 0.0
    if kind == "error_code":
        return 0
    if kind == "datetime_i64":
        return -1
    return _integer(name)


def seed_fields(entity_type: type[Any]) -> dict[str, Any]:
    """Version-neutral fields of ``entity_type`` as a client would fill them."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(entity_type):
        annotation, nullable = _unwrap(field.type)
        kind = field.metadata.get("kafka_type", "")
        if typing.get_origin(annotation) is tuple:
            element, _ = _unwrap(typing.get_args(annotation)[0])
            if dataclasses.is_dataclass(element):
                value: Any = [seed_fields(typing.cast(type[Any], element))]
            else:
                value = [_leaf(field, kind, False)]
        elif dataclasses.is_dataclass(annotation):
            value = seed_fields(typing.cast(type[Any], annotation))
        else:
            value = _leaf(field, kind, nullable)
        values[kafka_name(field)] = value
    return values


def seed_request(api_key: int, version: int) -> Any:
    """The kio request a client would send (``MessageBuildError`` if a value does not fit)."""
    return build_request(api_key, version, seed_fields(request_type(api_key, version)))


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """Header + body: a frame payload without its size prefix."""
    flexible = request_type(api_key, version).__flexible__
    header = RequestHeader(api_key, version, correlation_id, CLIENT_ID)
    return encode_request_header(header, 2 if flexible else 1) + body


# ------------------------------------------------------------------------------- mutations
def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {kafka_name(f): _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return value


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) of ints and lists inside a plain request."""
    found: list[tuple[tuple[Any, ...], Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_leaves(item, (*path, key)))
    elif isinstance(value, list):
        found.append((path, value))
        for index, item in enumerate(value):
            found.extend(_leaves(item, (*path, index)))
    elif isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        found.append((path, value))
    return found


def _set(root: Any, path: tuple[Any, ...], value: Any) -> None:
    target = root
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


def _field_value(frame: bytes, rng: random.Random) -> bytes | None:
    if len(frame) < _FIXED_OFFSET:
        return None
    api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
    try:
        offset = len(request_frame(api_key, version, correlation_id, b""))
        plain = _plain(decode_request_body(api_key, version, frame, offset))
    except (ProtocolError, UnknownMessageVersion):  # not a seed: leave it to the byte mutations
        return None
    leaves = [leaf for leaf in _leaves(plain) if leaf[0]]
    if not leaves:
        return None
    for path, old in rng.sample(leaves, min(len(leaves), rng.choice((1, 1, 2, 3)))):
        new: Any
        if isinstance(old, list):
            new = rng.choice([[], old * 2, None, old * 50])
        elif isinstance(old, str):
            new = rng.choice(ODD_STRINGS)
        else:
            new = rng.choice(BOUNDARY_INTS)
        try:
            _set(plain, path, new)
        except (KeyError, IndexError, TypeError):  # an earlier edit replaced its parent
            continue
    try:
        body = encode_body(build_request(api_key, version, plain))
    except (MessageBuildError, ValueError, TypeError, OverflowError, struct.error):
        return None  # kio cannot write that value in this field's type
    return request_frame(api_key, version, correlation_id, body)


def _bit_flips(frame: bytes, rng: random.Random) -> bytes:
    out = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        position = rng.randrange(_FIXED_OFFSET, len(out)) if len(out) > _FIXED_OFFSET else 0
        out[position] ^= 1 << rng.randrange(8)
    return bytes(out)


def _truncation(frame: bytes, rng: random.Random) -> bytes:
    return frame[: rng.randrange(len(frame))] if frame else frame


def _int_overwrite(frame: bytes, rng: random.Random) -> bytes:
    width = rng.choice((2, 4, 4, 8))
    if len(frame) < _FIXED_OFFSET + width:
        return _truncation(frame, rng)
    position = rng.randrange(_FIXED_OFFSET, len(frame) - width + 1)
    value = rng.choice(BOUNDARY_INTS)
    bits = 8 * width
    raw = (value & ((1 << bits) - 1)).to_bytes(width, "big")
    return frame[:position] + raw + frame[position + width:]


def _version(frame: bytes, rng: random.Random) -> bytes:
    version = rng.choice((-1, 0, 1, 12, 99, 0x7FFF, -0x8000, rng.randrange(20)))
    return frame[:2] + struct.pack(">h", version) + frame[4:]


def _api_key(frame: bytes, rng: random.Random) -> bytes:
    key = rng.choice((-1, 0x7FFF, 67, 1000, rng.randrange(80)))
    return struct.pack(">h", key) + frame[2:]


def _garbage(frame: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.5 or len(frame) <= _FIXED_OFFSET:
        return frame + rng.randbytes(rng.randint(1, 64))
    start = rng.randrange(_FIXED_OFFSET, len(frame))
    run = frame[start:start + rng.randint(1, 32)]
    return frame[:start] + run * rng.randint(2, 8) + frame[start:]


MUTATORS: Final[tuple[tuple[str, Callable[[bytes, random.Random], bytes | None]], ...]] = (
    ("bit flips", _bit_flips),
    ("truncation", _truncation),
    ("int overwrite", _int_overwrite),
    ("int overwrite", _int_overwrite),
    ("field value", _field_value),
    ("field value", _field_value),
    ("field value", _field_value),
    ("version", _version),
    ("api key", _api_key),
    ("garbage", _garbage),
)


def mutate(frame: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One mutation of ``frame`` (a request payload): ``(mutator name, new payload)``."""
    while True:
        name, mutator = rng.choice(MUTATORS)
        mutated = mutator(frame, rng)
        if mutated is not None:
            return name, mutated
