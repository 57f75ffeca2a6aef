"""``/console/topics/{name}/records``: the record browser and the produce form.

* ``GET``: one partition's records from a seek point — ``offset`` (the first offset shown),
  ``timestamp`` (the first record at or after it: epoch ms or an ISO 8601 time, UTC unless it
  says otherwise) or ``end`` (the last ``limit`` records) — read with the REST route's
  ``browse`` (a ``Consumer`` per request, ``assign()``, nothing committed, never past the high
  watermark). Optional ``key``/``value``/``header`` substring filters
  (``strata.admin.console.record_view.matches``) scan forward at most ``MAX_SCAN`` records for
  ``limit`` matches; the page says where the scan stopped. Keys, values and header values are
  shown as ``text``, pretty ``json`` or ``hex`` (``record_view.show``), always escaped;
* ``POST``: produce one record (key, value, ``name=value`` header lines, optional partition)
  with the REST route's ``produce`` (acks=all), then show it in the browser.

Authorization: browsing needs Topic Read, producing Topic Write (as the REST routes).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Final

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from strata.admin.console.record_view import RawRecord, View, matches
from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute, int_field
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.models import TOPIC_NAME_PATTERN, Encoding, Header, RecordIn, RecordOut
from strata.admin.problems import ProblemError
from strata.admin.routers.records import browse, produce
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

TopicName = Annotated[str, Path(pattern=TOPIC_NAME_PATTERN, max_length=249)]
MAX_LIMIT: Final = 500
MAX_SCAN: Final = 10_000
BATCH: Final = 500


@dataclass(frozen=True, slots=True)
class Page:
    partitions: list[int]
    log_start_offset: int
    high_watermark: int
    records: list[RawRecord]
    scanned_to: int  # the next offset a continued scan would read


def _raw(record: RecordOut) -> RawRecord:
    def data(text: str | None) -> bytes | None:
        return None if text is None else base64.b64decode(text)

    return RawRecord(record.partition, record.offset, record.timestamp, record.timestamp_type,
                     data(record.key), data(record.value),
                     [(h.key, data(h.value)) for h in record.headers])


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


def _read(gateway: KafkaGateway, name: str, partition: int, seek: str, offset: int | None,
          timestamp: int | None, limit: int, filters: tuple[str, str, str]) -> Page:
    kafka = gateway.kafka
    topic = kafka.topic(name)
    partitions = sorted(topic.partitions)
    key = (name, partition)
    low = kafka.list_offsets([key], "earliest").get(key, 0) if partition in partitions else 0
    high = kafka.list_offsets([key], "latest").get(key, 0) if partition in partitions else 0
    if seek == "end":
        offset, timestamp = max(high - limit, low), None
    filtering = any(filters)
    out: list[RawRecord] = []
    scanned = 0
    next_offset = offset
    while len(out) < limit:
        batch = browse(gateway, name, partition, next_offset, timestamp,
                       BATCH if filtering else limit, Encoding.BASE64)
        timestamp = None
        if not batch:
            next_offset = high
            break
        for record in batch:
            raw = _raw(record)
            if matches(raw, *filters):
                out.append(raw)
                if len(out) >= limit:
                    break
        next_offset = (out[-1].offset if len(out) >= limit else batch[-1].offset) + 1
        scanned += len(batch)
        if not filtering or scanned >= MAX_SCAN:
            break
    return Page(partitions, low, high, out, next_offset if next_offset is not None else low)


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
) -> Response:
    await console.access.require(AclOperation.READ, ResourceType.TOPIC, name)
    start = int_field({"offset": offset}, "offset") if seek == "offset" else None
    if start is not None and start < 0:
        raise ProblemError(422, "VALIDATION_ERROR", "offset: must be 0 or more")
    at = parse_timestamp(timestamp) if seek == "timestamp" and timestamp.strip() else None
    result = await console.gateway.run(_read, console.gateway, name, partition, seek, start,
                                       at, limit, (key, value, header))
    return console.render(
        "records.html", topic=name, page=result, partition=partition, seek=seek,
        offset=offset, timestamp=timestamp, limit=limit, key=key, value=value, header=header,
        view=view.value, views=[v.value for v in View], section="topics",
        may_write=await console.access.allowed(AclOperation.WRITE, ResourceType.TOPIC, name))


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
