"""Structural pre-scan of a message body, run before kio decodes it.

Why it exists: kio 0.6.5's Rust reader allocates an array's storage from the count on the wire
before reading any element, so a 9-byte body announcing 2**31 elements makes it request 17 GB
and *abort the process* (a Rust allocation failure is not a Python exception). Kafka's generated
readers guard against exactly this ("Tried to allocate a collection of size N, but there are
only M bytes remaining"); this module is that guard. It walks the body with the grammar of the
kio dataclass that will decode it, without building any object, and rejects:

- an array count larger than the bytes left (each element takes at least one byte),
- a string, bytes or records length, or a tagged field size, that runs past the end,
- a negative length other than -1 (null), an over-long varint, a truncated body,
- null (-1, or 0 in compact form) for an array, string or bytes field the version declares
  non-nullable. Kafka's generated readers throw "non-nullable field X was serialized as null"
  and the broker closes the connection; kio would hand the handler ``None`` where its type says
  a tuple or a string (a DescribeConfigs v1 with null ``resources`` raised ``TypeError``).

Grammar followed (Kafka's message-spec encoding, per field in declaration order)::

    fixed-size fields   int8/bool 1, int16/error_code/uint16 2, int32/timedelta_i32 4,
                        int64/float64/timedelta_i64/datetime_i64 8, uuid 16 bytes
    string              INT16 length (-1 null) + bytes   | flexible: COMPACT (uvarint N+1)
    bytes, records      INT32 length (-1 null) + bytes   | flexible: COMPACT (uvarint N+1)
    array of T          INT32 count (-1 null) + T*count  | flexible: uvarint count+1 (0 null)
    nullable struct     INT8 marker (< 0 null) + struct  (KIP-893; not inside tagged fields)
    struct              its fields, then in flexible versions a TAG_BUFFER whose known tags are
                        scanned inside their declared size and unknown ones skipped

Two things Kafka reads and kio 0.6.5 cannot: unknown tagged fields (Kafka skips them, kio raises
``KeyError``), and an int64 of milliseconds beyond what kio's ``timedelta`` / ``datetime`` hold
(``timedelta_i64`` past +-9223372036854775 ms, ``datetime_i64`` before the epoch or after the
year 9999: kio raises ``ValueError`` or ``OutOfBoundValue``, where Kafka reads any long, e.g.
an OffsetCommit v2-v4 ``retention_time`` of ``Long.MAX_VALUE``). ``readable_copy`` (run only
after kio refused a body) rewrites a copy without the former and with the latter clamped to the
nearest value kio holds (a retention of 292,000 years for one of 292 million: the same answer;
a start time of -1 read as the epoch), for kio to read.

Invariant: ``scan`` accepts every body kio's writer produces (the unit tests round-trip samples
of every supported version through it) and returns the offset just past the body. Scanners are
compiled once per kio class and cached; consecutive fixed-size fields collapse into one skip.
"""

from __future__ import annotations

import dataclasses
import struct
import threading
import types
import typing
from collections.abc import Callable
from typing import Any, Final, TypeAlias

from strata.protocol.primitives import (
    INT16,
    INT32,
    BytesLike,
    WireFormatError,
    read_uvarint,
    write_uvarint,
)

Scanner: TypeAlias = Callable[[BytesLike, int, int], int]
"""``scanner(buffer, offset, end) -> offset after the value``; raises ``WireFormatError``."""

