"""``/console/topics/{name}/records``: the record browser and the produce form.

* ``GET``: one partition's records from a seek point — ``offset`` (the first offset shown),
  ``timestamp`` (the first record at or after it: epoch ms or an ISO 8601 time, UTC unless it
  says otherwise) or ``end`` (the last ``limit`` records) — read by the console's
  ``RecordReader`` (the REST route's ``browse`` rules with a consumer kept connected: nothing
  committed, never past the high watermark). Optional ``key``/``value``/``header`` substring filters
  (``strata.admin.console.record_view.matches``) scan forward at most ``MAX_SCAN`` records for
  ``limit`` matches; the page says where the scan stopped. Keys, values and header values are
  shown as ``text``, pretty ``json`` or ``hex`` (``record_view.show``), always escaped;
* ``GET .../records/tail?partition=&offset=``: the live tail's poll (JSON): the records from
  ``offset`` on with the same filters and view, and the next offset to ask from.
  ``static/console.js`` polls it every second while the tail is on (``?tail=1`` starts it;
  it stops when the page is hidden or left) and appends each record as text nodes;
* ``POST``: produce one record (key, value, ``name=value`` header lines, optional partition)
  with the REST route's ``produce`` (acks=all), then show it in the browser.

Authorization: browsing needs Topic Read, producing Topic Write (as the REST routes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Final

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse, Response

from strata.admin.console.record_reader import RecordReader
from strata.admin.console.record_view import RawRecord, View, matches, ms_time, show
from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute, int_field
from strata.admin.models import TOPIC_NAME_PATTERN, Encoding, Header, RecordIn
from strata.admin.problems import ProblemError
from strata.admin.routers.records import produce
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

TopicName = Annotated[str, Path(pattern=TOPIC_NAME_PATTERN, max_length=249)]
MAX_LIMIT: Final = 500
MAX_SCAN: Final = 10_000
BATCH: Final = 500
TAIL_LIMIT: Final = 100


@dataclass(frozen=True, slots=True)
class Page:
    partitions: list[int]
    log_start_offset: int
    high_watermark: int
    records: list[RawRecord]
    scanned_to: int  # the next offset a continued scan would read


def parse_timestamp(text: str) -> int:
    """Epoch milliseconds from digits or an ISO 8601 time (naive: UTC)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ProblemError(422, "VALIDATION_ERROR",
                           f"timestamp: {text!r} is neither epoch ms nor an ISO 8601 time"
                           ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(int(moment.timestamp() * 1000), 0)


def _read(reader: RecordReader, name: str, partition: int, seek: str, offset: int | None,
          timestamp: int | None, limit: int, filters: tuple[str, str, str]) -> Page:
    """Up to ``limit`` records passing ``filters``, scanning at most ``MAX_SCAN``."""
    filtering = any(filters)
    batch = reader.read(name, partition, offset, timestamp, BATCH if filtering else limit,
                        from_end=seek == "end")
    out = [r for r in batch.records if matches(r, *filters)][:limit]
    scanned = len(batch.records)
    next_offset = batch.records[-1].offset + 1 if batch.records else batch.high_watermark
    while filtering and len(out) < limit and scanned < MAX_SCAN \
            and next_offset < batch.high_watermark:
        more = reader.read(name, partition, next_offset, None, BATCH)
        if not more.records:
            break
        out += [r for r in more.records if matches(r, *filters)][:limit - len(out)]
        scanned += len(more.records)
        next_offset = more.records[-1].offset + 1
    if len(out) >= limit and filtering:
        next_offset = out[-1].offset + 1
    return Page(batch.partitions, batch.log_start_offset, batch.high_watermark, out,
                next_offset)


@router.get("/topics/{name}/records")
async def records(
    console: ConsoleDep, name: TopicName,
    partition: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    seek: Annotated[str, Query(pattern="^(offset|timestamp|end)$")] = "offset",
    offset: Annotated[str, Query(max_length=20)] = "",
    timestamp: Annotated[str, Query(max_length=64)] = "",
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    key: Annotated[str, Query(max_length=1000)] = "",
    value: Annotated[str, Query(max_length=1000)] = "",
    header: Annotated[str, Query(max_length=1000)] = "",
    view: View = View.TEXT,
    tail: Annotated[bool, Query()] = False,
) -> Response:
    await console.access.require(AclOperation.READ, ResourceType.TOPIC, name)
    start = int_field({"offset": offset}, "offset") if seek == "offset" else None
    if start is not None and start < 0:
        raise ProblemError(422, "VALIDATION_ERROR", "offset: must be 0 or more")
    at = parse_timestamp(timestamp) if seek == "timestamp" and timestamp.strip() else None
    reader: RecordReader = console.request.app.state.console_reader
    result = await console.gateway.run(_read, reader, name, partition, seek, start, at, limit,
                                       (key, value, header))
    return console.render(
        "records.html", topic=name, page=result, partition=partition, seek=seek,
        offset=offset, timestamp=timestamp, limit=limit, key=key, value=value, header=header,
        view=view.value, views=[v.value for v in View], section="topics", tail=tail,
        may_write=await console.access.allowed(AclOperation.WRITE, ResourceType.TOPIC, name))


def record_json(record: RawRecord, view: View) -> dict[str, Any]:
    """One record for the live tail, shown as the page shows it (``record_view.show``); the
    script puts each string in a text node, so nothing in it is ever run as markup."""
    return {"offset": record.offset, "timestamp": ms_time(record.timestamp),
            "timestamp_type": record.timestamp_type,
            "key": show(record.key, view), "value": show(record.value, view),
            "headers": [[name, show(value, view)] for name, value in record.headers]}


@router.get("/topics/{name}/records/tail")
async def tail(
    console: ConsoleDep, name: TopicName,
    partition: Annotated[int, Query(ge=0, le=1_000_000)],
    offset: Annotated[int, Query(ge=0)],
    key: Annotated[str, Query(max_length=1000)] = "",
    value: Annotated[str, Query(max_length=1000)] = "",
    header: Annotated[str, Query(max_length=1000)] = "",
    view: View = View.TEXT,
) -> JSONResponse:
    """The live tail's poll: the records from ``offset`` on (at most ``TAIL_LIMIT``, the
    filters applied) and the offset to ask from next (JSON; Topic Read)."""
    await console.access.require(AclOperation.READ, ResourceType.TOPIC, name)
    reader: RecordReader = console.request.app.state.console_reader
    result = await console.gateway.run(_read, reader, name, partition, "offset", offset, None,
                                       TAIL_LIMIT, (key, value, header))
    return JSONResponse({"next": result.scanned_to, "high_watermark": result.high_watermark,
                         "records": [record_json(r, view) for r in result.records]},
                        headers={"Cache-Control": "no-store"})


def _headers(text: str) -> list[Header]:
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        out.append(Header(key=name.strip(), value=value if sep else None))
    return out


@router.post("/topics/{name}/records")
async def produce_record(console: ConsoleDep, name: TopicName) -> Response:
    fields = await console.form()
    await console.access.require(AclOperation.WRITE, ResourceType.TOPIC, name)
    record = RecordIn(key=fields.get("key") or None, value=fields.get("value", ""),
                      headers=_headers(fields.get("headers", "")),
                      partition=int_field(fields, "partition"))
    [written] = await console.gateway.run(produce, console.gateway, name, [record],
                                          Encoding.TEXT)
    return console.redirect(f"{PREFIX}/topics/{name}/records?partition={written.partition}"
                            f"&offset={written.offset}")
