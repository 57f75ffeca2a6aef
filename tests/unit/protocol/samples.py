"""Test helpers: sample messages synthesised from kio's schemas, and kafka-python bridges.

``sample(entity_type)`` fills every field of a kio message class with a deterministic value chosen
from the field's name and Kafka type, written the version-neutral way Strata's handlers write
responses: Kafka's field names (``throttle_time_ms``), ints for error codes and milliseconds,
nested dicts and lists. Two classes of the same API get equal values for equal field names, so
samples of several versions merge into one union description (``merge``).

``plain(kio_object)`` turns a decoded kio object back into that representation, so a round
trip can be compared with the sample it started from (``kafka_python.py`` does the same for
kafka-python's objects).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import types
import typing
import uuid
import zlib
from typing import Any

_TIME_KINDS = {"timedelta_i32", "timedelta_i64", "datetime_i64"}


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members[0], True
    return annotation, False


def kafka_name(field: dataclasses.Field[Any]) -> str:
    """Kafka's snake_case name of a kio field (kio drops ``_ms`` from time fields)."""
    kind = field.metadata.get("kafka_type")
    if kind in _TIME_KINDS and not field.name.endswith("_ms"):
        return field.name + "_ms"
    return field.name


def _primitive(kind: str, name: str, salt: int) -> Any:
    seed = zlib.crc32(name.encode()) + salt
    match kind:
        case "int8":
            return seed % 100
        case "int16" | "uint16":
            return seed % 30000
        case "int32" | "timedelta_i32":
            return seed % 2_000_000_000
        case "int64" | "uint64" | "timedelta_i64":
            return seed * 1_000_003
        case "datetime_i64":  # epoch milliseconds a datetime can hold
            return 1_600_000_000_000 + seed
        case "bool":
            return seed % 2 == 1
        case "float64":
            return seed / 7
        case "error_code":
            return (3, 6, 35, 0)[seed % 4]
        case "uuid":
            return uuid.UUID(int=seed * 0x9E3779B97F4A7C15 + 1)
        case "string":
            return f"{name}-{salt}"
        case "bytes" | "records":
            return f"{name}:{salt}".encode()
    raise AssertionError(f"unexpected kafka type {kind}")


def sample(entity_type: type[Any], salt: int = 0, array_length: int = 2) -> dict[str, Any]:
    """A version-neutral description filling every field of ``entity_type``."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(entity_type):
        annotation, _ = _unwrap(field.type)
        kind = field.metadata.get("kafka_type")
        if typing.get_origin(annotation) is tuple:
            element, _ = _unwrap(typing.get_args(annotation)[0])
            if dataclasses.is_dataclass(element):
                value: Any = [
                    sample(typing.cast(type[Any], element), salt + i, array_length)
                    for i in range(array_length)
                ]
            else:
                value = [_primitive(kind, field.name, salt + i) for i in range(array_length)]
        elif dataclasses.is_dataclass(annotation):
            value = sample(typing.cast(type[Any], annotation), salt, array_length)
        else:
            value = _primitive(kind, field.name, salt)
        values[kafka_name(field)] = value
    return values


def merge(base: Any, extra: Any) -> Any:
    """Deep union of two samples (dicts merged by key, lists element-wise)."""
    if isinstance(base, dict) and isinstance(extra, dict):
        out = dict(base)
        for key, value in extra.items():
            out[key] = merge(out[key], value) if key in out else value
        return out
    if isinstance(base, list) and isinstance(extra, list):
        longest = max(len(base), len(extra))
        return [
            merge(base[i], extra[i]) if i < len(base) and i < len(extra)
            else (base[i] if i < len(base) else extra[i])
            for i in range(longest)
        ]
    return base


def plain(value: Any) -> Any:
    """A kio object (or value) in the sample representation."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {kafka_name(f): plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [plain(item) for item in value]
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, enum.IntEnum):
        return int(value)
    return value