FIXED_SIZES: Final[dict[str, int]] = {
    "int8": 1,
    "bool": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_VARIABLE_KINDS: Final = frozenset({"string", "bytes", "records"})
# The int64 time kinds kio reads into a ``timedelta`` / ``datetime``: the values it can hold.
_TIME_RANGES: Final[dict[str, tuple[int, int]]] = {
    "timedelta_i64": (-9_223_372_036_854_775, 9_223_372_036_854_775),  # microseconds in int64
    # From the epoch (kio reads no negative timestamp, "OutOfBoundValue", where Kafka writes -1
    # for none, e.g. DescribeTransactions' start time of an Empty id) to the year 9999, UTC.
    "datetime_i64": (0, 253_402_300_799_999),
}
_INT64: Final = struct.Struct(">q")


def scan(entity_type: type[Any], buffer: BytesLike, offset: int, end: int) -> int:
    """Check the body of ``entity_type`` in ``buffer[offset:end]``; return where it ends."""
    return entity_scanner(entity_type)(buffer, offset, end)


_STEPS: dict[type[Any], tuple[Scanner, ...]] = {}
_SCANNERS: dict[type[Any], Scanner] = {}


def entity_scanner(entity_type: type[Any]) -> Scanner:
    """The compiled scanner of one kio entity class (a request, response or nested struct)."""
    scanner = _SCANNERS.get(entity_type)
    if scanner is None:
        scanner = _SCANNERS[entity_type] = _sequence(entity_steps(entity_type))
    return scanner


def entity_steps(entity_type: type[Any]) -> tuple[Scanner, ...]:
    """The scanners of an entity's fields in wire order (its TAG_BUFFER last when flexible)."""
    steps = _STEPS.get(entity_type)
    if steps is None:
        steps = _STEPS[entity_type] = _compile_entity(entity_type)
    return steps


def _compile_entity(entity_type: type[Any]) -> tuple[Scanner, ...]:
    flexible: bool = entity_type.__flexible__
    name = entity_type.__name__
    steps: list[Scanner] = []
    tagged: dict[int, Scanner] = {}
    pending_fixed = 0
    for field in dataclasses.fields(entity_type):
        where = f"{name}.{field.name}"
        tag = field.metadata.get("tag")
        if tag is not None:
            tagged[int(tag)] = _field_scanner(field, flexible, in_tag=True, where=where)
            continue
        size = _fixed_size(field)
        if size is not None and field.metadata.get("kafka_type") not in _TIME_RANGES:
            pending_fixed += size
            continue
        if pending_fixed:
            steps.append(_skip(pending_fixed, name))
            pending_fixed = 0
        steps.append(_field_scanner(field, flexible, in_tag=False, where=where))
    if pending_fixed:
        steps.append(_skip(pending_fixed, name))
    if flexible:
        steps.append(_tag_buffer(tagged, name))
    return tuple(steps)


def _sequence(steps: tuple[Scanner, ...]) -> Scanner:
    if len(steps) == 1:
        return steps[0]
    if not steps:
        return _empty

    def scan_sequence(buffer: BytesLike, offset: int, end: int) -> int:
        for step in steps:
            offset = step(buffer, offset, end)
        return offset

    return scan_sequence


def _empty(buffer: BytesLike, offset: int, end: int) -> int:
    return offset


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) != 1:
            raise TypeError(f"unsupported union annotation {annotation!r}")
        return members[0], True
    return annotation, False


def _fixed_size(field: dataclasses.Field[Any]) -> int | None:
    annotation, _ = _unwrap_optional(field.type)
    if typing.get_origin(annotation) is tuple or dataclasses.is_dataclass(annotation):
        return None
    return FIXED_SIZES.get(field.metadata.get("kafka_type", ""))


def _field_scanner(
    field: dataclasses.Field[Any], flexible: bool, *, in_tag: bool, where: str
) -> Scanner:
    if isinstance(field.type, str):  # pragma: no cover - kio modules use real annotations
        raise TypeError(f"{where}: string annotation {field.type!r} cannot be scanned")
    annotation, nullable = _unwrap_optional(field.type)
    if typing.get_origin(annotation) is tuple:
        element, _ = _unwrap_optional(typing.get_args(annotation)[0])
        if dataclasses.is_dataclass(element):
            steps = entity_steps(typing.cast(type[Any], element))
            return _array(steps, 0, flexible, nullable, where)
        kind = field.metadata["kafka_type"]
        if kind in FIXED_SIZES:
            return _array((), FIXED_SIZES[kind], flexible, nullable, where)
        element_nullable = _unwrap_optional(typing.get_args(annotation)[0])[1]
        element_scanner = _variable(kind, flexible, element_nullable, where)
        return _array((element_scanner,), 0, flexible, nullable, where)
    if dataclasses.is_dataclass(annotation):
        struct = entity_scanner(typing.cast(type[Any], annotation))
        return _nullable_struct(struct, where) if nullable and not in_tag else struct
    kind = field.metadata["kafka_type"]
    if kind in _TIME_RANGES:
        null = -1 if nullable and kind == "datetime_i64" else None  # kio's None: kept
        return _time_i64(*_TIME_RANGES[kind], where, null)
    if kind in FIXED_SIZES:
        return _skip(FIXED_SIZES[kind], where)
    return _variable(kind, flexible, nullable, where)


