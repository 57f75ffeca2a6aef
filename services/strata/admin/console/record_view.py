"""How the record browser shows a record's bytes, and which records its filter keeps.

Pure functions over bytes (no I/O), unit-tested alone:

* ``show(data, view)``: ``text`` (UTF-8, invalid sequences replaced by U+FFFD), ``json``
  (pretty-printed with 2-space indents when the bytes are a JSON document, else the text),
  ``hex`` (lower-case pairs separated by spaces). None (a null key or value) stays None, shown
  as ``null`` by the template. The result is plain text: the templates escape it (autoescape),
  so a value of ``<script>`` is shown, never run;
* ``matches(record, key_filter, value_filter, header_filter)``: case-sensitive substring
  tests on the UTF-8 text of the key, the value and the headers (``name=value``); an empty
  filter keeps everything;
* ``ms_time(timestamp)``: a record's epoch-ms timestamp as ISO 8601 UTC;
* ``human_bytes`` and ``per_second``: sizes (KiB, MiB...) and rates as the pages show them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final


class View(StrEnum):
    TEXT = "text"
    JSON = "json"
    HEX = "hex"


@dataclass(frozen=True, slots=True)
class RawRecord:
    """A record as browsed: its bytes exactly as stored."""

    partition: int
    offset: int
    timestamp: int
    timestamp_type: str
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def show(data: bytes | None, view: View) -> str | None:
    """``data`` as the browser shows it in ``view``."""
    if data is None:
        return None
    if view is View.HEX:
        return data.hex(" ")
    text = _text(data)
    if view is View.JSON:
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def ms_time(timestamp: int) -> str:
    """A record timestamp (epoch ms) as ISO 8601 UTC with milliseconds; negative: ``-``."""
    if timestamp < 0:
        return "-"
    moment = datetime.fromtimestamp(timestamp / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _has(data: bytes | None, needle: str) -> bool:
    return data is not None and needle in _text(data)


def matches(record: RawRecord, key_filter: str = "", value_filter: str = "",
            header_filter: str = "") -> bool:
    """Whether ``record`` passes every non-empty filter (substring of the UTF-8 text)."""
    if key_filter and not _has(record.key, key_filter):
        return False
    if value_filter and not _has(record.value, value_filter):
        return False
    if header_filter:
        texts = (f"{name}={_text(value) if value is not None else ''}"
                 for name, value in record.headers)
        if not any(header_filter in text for text in texts):
            return False
    return True


_UNITS: Final = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def human_bytes(size: float | None) -> str:
    """``1536`` -> ``1.5 KiB``; None (not known yet) -> an en dash."""
    if size is None:
        return "\u2013"
    value, unit = float(size), 0
    while abs(value) >= 1024 and unit < len(_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{int(value)} B" if unit == 0 else f"{value:.1f} {_UNITS[unit]}"


def per_second(rate: float | None) -> str:
    """A rate per second, ``12.5/s`` (``0.25/s``, ``1234/s``); None -> an en dash."""
    if rate is None:
        return "\u2013"
    if rate >= 100:
        return f"{rate:.0f}/s"
    return f"{rate:.1f}/s" if rate >= 1 else f"{rate:.2g}/s"
