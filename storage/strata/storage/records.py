"""Records inside a RecordBatch v2: varints, the record grammar, iterating and building batches.

Pure functions over bytes; no I/O. The batch header is ``record_batch``'s; this module owns what
follows it: ``recordsCount`` records, compressed as one payload when the codec is not 0 (see
``compression``). Each record, all integers zigzag varints (``varint`` int32, at most 5 bytes;
``varlong`` int64, at most 10)::

    length            varint   bytes of the record after this field
    attributes        int8     unused, 0
    timestampDelta    varlong  timestamp = baseTimestamp + timestampDelta
    offsetDelta       varint   offset = baseOffset + offsetDelta
    keyLength         varint   -1 = null key
    key               bytes
    valueLength       varint   -1 = null value (a tombstone)
    value             bytes
    headersCount      varint
    headers           [headerKeyLength varint, headerKey utf-8,
                       headerValueLength varint (-1 = null), headerValue]

In a LogAppendTime batch every record's timestamp reads as the batch's ``maxTimestamp``.

A control batch (attribute bit 5) holds control records whose key is ``version int16, type
int16`` (type 0 ABORT, 1 COMMIT) and, for transaction markers, whose value is ``version int16,
coordinatorEpoch int32``.

Invariants checked by ``iter_records``: the batch's CRC (unless told not to), exactly
``recordsCount`` records, each record's fields ending exactly at its ``length``, and the last
record ending exactly at the end of the (decompressed) records section. Violations raise
``InvalidRecordError`` (record framing, Kafka's INVALID_RECORD) or ``CorruptRecordError``
(batch framing, CRC, undecodable compression).

Header keys decode with ``surrogateescape``, so a non-UTF-8 key survives a read-and-rebuild (the
log cleaner) byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum

from strata.storage import record_batch as rb
from strata.storage.compression import CompressionType, compress, decompress
from strata.storage.errors import CorruptRecordError, InvalidRecordError

Buffer = bytes | bytearray | memoryview
Headers = tuple[tuple[str, bytes | None], ...]

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# Same layout as record_batch's header (a test checks build_batch output parses there).
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class Record:
    """One record as read: absolute offset and timestamp, key, value, headers."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """A record to write. ``offset_delta`` None means "one after the previous record" (0 first);
    the log cleaner passes the original deltas to keep offsets across a rebuild."""

    key: bytes | None = None
    value: bytes | None = None
    headers: Headers = ()
    timestamp: int = rb.NO_TIMESTAMP
    offset_delta: int | None = None


class ControlRecordType(IntEnum):
    """Type field of a control record's key (Kafka's ``ControlRecordType``)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