def _skip(size: int, where: str) -> Scanner:
    def scan_fixed(buffer: BytesLike, offset: int, end: int) -> int:
        if end - offset < size:
            raise WireFormatError(f"{where}: truncated ({size} bytes needed at offset {offset})")
        return offset + size

    return scan_fixed


def _time_i64(low: int, high: int, where: str, null: int | None = None) -> Scanner:
    """An int64 of milliseconds; while ``readable_copy`` runs, one kio cannot hold (other than
    ``null``, a nullable timestamp's -1) is clamped."""

    def scan_time(buffer: BytesLike, offset: int, end: int) -> int:
        if end - offset < 8:
            raise WireFormatError(f"{where}: truncated (8 bytes needed at offset {offset})")
        edits = _EDITS.edits
        if edits is not None:
            (value,) = _INT64.unpack_from(buffer, offset)
            if value != null and not low <= value <= high:
                edits.append((offset, offset + 8, _INT64.pack(max(low, min(high, value)))))
        return offset + 8

    return scan_time


def _not_nullable(where: str) -> WireFormatError:
    return WireFormatError(f"non-nullable field {where} was serialized as null")


def _variable(kind: str, flexible: bool, nullable: bool, where: str) -> Scanner:
    if kind not in _VARIABLE_KINDS:
        raise TypeError(f"{where}: unknown kafka_type {kind!r}")
    if flexible:

        def scan_compact(buffer: BytesLike, offset: int, end: int) -> int:
            length_plus_one, offset = read_uvarint(buffer, offset, end)
            length = length_plus_one - 1
            if length > end - offset:
                raise WireFormatError(
                    f"{where}: length {length} at offset {offset} runs past the end "
                    f"({end - offset} bytes remaining)"
                )
            if length > 0:
                return offset + length
            if length < 0 and not nullable:
                raise _not_nullable(where)
            return offset

        return scan_compact

    prefix = INT16 if kind == "string" else INT32
    unpack_length = prefix.unpack_from
    prefix_size = prefix.size

    def scan_legacy(buffer: BytesLike, offset: int, end: int) -> int:
        if end - offset < prefix_size:
            raise WireFormatError(f"{where}: truncated length at offset {offset}")
        length: int = unpack_length(buffer, offset)[0]
        offset += prefix_size
        if length > 0:
            if length > end - offset:
                raise WireFormatError(
                    f"{where}: length {length} at offset {offset} runs past the end "
                    f"({end - offset} bytes remaining)"
                )
            return offset + length
        if length < -1:
            raise WireFormatError(f"{where}: negative length {length}")
        if length == -1 and not nullable:
            raise _not_nullable(where)
        return offset

    return scan_legacy


def _array(
    element_steps: tuple[Scanner, ...], element_size: int, flexible: bool, nullable: bool,
    where: str,
) -> Scanner:
    """An array of elements scanned by ``element_steps``, or of fixed ``element_size`` elements."""
    min_element_size = element_size or 1  # every element takes at least one byte
    read_count = _compact_count if flexible else _legacy_count

    def too_many(count: int, remaining: int) -> WireFormatError:
        return WireFormatError(
            f"{where}: tried to allocate a collection of size {count}, but there are only "
            f"{remaining} bytes remaining"
        )

    if not element_steps:

        def scan_fixed_array(buffer: BytesLike, offset: int, end: int) -> int:
            count, offset = read_count(buffer, offset, end, where)
            if count <= 0:
                if count < 0 and not nullable:
                    raise _not_nullable(where)
                return offset
            if count * min_element_size > end - offset:
                raise too_many(count, end - offset)
            return offset + count * element_size

        return scan_fixed_array

    def scan_array(buffer: BytesLike, offset: int, end: int) -> int:
        count, offset = read_count(buffer, offset, end, where)
        if count <= 0:
            if count < 0 and not nullable:
                raise _not_nullable(where)
            return offset
        if count > end - offset:
            raise too_many(count, end - offset)
        for _ in range(count):
            for step in element_steps:
                offset = step(buffer, offset, end)
        return offset

    return scan_array


