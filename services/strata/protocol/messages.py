"""The kio adapter: Kafka message classes by (api key, version), body decode/encode, builders.

Owns every use of kio's dynamic, untyped corners; ``Any`` stays inside this module (and the
scanner it feeds). kio 0.6.5 generates one frozen dataclass per message *version* from Kafka's
JSON specs (``kio.schema.<api>.v<N>.request.<Name>Request``), decodes with a Rust reader and
encodes with a pure-Python writer. This module adds what the codec needs on top:

- lookup: ``request_type`` / ``response_type`` (cached) raise ``UnknownMessageVersion``, a
  ``LookupError``, for a pair kio does not know; callers decide whose fault that is.
- decode: ``decode_request_body`` / ``decode_response_body`` first run the structural pre-scan
  (``strata.protocol.prescan``: kio aborts the process on a huge array count), then kio's reader,
  and require the body to end exactly at the end of the frame — except that in a flexible
  version whole tagged-field sections may follow the body and are ignored (the flexible-version
  rule that a reader skips tagged fields it does not know; librdkafka 2.x's
  AlterUserScramCredentials v0 writes the top-level empty tag buffer twice, and Kafka's own
  parser never looks past the body). Errors become ``InvalidRequest`` / ``InvalidResponse``: the
  peer misbehaved.
- encode: ``encode_body`` / ``write_body``; a value kio cannot write becomes
  ``MessageBuildError``: our bug.
- build: ``build_response`` / ``build_request`` / ``build_entity`` turn a *version-neutral*
  description (a mapping holding the union of the fields of all versions, nested mappings or
  sequences for nested structs) into the dataclass of one version: fields that version lacks are
  ignored, fields it has are required unless kio gives them a default (tagged fields), nested
  entities are built recursively. Conversions: ``error_code`` fields take an int or an
  ``ErrorCode``; kio's time fields drop Kafka's ``Ms`` suffix (kio ``throttle_time`` is Kafka's
  ``ThrottleTimeMs``), so either spelling is looked up and an int of milliseconds is accepted
  (``timedelta`` / ``datetime`` too; -1 in a nullable timestamp is kio's None). A kio instance
  of another version can be given instead of a mapping: its attributes are read by name, which
  converts between versions.

Decoded request objects are kio's, with kio's field names (``max_wait`` is a ``timedelta``).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import struct
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any, Final, TypeVar

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import OutOfBoundValue, SerialError
from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i64
from kio.static.protocol import Payload, RequestPayload, ResponsePayload

from strata.protocol.errors import InvalidRequest, InvalidResponse, MessageBuildError
from strata.protocol.prescan import readable_copy, scan
from strata.protocol.primitives import BytesLike, WireFormatError, skip_tagged_fields

E = TypeVar("E")

_MS_SUFFIX: Final = "_ms"
_TIME_KINDS: Final = frozenset({"timedelta_i32", "timedelta_i64", "datetime_i64"})
# What kio's Rust reader raises on bad input besides its own SerialError subclasses. KeyError:
# kio 0.6.5 cannot skip a tagged field its class does not declare ("Unknown tagged field tag",
# found by the protocol fuzzer); Kafka skips them, and so does ``_decode`` (it reads a copy
# without them) unless one sits inside a declared tagged field. ValueError: among others, an
# int64 of milliseconds past what kio's timedelta / datetime hold ("timedelta milliseconds
# overflow", found by the request property test); Kafka reads any long, and ``_decode`` reads a
# copy with it clamped (``prescan.readable_copy``).
_KIO_DECODE_ERRORS: Final = (SerialError, ValueError, TypeError, OverflowError, IndexError,
                             KeyError)
# What kio's Python writer raises when handed a value of the wrong type or range.
_KIO_ENCODE_ERRORS: Final = (
    SerialError,
    struct.error,
    TypeError,
    ValueError,
    AttributeError,
    OverflowError,
)


class UnknownMessageVersion(LookupError):
    """kio has no message class for this (api key, version): unknown key or version."""


# --------------------------------------------------------------------------- lookup


@functools.cache
def request_type(api_key: int, api_version: int) -> type[RequestPayload]:
    """kio's request class for ``api_key`` at ``api_version``."""
    try:
        return load_request_schema(api_key, api_version)
    except (UnknownAPIKey, UnknownEntity):
        raise UnknownMessageVersion(
            f"no request class for api key {api_key} version {api_version}"
        ) from None


