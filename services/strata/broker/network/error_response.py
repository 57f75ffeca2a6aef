"""``error_response``: a whole response frame carrying only a top-level error code.

What the connection answers when a handler failed unexpectedly (UNKNOWN_SERVER_ERROR) or refused
a request as a whole (an ``AuthorizationFailed``): the response class of the request's API and
version with ``error_code`` set and every other field at its empty value. Pure (no I/O).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Final

from strata.protocol.codec import encode_response
from strata.protocol.error_codes import ErrorCode
from strata.protocol.errors import MessageBuildError
from strata.protocol.header import RequestHeader
from strata.protocol.messages import build_response, response_type


def error_response(header: RequestHeader, code: ErrorCode) -> bytes | None:
    """The whole response frame answering ``header`` with ``code`` in a top-level error field.

    Every other field gets its empty value (0, "", None, an empty array). ``None`` when the
    response has no top-level ``error_code`` (its errors are per resource) or cannot be built.
    """
    try:
        cls = response_type(header.api_key, header.api_version)
    except LookupError:
        return None
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if "error_code" not in fields:
        return None
    values: dict[str, object] = {}
    for field in fields.values():
        if field.name == "error_code":
            values[field.name] = code
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            empty = _empty_value(field)
            if empty is _NO_EMPTY:
                return None
            values[field.name] = empty
    try:
        body = build_response(header.api_key, header.api_version, values)
        return encode_response(header, body)
    except MessageBuildError:
        return None


_NO_EMPTY: Final = object()


def _empty_value(field: dataclasses.Field[Any]) -> object:
    kind = field.metadata.get("kafka_type")
    annotation = field.type
    args = typing.get_args(annotation)
    nullable = typing.get_origin(annotation) in (types.UnionType, typing.Union) and (
        type(None) in args
    )
    if nullable:
        return None
    if typing.get_origin(annotation) is tuple:
        return ()
    if kind in ("timedelta_i32", "timedelta_i64", "datetime_i64"):
        return 0
    if kind == "bool":
        return False
    if kind in ("string", "bytes", "records"):
        return "" if kind == "string" else b""
    if kind in ("int8", "int16", "int32", "int64", "uint16", "uint32", "float64"):
        return 0
    if kind == "uuid":
        return None
    return _NO_EMPTY