_unpack_int32 = INT32.unpack_from


def _legacy_count(buffer: BytesLike, offset: int, end: int, where: str) -> tuple[int, int]:
    if end - offset < 4:
        raise WireFormatError(f"{where}: truncated array length at offset {offset}")
    count: int = _unpack_int32(buffer, offset)[0]
    if count < -1:
        raise WireFormatError(f"{where}: negative array length {count}")
    return count, offset + 4


def _compact_count(buffer: BytesLike, offset: int, end: int, where: str) -> tuple[int, int]:
    count_plus_one, offset = read_uvarint(buffer, offset, end)
    return count_plus_one - 1, offset


def _nullable_struct(struct: Scanner, where: str) -> Scanner:
    def scan_nullable(buffer: BytesLike, offset: int, end: int) -> int:
        if end - offset < 1:
            raise WireFormatError(f"{where}: truncated nullable struct marker at offset {offset}")
        if buffer[offset] >= 0x80:  # int8 marker < 0: null
            return offset + 1
        offset += 1
        return struct(buffer, offset, end)

    return scan_nullable


def _tag_buffer(known: dict[int, Scanner], where: str) -> Scanner:
    def scan_tags(buffer: BytesLike, offset: int, end: int) -> int:
        count_start = offset
        count, offset = read_uvarint(buffer, offset, end)
        if not count:
            return offset
        first_field = offset
        if count > end - offset:
            raise WireFormatError(
                f"{where}: {count} tagged fields announced, only {end - offset} bytes remaining"
            )
        edits = _EDITS.edits  # None unless ``readable_copy`` runs
        dropped = 0
        for _ in range(count):
            field_start = offset
            tag, offset = read_uvarint(buffer, offset, end)
            size, offset = read_uvarint(buffer, offset, end)
            if size > end - offset:
                raise WireFormatError(f"{where}: tagged field {tag} of {size} bytes is truncated")
            scanner = known.get(tag)
            if scanner is not None:
                if edits is None:
                    scanner(buffer, offset, offset + size)
                else:
                    before = len(edits)
                    scanner(buffer, offset, offset + size)
                    if any(len(new) != stop - start for start, stop, new in edits[before:]):
                        raise _NestedUnknownTags  # its size would change: not rewritten
            elif edits is not None:
                edits.append((field_start, offset + size, b""))
                dropped += 1
            offset += size
        if dropped:
            edits = typing.cast(list[tuple[int, int, bytes]], edits)
            edits.append((count_start, first_field, write_uvarint(count - dropped)))
        return offset

    return scan_tags


# ------------------------------------------------------------------ what kio cannot read
class _CopyEdits(threading.local):
    """Per thread: the edits the scanners record while ``readable_copy`` runs (``(start, end,
    replacement)`` over the buffer), else None (the normal scan)."""

    edits: list[tuple[int, int, bytes]] | None = None


_EDITS: Final = _CopyEdits()


class _NestedUnknownTags(Exception):
    pass


def readable_copy(entity_type: type[Any], buffer: BytesLike, offset: int, end: int) -> bytes | None:
    """The body in ``buffer[offset:end]`` as kio can read it: every tagged field its class does
    not declare removed (each TAG_BUFFER's count lowered) and every int64 time kio cannot hold
    clamped (see the module docstring). None if there is nothing to change, or an unknown tag
    sits inside a declared tagged field (whose size would then change).

    Runs only after kio refused a body (``messages``): the normal scan records nothing.
    """
    edits: list[tuple[int, int, bytes]] = []
    _EDITS.edits = edits
    try:
        body_end = scan(entity_type, buffer, offset, end)
    except _NestedUnknownTags:
        return None
    finally:
        _EDITS.edits = None
    if not edits:
        return None
    out = bytearray()
    position = offset
    for start, stop, replacement in sorted(edits):
        out += buffer[position:start]
        out += replacement
        position = stop
    out += buffer[position:body_end]
    return bytes(out)