@functools.cache
def response_type(api_key: int, api_version: int) -> type[ResponsePayload]:
    """kio's response class for ``api_key`` at ``api_version``."""
    try:
        return load_response_schema(api_key, api_version)
    except (UnknownAPIKey, UnknownEntity):
        raise UnknownMessageVersion(
            f"no response class for api key {api_key} version {api_version}"
        ) from None


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether this version uses the flexible (compact, tagged-field) encoding (KIP-482)."""
    return request_type(api_key, api_version).__flexible__


# --------------------------------------------------------------------------- decode


def decode_request_body(api_key: int, api_version: int, buffer: BytesLike, offset: int) -> Any:
    """The request body in ``buffer[offset:]`` as kio's dataclass; ``InvalidRequest`` if bad.

    Returns ``Any`` (a ``RequestPayload`` at run time): the handler of one API knows which
    version classes it serves; the union kio exports cannot be narrowed usefully here.
    """
    cls = request_type(api_key, api_version)
    try:
        return _decode(cls, buffer, offset)
    except _BodyError as exc:
        raise InvalidRequest(str(exc)) from exc.__cause__


def decode_response_body(api_key: int, api_version: int, buffer: BytesLike, offset: int) -> Any:
    """The response body in ``buffer[offset:]`` as kio's dataclass; ``InvalidResponse`` if bad."""
    cls = response_type(api_key, api_version)
    try:
        return _decode(cls, buffer, offset)
    except _BodyError as exc:
        raise InvalidResponse(str(exc)) from exc.__cause__


class _BodyError(Exception):
    pass


_READERS: dict[type[Any], Callable[[Any, int], tuple[Any, int]]] = {}


def _reader(cls: type[Any]) -> Callable[[Any, int], tuple[Any, int]]:
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = entity_reader(cls)
    return reader


def _only_tagged_fields(buffer: BytesLike, offset: int, end: int) -> bool:
    """Whether ``buffer[offset:end]`` is one or more complete tagged-field sections."""
    try:
        while offset < end:
            offset = skip_tagged_fields(buffer, offset, end)
    except WireFormatError:
        return False
    return offset == end


def _decode(cls: type[Any], buffer: BytesLike, offset: int) -> Any:
    label = f"{cls.__name__} v{cls.__version__}"
    end = len(buffer)
    try:
        body_end = scan(cls, buffer, offset, end)
    except WireFormatError as exc:
        raise _BodyError(f"{label}: {exc}") from exc
    if body_end != end and not (cls.__flexible__
                                and _only_tagged_fields(buffer, body_end, end)):
        raise _BodyError(f"{label}: {end - body_end} unexpected bytes after the body")
    readable = memoryview(buffer).toreadonly() if isinstance(buffer, bytearray) else buffer
    try:
        value, _size = _reader(cls)(readable, offset)
    except (KeyError, ValueError, OutOfBoundValue) as exc:  # perhaps kio cannot, Kafka can
        copy = readable_copy(cls, buffer, offset, end)
        if copy is None:
            raise _BodyError(f"{label}: {type(exc).__name__}: {exc}") from exc
        try:
            value, _size = _reader(cls)(copy, 0)
        except _KIO_DECODE_ERRORS as again:
            raise _BodyError(f"{label}: {type(again).__name__}: {again}") from again
    except _KIO_DECODE_ERRORS as exc:
        raise _BodyError(f"{label}: {type(exc).__name__}: {exc}") from exc
    return value


# --------------------------------------------------------------------------- encode


def write_body(out: IO[bytes], body: Payload) -> None:
    """Append the encoding of ``body`` (any kio entity) to ``out``."""
    cls: type[Any] = type(body)
    try:
        entity_writer(cls)(out, body)
    except _KIO_ENCODE_ERRORS as exc:
        raise MessageBuildError(
            f"cannot encode {cls.__name__} v{cls.__version__}: {type(exc).__name__}: {exc}"
        ) from exc


def encode_body(body: Payload) -> bytes:
    """The encoding of ``body`` (no header, no size prefix)."""
    out = io.BytesIO()
    write_body(out, body)
    return out.getvalue()


# --------------------------------------------------------------------------- build


def build_response(
    api_key: int, api_version: int, fields: Mapping[str, object] | None = None, /, **more: object
) -> Any:
    """The ``api_version`` response of ``api_key`` from a version-neutral field mapping."""
    return build_entity(response_type(api_key, api_version), _merge(fields, more))


def build_request(
    api_key: int, api_version: int, fields: Mapping[str, object] | None = None, /, **more: object
) -> Any:
    """The ``api_version`` request of ``api_key`` from a version-neutral field mapping."""
    return build_entity(request_type(api_key, api_version), _merge(fields, more))


def build_entity(entity_type: type[E], source: object) -> E:
    """An instance of the kio dataclass ``entity_type`` from a mapping or another kio object."""
    if type(source) is entity_type:
        return source  # the exact class: already built
    values: dict[str, Any] = {}
    for plan in _plan(entity_type):
        raw = _lookup(source, plan.names)
        if raw is _MISSING:
            if plan.required:
                raise MessageBuildError(
                    f"{_label(entity_type)}: missing field {plan.names[-1]!r}"
                    + (f" (or {plan.names[0]!r})" if len(plan.names) > 1 else "")
                )
            continue
        if plan.convert is not None and raw is not None:
            try:
                raw = plan.convert(raw)
            except MessageBuildError as exc:
                raise MessageBuildError(f"{_label(entity_type)}.{plan.names[0]}: {exc}") from exc
        values[plan.names[0]] = raw
    return entity_type(**values)


