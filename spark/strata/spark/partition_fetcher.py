"""Reading one offset range with Kafka Fetch requests on our own connection (executor side).

Owns :func:`read_range_direct`, the fast path of :func:`strata.spark.kafka_io.read_range`:
instead of a librdkafka consumer (which hands Python one ``Message`` object per record), it
asks the partition's leader for raw record batches (Fetch v11: requests encoded by
:mod:`strata.protocol`, responses read by :mod:`strata.client.fetch_codec`, records left in the
receive buffer) and turns each response into one Arrow batch with
:func:`strata.spark.record_columns.decode`. Used for PLAINTEXT, SSL and SASL (PLAIN, SCRAM)
connections (:func:`supports`, :mod:`strata.spark.broker_connection`); anything else (e.g.
GSSAPI) keeps the librdkafka path.

Invariants (the same as the librdkafka path's):

- exactly the records ``from_offset <= offset < until_offset`` the log holds are yielded, in
  offset order; gaps left by compaction or transaction markers are skipped silently;
- Fetch asks with the options' ``kafka.isolation.level`` (Spark's default ``read_uncommitted``);
  under ``read_committed`` the broker stops at the last stable offset and the batches of the
  ``aborted_transactions`` it names are dropped; control batches are never yielded;
- an offset below the partition's log start is data loss: :class:`DataLossError` with
  ``failOnDataLoss=true``, otherwise a warning and reading goes on at the log start;
- without progress for ``kafkaConsumer.pollTimeoutMs`` (leader unknown, records expected but
  not there) it raises :class:`TimeoutError` naming the offsets;
- leadership errors and lost connections re-read the metadata and retry; a refused login or
  an untrusted certificate raises at once (``AuthenticationError``); the socket is closed on
  every exit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any, Final

import pyarrow as pa

from strata.client.fetch_codec import PartitionData, decode_fetch_response
from strata.client.security import ClientSecurity
from strata.protocol import ApiKey, ErrorCode
from strata.spark import broker_connection
from strata.spark.broker_connection import BrokerConnection
from strata.spark.offsets import DataLossError, OffsetRange
from strata.spark.options import SourceOptions
from strata.spark.record_columns import decode

log = logging.getLogger(__name__)

FETCH_VERSION: Final = 11
METADATA_VERSION: Final = 8
LIST_OFFSETS_VERSION: Final = 4
EARLIEST_TIMESTAMP: Final = -2
# One fetch: at most this many bytes (also the most one yielded Arrow batch holds), unless
# kafka.max.partition.fetch.bytes says otherwise (Kafka returns a larger first batch whole).
FETCH_MAX_BYTES: Final = 8 * 1024 * 1024
FETCH_MAX_WAIT_MS: Final = 100
_RETRY_S: Final = 0.1
_LEADERSHIP_ERRORS: Final = frozenset({
    ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
    ErrorCode.unknown_topic_or_partition, ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch, ErrorCode.replica_not_available,
    ErrorCode.kafka_storage_error, ErrorCode.not_coordinator,
})


def supports(options: SourceOptions) -> bool:
    """Whether the direct path can log in as the options say: PLAINTEXT, SSL (mutual TLS
    too), or SASL PLAIN/SCRAM over either (:mod:`strata.spark.broker_connection`)."""
    return broker_connection.supported(options.client_config)


class RetriableError(Exception):
    """The leader moved or is not known yet: re-read the metadata and try again."""


def _bootstrap_addresses(options: SourceOptions) -> list[tuple[str, int]]:
    result = []
    for item in options.client_config["bootstrap.servers"].split(","):
        host, _, port = item.strip().rpartition(":")
        result.append((host.strip("[]") or "127.0.0.1", int(port)))
    return result


def _leader_address(options: SourceOptions, topic: str, partition: int,
                    client_id: str, security: ClientSecurity | None) -> tuple[str, int]:
    """Ask each bootstrap server in turn for the partition's leader."""
    failures = []
    for host, port in _bootstrap_addresses(options):
        try:
            connection = BrokerConnection(host, port, client_id, security)
        except OSError as exc:
            failures.append(f"{host}:{port}: {exc}")
            continue
        try:
            metadata = connection.request(ApiKey.METADATA, METADATA_VERSION, {
                "topics": [{"name": topic}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False})
        finally:
            connection.close()
        brokers = {b.node_id: (b.host, int(b.port)) for b in metadata.brokers}
        for answer in metadata.topics:
            for p in answer.partitions if answer.name == topic else ():
                if p.partition_index == partition and p.error_code == ErrorCode.none \
                        and p.leader_id in brokers:
                    return brokers[p.leader_id]
        raise RetriableError(f"{topic}-{partition}: no leader in the metadata yet")
    raise RetriableError(f"no bootstrap server answered: {'; '.join(failures)}")


class _PartitionReader:
    def __init__(self, options: SourceOptions, offset_range: OffsetRange) -> None:
        self.options = options
        self.range = offset_range
        self.client_id = str(options.client_config.get("client.id", "strata-spark"))
        self.read_committed = options.read_committed
        self.max_bytes = int(options.client_config.get("max.partition.fetch.bytes",
                                                       FETCH_MAX_BYTES))
        self.security = broker_connection.security_of(options.client_config)
        self.connection: BrokerConnection | None = None

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def _connected(self) -> BrokerConnection:
        if self.connection is None:
            host, port = _leader_address(self.options, self.range.topic, self.range.partition,
                                         self.client_id, self.security)
            self.connection = BrokerConnection(host, port, self.client_id, self.security)
        return self.connection

    def _partition_request(self, api_key: int, version: int,
                           fields: dict[str, Any]) -> Any:
        try:
            connection = self._connected()
            if api_key == ApiKey.FETCH:
                response = decode_fetch_response(connection.request_raw(api_key, version, fields))
                if response.error_code in _LEADERSHIP_ERRORS:
                    raise RetriableError(f"answered {response.error_code.name}")
                answers = [a for topic in response.responses for a in topic.partitions]
            else:
                answers = [a for topic in connection.request(api_key, version, fields).topics
                           for a in topic.partitions]
        except (OSError, ConnectionError) as exc:
            self.close()
            raise RetriableError(f"{type(exc).__name__}: {exc}") from exc
        for answer in answers:
            if answer.partition_index == self.range.partition:
                if answer.error_code in _LEADERSHIP_ERRORS:
                    self.close()
                    raise RetriableError(f"answered {ErrorCode(answer.error_code).name}")
                return answer
        raise RetriableError("the response does not name the partition")

    def fetch(self, offset: int) -> PartitionData:
        """The partition's answer; its records are valid until the next request."""
        r = self.range
        answer: PartitionData = self._partition_request(ApiKey.FETCH, FETCH_VERSION, {
            "replica_id": -1, "max_wait_ms": FETCH_MAX_WAIT_MS, "min_bytes": 1,
            "max_bytes": self.max_bytes, "isolation_level": int(self.read_committed),
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": r.topic, "partitions": [{
                "partition": r.partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "log_start_offset": -1, "partition_max_bytes": self.max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        return answer

    def log_start(self) -> int:
        r = self.range
        answer = self._partition_request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": r.topic, "partitions": [
                {"partition_index": r.partition, "current_leader_epoch": -1,
                 "timestamp": EARLIEST_TIMESTAMP}]}]})
        if answer.error_code != ErrorCode.none:
            raise RuntimeError(f"{r.topic}-{r.partition}: ListOffsets answered "
                               f"{ErrorCode(answer.error_code).name}")
        return int(answer.offset)