# ------------------------------------------------------------------------------------ varints
def _read_unsigned(data: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """Raw base-128 value at ``pos`` and the position after it. IndexError past the end."""
    b = data[pos]
    if b < 0x80:
        return b, pos + 1
    value, shift, end = b & 0x7F, 7, pos + max_bytes
    pos += 1
    while True:
        if pos >= end:
            raise InvalidRecordError(f"varint longer than {max_bytes} bytes")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    u, pos = _read_unsigned(data, pos, 5)
    if u >> 32:
        raise InvalidRecordError("varint does not fit in 32 bits")
    return (u >> 1) ^ -(u & 1), pos


def _read_varlong(data: bytes, pos: int) -> tuple[int, int]:
    u, pos = _read_unsigned(data, pos, 10)
    if u >> 64:
        raise InvalidRecordError("varlong does not fit in 64 bits")
    return (u >> 1) ^ -(u & 1), pos


def _write_unsigned(out: bytearray, u: int) -> None:
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def _write_varint(out: bytearray, value: int) -> None:
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint value {value} is outside int32")
    _write_unsigned(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def _write_varlong(out: bytearray, value: int) -> None:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong value {value} is outside int64")
    _write_unsigned(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of an int32 (Kafka's ``ByteUtils.writeVarint``)."""
    out = bytearray()
    _write_varint(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    """Zigzag varlong of an int64 (Kafka's ``ByteUtils.writeVarlong``)."""
    out = bytearray()
    _write_varlong(out, value)
    return bytes(out)


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """``(value, position after it)``; ``InvalidRecordError`` if truncated, too long or too big."""
    try:
        return _read_varint(bytes(buf), pos)
    except IndexError:
        raise InvalidRecordError(f"varint truncated at byte {pos}") from None


def decode_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """``(value, position after it)``; ``InvalidRecordError`` if truncated, too long or too big."""
    try:
        return _read_varlong(bytes(buf), pos)
    except IndexError:
        raise InvalidRecordError(f"varlong truncated at byte {pos}") from None


# ---------------------------------------------------------------------------------- reading
def _read_record(
    data: bytes, pos: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> tuple[Record, int]:
    """The record at ``pos`` of a records section and the position after it."""
    length, pos = _read_varint(data, pos)
    end = pos + length
    if length < 0 or end > len(data):
        raise InvalidRecordError(
            f"record length {length} at byte {pos} overruns the records section ({len(data)} bytes)"
        )
    pos += 1  # attributes: unused
    timestamp_delta, pos = _read_varlong(data, pos)
    offset_delta, pos = _read_varint(data, pos)
    key_length, pos = _read_varint(data, pos)
    key: bytes | None = None
    if key_length >= 0:
        key, pos = data[pos : pos + key_length], pos + key_length
        if pos > end:
            raise InvalidRecordError(f"record key of {key_length} bytes overruns the record")
    elif key_length != -1:
        raise InvalidRecordError(f"invalid key length {key_length}")
    value_length, pos = _read_varint(data, pos)
    value: bytes | None = None
    if value_length >= 0:
        value, pos = data[pos : pos + value_length], pos + value_length
    elif value_length != -1:
        raise InvalidRecordError(f"invalid value length {value_length}")
    if pos > end:
        raise InvalidRecordError(f"record value of {value_length} bytes overruns the record")
    count, pos = _read_varint(data, pos)
    if count < 0 or count > (end - pos) // 2:  # a header takes at least two bytes
        raise InvalidRecordError(f"invalid number of record headers {count}")
    headers: Headers = ()
    if count:
        items: list[tuple[str, bytes | None]] = []
        for _ in range(count):
            hk_length, pos = _read_varint(data, pos)
            if hk_length < 0:
                raise InvalidRecordError(f"invalid header key length {hk_length}")
            hkey = data[pos : pos + hk_length].decode("utf-8", "surrogateescape")
            pos += hk_length
            hv_length, pos = _read_varint(data, pos)
            hvalue: bytes | None = None
            if hv_length >= 0:
                hvalue, pos = data[pos : pos + hv_length], pos + hv_length
            elif hv_length != -1:
                raise InvalidRecordError(f"invalid header value length {hv_length}")
            if pos > end:
                raise InvalidRecordError("record header overruns the record length")
            items.append((hkey, hvalue))
        headers = tuple(items)
    if pos != end:
        raise InvalidRecordError(
            f"record fields take {pos - end + length} bytes but its length says {length}"
        )
    timestamp = base_timestamp + timestamp_delta if log_append_time is None else log_append_time
    return Record(base_offset + offset_delta, timestamp, key, value, headers), pos


def records_section(buf: Buffer, pos: int, header: rb.BatchHeader) -> bytes:
    """The records of the batch at ``pos`` as uncompressed bytes (decompressing if needed)."""
    raw = memoryview(buf)[pos + rb.HEADER_SIZE : pos + header.size]
    if header.compression == CompressionType.NONE:
        return bytes(raw)
    return decompress(header.compression, raw)


def iter_records(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> Iterator[Record]:
    """Yield the records of the batch at ``pos``, checking the invariants of the module docstring.

    ``verify_crc=False`` skips only the CRC (for batches already verified, e.g. by the validator).
    """
    if verify_crc:
        header = rb.parse_and_verify(buf, pos)
    else:
        header = rb.parse_header(buf, pos)
        if len(buf) - pos < header.size:
            raise CorruptRecordError(
                f"record batch truncated: {len(buf) - pos} of {header.size} bytes present"
            )
    data = records_section(buf, pos, header)
    log_append_time = header.max_timestamp if header.timestamp_type == 1 else None
    expected, end, count, p = header.records_count, len(data), 0, 0
    while p < end:
        if count == expected:
            raise InvalidRecordError(
                f"{end - p} bytes remain after the {expected} records the batch at base offset "
                f"{header.base_offset} declares"
            )
        try:
            record, p = _read_record(
                data, p, header.base_offset, header.base_timestamp, log_append_time
            )
        except IndexError:
            raise InvalidRecordError(
                f"record {count} of the batch at base offset {header.base_offset} is truncated"
            ) from None
        count += 1
        yield record
    if count != expected:
        raise InvalidRecordError(
            f"batch at base offset {header.base_offset} declares {expected} records "
            f"but holds {count}"
        )


# ---------------------------------------------------------------------------- control records
def parse_control_key(key: bytes | None) -> tuple[int, int]:
    """``(version, type)`` of a control record's key; compare ``type`` with ControlRecordType."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError("control record key must hold version and type (4 bytes)")
    version, type_ = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    return int(version), int(type_)


def control_record_key(type_: ControlRecordType, version: int = 0) -> bytes:
    return _CONTROL_KEY.pack(version, type_)


def end_transaction_marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    """Value of an ABORT/COMMIT control record (Kafka's ``EndTransactionMarker``)."""
    return _END_TXN_MARKER.pack(version, coordinator_epoch)


def parse_end_transaction_marker(value: bytes | None) -> tuple[int, int]:
    """``(version, coordinator_epoch)`` of an ABORT/COMMIT control record's value."""
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise InvalidRecordError("end transaction marker must hold version and coordinator epoch")
    version, epoch = _END_TXN_MARKER.unpack_from(value)
    return int(version), int(epoch)


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """An ABORT/COMMIT control record (Kafka's ``EndTransactionMarker``)."""

    control_type: int  # ControlRecordType.ABORT or COMMIT
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == ControlRecordType.ABORT


def read_end_transaction_marker(buf: Buffer, pos: int = 0) -> EndTransactionMarker | None:
    """The transaction marker of the control batch at ``pos``; None if the batch is empty or its
    first record is another control type (LEADER_CHANGE...). Raises ``InvalidRecordError``."""
    for record in iter_records(buf, pos, verify_crc=False):
        _, type_ = parse_control_key(record.key)
        if type_ not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        _, coordinator_epoch = parse_end_transaction_marker(record.value)
        return EndTransactionMarker(type_, coordinator_epoch)
    return None


def build_end_transaction_marker(
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    timestamp: int,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = rb.NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """The control batch a coordinator writes to end a transaction (Kafka's
    ``MemoryRecords.withEndTransactionMarker``): transactional + control, no sequence, one record
    with key (version 0, COMMIT/ABORT) and value (version 0, ``coordinator_epoch``). Pure."""
    type_ = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    spec = RecordSpec(key=control_record_key(type_),
                      value=end_transaction_marker_value(coordinator_epoch), timestamp=timestamp)
    return build_batch([spec], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=rb.NO_SEQUENCE,
                       partition_leader_epoch=partition_leader_epoch, is_transactional=True,
                       is_control=True)


# ---------------------------------------------------------------------------------- building
def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(0x01)  # zigzag(-1)
    else:
        _write_varint(out, len(data))
        out += data


def build_batch(
    records: Sequence[RecordSpec | Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = rb.NO_PRODUCER_ID,
    producer_epoch: int = rb.NO_PRODUCER_EPOCH,
    base_sequence: int = rb.NO_SEQUENCE,
    partition_leader_epoch: int = rb.NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = 0,
    base_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode one v2 batch, CRC included.

    Offset deltas: a ``RecordSpec``'s ``offset_delta`` (None = previous + 1), a ``Record``'s
    ``offset - base_offset``; they must strictly increase from 0 up. ``last_offset_delta``
    defaults to the last record's and may be larger (a cleaned batch keeps its original
    range); an empty batch (the cleaner's kept producer state) needs it. ``base_timestamp``
    defaults to the first record's timestamp (``delete_horizon_ms`` replaces it and sets
    attribute bit 6, KIP-534). ``maxTimestamp`` is the largest record timestamp.
    Raises ``ValueError`` for arguments no valid batch can hold.
    """
    if delete_horizon_ms is not None:
        if base_timestamp is not None:
            raise ValueError("base_timestamp and delete_horizon_ms both set the baseTimestamp")
        base_timestamp = delete_horizon_ms
    if base_timestamp is None:
        base_timestamp = records[0].timestamp if records else rb.NO_TIMESTAMP
    if timestamp_type not in (0, 1):
        raise ValueError(f"timestamp_type is 0 (CreateTime) or 1 (LogAppendTime): {timestamp_type}")
    codec = CompressionType.for_id(compression)

    body = bytearray()
    rec = bytearray()
    previous_delta = -1
    max_timestamp = max(r.timestamp for r in records) if records else base_timestamp
    for r in records:
        if isinstance(r, Record):
            delta = r.offset - base_offset
        else:
            delta = previous_delta + 1 if r.offset_delta is None else r.offset_delta
        if delta <= previous_delta:
            raise ValueError(f"offset delta {delta} does not follow {previous_delta}")
        previous_delta = delta
        rec.clear()
        rec.append(0)  # attributes
        _write_varlong(rec, r.timestamp - base_timestamp)
        _write_varint(rec, delta)
        _write_bytes(rec, r.key)
        _write_bytes(rec, r.value)
        _write_varint(rec, len(r.headers))
        for hkey, hvalue in r.headers:
            _write_bytes(rec, hkey.encode("utf-8", "surrogateescape"))
            _write_bytes(rec, hvalue)
        _write_varint(body, len(rec))
        body += rec

    if last_offset_delta is None:
        if not records:
            raise ValueError("an empty batch needs an explicit last_offset_delta")
        last_offset_delta = previous_delta
    elif last_offset_delta < previous_delta or last_offset_delta > _INT32_MAX:
        raise ValueError(f"last_offset_delta {last_offset_delta} is below the last record's")
    payload = compress(codec, body) if codec != CompressionType.NONE else body

    attributes = (
        codec
        | (rb.TIMESTAMP_TYPE_MASK if timestamp_type == 1 else 0)
        | (rb.TRANSACTIONAL_FLAG_MASK if is_transactional else 0)
        | (rb.CONTROL_FLAG_MASK if is_control else 0)
        | (rb.DELETE_HORIZON_FLAG_MASK if delete_horizon_ms is not None else 0)
    )
    out = bytearray(rb.HEADER_SIZE)
    _BATCH_HEADER.pack_into(
        out, 0, base_offset, rb.HEADER_SIZE - rb.LOG_OVERHEAD + len(payload),
        partition_leader_epoch, rb.MAGIC_V2, 0, attributes, last_offset_delta, base_timestamp,
        max_timestamp, producer_id, producer_epoch, base_sequence, len(records),
    )  # fmt: skip
    out += payload
    _CRC.pack_into(out, rb.CRC_OFFSET, rb.compute_crc(out, 0, len(out)))
    return bytes(out)