def _merge(fields: Mapping[str, object] | None, more: Mapping[str, object]) -> Mapping[str, object]:
    if fields is None:
        return more
    return {**fields, **more} if more else fields


class _Missing:
    pass


_MISSING: Final = _Missing()


def _lookup(source: object, names: tuple[str, ...]) -> Any:
    if isinstance(source, Mapping):
        for name in names:
            value = source.get(name, _MISSING)
            if value is not _MISSING:
                return value
        return _MISSING
    if dataclasses.is_dataclass(source):
        for name in names:
            value = getattr(source, name, _MISSING)
            if value is not _MISSING:
                return value
        return _MISSING
    raise MessageBuildError(
        f"expected a mapping or a kio dataclass, got {type(source).__name__}: {source!r:.80}"
    )


def _label(entity_type: type[Any]) -> str:
    return f"{entity_type.__name__} v{entity_type.__version__}"


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    names: tuple[str, ...]  # kio's name first, then Kafka's spelling when it differs
    required: bool
    convert: Callable[[Any], Any] | None


_PLANS: dict[type[Any], tuple[_FieldPlan, ...]] = {}


def _plan(entity_type: type[Any]) -> tuple[_FieldPlan, ...]:
    plans = _PLANS.get(entity_type)
    if plans is None:
        plans = _PLANS[entity_type] = _compile_plan(entity_type)
    return plans


def _compile_plan(entity_type: type[Any]) -> tuple[_FieldPlan, ...]:
    plans = []
    for field in dataclasses.fields(entity_type):
        kind = field.metadata.get("kafka_type")
        names: tuple[str, ...] = (field.name,)
        if kind in _TIME_KINDS and not field.name.endswith(_MS_SUFFIX):
            names = (field.name, field.name + _MS_SUFFIX)
        required = (
            field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        )
        plans.append(_FieldPlan(names, required, _converter(field.type, kind)))
    return tuple(plans)


def _converter(annotation: Any, kind: str | None) -> Callable[[Any], Any] | None:
    nullable = annotation is not _unwrap_optional(annotation)
    annotation = _unwrap_optional(annotation)
    if typing.get_origin(annotation) is tuple:
        element = _unwrap_optional(typing.get_args(annotation)[0])
        if dataclasses.is_dataclass(element):
            element_type = typing.cast(type[Any], element)
            return lambda items: _build_array(element_type, items)
        element_convert = _converter(element, kind)
        if element_convert is None:
            return tuple
        return lambda items: tuple(element_convert(item) for item in items)
    if dataclasses.is_dataclass(annotation):
        nested = typing.cast(type[Any], annotation)
        return lambda value: build_entity(nested, value)
    if kind == "error_code":
        return _to_error_code
    if kind in ("timedelta_i32", "timedelta_i64"):
        return _to_timedelta
    if kind == "datetime_i64":
        return _to_nullable_datetime if nullable else _to_datetime
    return None


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def _build_array(element_type: type[Any], items: Iterable[object]) -> tuple[Any, ...]:
    if isinstance(items, Mapping | str | bytes):
        raise MessageBuildError(f"expected a sequence of entries, got {type(items).__name__}")
    built = []
    for index, item in enumerate(items):
        try:
            built.append(build_entity(element_type, item))
        except MessageBuildError as exc:
            raise MessageBuildError(f"[{index}] {exc}") from exc
    return tuple(built)


def _to_error_code(value: object) -> ErrorCode:
    if isinstance(value, ErrorCode):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return ErrorCode(value)
        except ValueError:
            raise MessageBuildError(f"unknown error code {value}") from None
    raise MessageBuildError(f"expected an error code, got {value!r:.80}")


def _to_timedelta(value: object) -> datetime.timedelta:
    if isinstance(value, datetime.timedelta):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return datetime.timedelta(milliseconds=value)
    raise MessageBuildError(f"expected milliseconds or a timedelta, got {value!r:.80}")


def _to_nullable_datetime(value: object) -> datetime.datetime | None:
    """-1 is Kafka's "no timestamp" (``log_append_time_ms`` of a CreateTime topic): None in kio."""
    return None if value == -1 else _to_datetime(value)


def _to_datetime(value: object) -> datetime.datetime:
    if isinstance(value, datetime.datetime):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return tz_aware_from_i64(i64(value))
    raise MessageBuildError(f"expected epoch milliseconds or a datetime, got {value!r:.80}")