def _lost(options: SourceOptions, offset_range: OffsetRange, expected: int, low: int) -> int:
    """Offsets ``expected..low-1`` are gone: raise, or warn and go on at ``low``."""
    r = offset_range
    message = (f"{r.topic}-{r.partition}: offsets {expected}..{min(low, r.until_offset) - 1} "
               f"were removed from the log (log start offset is {low})")
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}. Set failOnDataLoss=false to skip lost offsets.")
    log.warning("%s; skipping them (failOnDataLoss=false)", message)
    return low


def read_range_direct(options: SourceOptions,
                      offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``offset_range`` as Arrow batches, one per Fetch response."""
    r = offset_range
    reader = _PartitionReader(options, r)
    timeout_s = options.poll_timeout_ms / 1000
    deadline = time.monotonic() + timeout_s
    position = r.from_offset
    last_problem = "no answer yet"
    try:
        while position < r.until_offset:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{r.topic}-{r.partition}: no record for {timeout_s:.0f}s while offsets "
                    f"{position}..{r.until_offset - 1} were expected "
                    f"(kafkaConsumer.pollTimeoutMs); last problem: {last_problem}")
            try:
                answer = reader.fetch(position)
                if answer.error_code == ErrorCode.offset_out_of_range:
                    low = reader.log_start()
                    if position >= low:
                        raise RuntimeError(f"{r.topic}-{r.partition}: offset {position} is out "
                                           f"of range (log start {low})")
                    position = _lost(options, r, position, low)
                    deadline = time.monotonic() + timeout_s
                    continue
            except RetriableError as exc:
                last_problem = str(exc)
                time.sleep(_RETRY_S)
                continue
            if answer.error_code != ErrorCode.none:
                raise RuntimeError(f"{r.topic}-{r.partition}: Fetch at offset {position} "
                                   f"answered {ErrorCode(answer.error_code).name}")
            if 0 <= position < answer.log_start_offset:
                position = _lost(options, r, position, int(answer.log_start_offset))
            aborted = (answer.aborted_transactions or ()) if reader.read_committed else None
            records = answer.records if answer.records is not None else memoryview(b"")
            decoded = decode(records, r.topic, r.partition, position,
                             r.until_offset, include_headers=options.include_headers,
                             aborted=aborted)
            if decoded.batch is not None:
                yield decoded.batch
            if decoded.next_offset > position:
                position = decoded.next_offset
                deadline = time.monotonic() + timeout_s
            else:
                last_problem = (f"nothing past offset {position} (high watermark "
                                f"{answer.high_watermark}, last stable offset "
                                f"{answer.last_stable_offset})")
    finally:
        reader.close()
