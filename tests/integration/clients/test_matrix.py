"""The real-client compatibility matrix: every client x every feature, against a broker process.

Clients (``drivers.DRIVERS``): confluent-kafka (librdkafka), kafka-python, aiokafka, kafkajs.
Features: topic create/describe/delete; keyed records with headers and explicit timestamps
produced uncompressed and with each codec and read back by assign from earliest; ListOffsets by
timestamp; idempotent produce over several batches per partition.

What "read back intact" means, checked by ``check_round_trip``:

- the producer's delivery reports are sane: one per record, each (partition, offset) once,
  every key on one partition, offsets per partition 0, 1, 2... in production order;
- the consumer reads every delivered record exactly once, nothing else, in offset order per
  partition, and finds each at the (partition, offset) its delivery report named: so records
  sit on the partition the client's own partitioner chose;
- key, value, headers and timestamp equal what was produced.

A client that cannot use a codec fails here with its own error (no skip).
One broker serves the module: every test works on topics of its own.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence

import pytest

from strata.storage.compression import CompressionType

from ..broker_process import BrokerProcess
from .drivers import DRIVERS
from .model import (
    CODECS,
    ClientDriver,
    ConsumedRecord,
    Delivery,
    OutRecord,
    ProduceOptions,
    expected_end_offsets,
    keyed_records,
)
from .wire import stored_batches

pytestmark = pytest.mark.integration

PARTITIONS = 3


@pytest.fixture(scope="module", params=list(DRIVERS))
def client(request: pytest.FixtureRequest, broker: BrokerProcess) -> Iterator[ClientDriver]:
    yield DRIVERS[request.param](broker.bootstrap)


def new_topic(client: ClientDriver, label: str, partitions: int = PARTITIONS) -> str:
    """Create a fresh topic through ``client`` and check its metadata shows it."""
    topic = f"matrix.{client.name}.{label}.{uuid.uuid4().hex[:8]}"
    client.create_topic(topic, partitions)
    assert client.partition_count(topic) == partitions, f"metadata of new topic {topic}"
    return topic


# ------------------------------------------------------------------------------------ checks
def check_deliveries(
    records: Sequence[OutRecord], deliveries: Sequence[Delivery], partitions: int
) -> None:
    assert len(deliveries) == len(records), "one delivery report per record"
    assert all(0 <= d.partition < partitions for d in deliveries), deliveries
    duplicates = [pos for pos, n in Counter(deliveries).items() if n > 1]
    assert not duplicates, f"two records reported at the same (partition, offset): {duplicates}"
    partitions_of_key: dict[bytes, set[int]] = defaultdict(set)
    for r, d in zip(records, deliveries, strict=True):
        partitions_of_key[r.key].add(d.partition)
    split = {k: p for k, p in partitions_of_key.items() if len(p) > 1}
    assert not split, f"keys the partitioner put on several partitions: {split}"
    offsets: dict[int, list[int]] = defaultdict(list)
    for d in deliveries:
        offsets[d.partition].append(d.offset)
    for p, seen in offsets.items():
        assert seen == list(range(len(seen))), (
            f"partition {p}: delivered offsets in production order should be 0..{len(seen) - 1}"
        )


def check_round_trip(
    records: Sequence[OutRecord],
    deliveries: Sequence[Delivery],
    consumed: Sequence[ConsumedRecord],
) -> None:
    positions = [(m.partition, m.offset) for m in consumed]
    repeated = [pos for pos, n in Counter(positions).items() if n > 1]
    assert not repeated, f"records read more than once: {repeated[:10]}"
    for p in {m.partition for m in consumed}:
        order = [m.offset for m in consumed if m.partition == p]
        assert order == sorted(order), f"partition {p} read out of order: {order}"
    delivered = {(d.partition, d.offset): r for r, d in zip(records, deliveries, strict=True)}
    missing = sorted(set(delivered) - set(positions))
    extra = sorted(set(positions) - set(delivered))
    assert not missing, f"acknowledged records never read (partition, offset): {missing[:10]}"
    assert not extra, f"read records nobody produced (partition, offset): {extra[:10]}"
    wrong = [
        (pos, expected, got.as_out_record())
        for got in consumed
        if (expected := delivered[pos := (got.partition, got.offset)]) != got.as_out_record()
    ]
    assert not wrong, "records changed on the way (position, produced, read):\n" + "\n".join(
        map(repr, wrong[:5])
    )


def consume_all(client: ClientDriver, topic: str, deliveries: Sequence[Delivery]) -> list[
    ConsumedRecord
]:
    ends = expected_end_offsets(deliveries)
    return client.consume(topic, {p: ends.get(p, 0) for p in range(PARTITIONS)})


# ------------------------------------------------------------------------------------- tests
def test_create_describe_and_delete_topic(client: ClientDriver) -> None:
    topic = new_topic(client, "lifecycle", partitions=4)
    client.delete_topic(topic)
    assert client.partition_count(topic) is None, f"{topic} still listed after delete"


@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume_by_assign(
    broker: BrokerProcess, client: ClientDriver, codec: str
) -> None:
    topic = new_topic(client, codec)
    records = keyed_records(40, tag=codec)
    deliveries = client.produce(topic, records, ProduceOptions(compression=codec))
    check_deliveries(records, deliveries, PARTITIONS)
    check_round_trip(records, deliveries, consume_all(client, topic, deliveries))
    # The client really compressed: the broker keeps batches as sent.
    codecs = {h.compression for h in stored_batches(broker.bootstrap, topic, PARTITIONS)}
    assert codecs == {CompressionType[codec.upper()]}, (
        f"stored batches use codecs {codecs}: the client did not send {codec}"
    )
    client.delete_topic(topic)


def test_offsets_for_times(client: ClientDriver) -> None:
    topic = new_topic(client, "times")
    records = keyed_records(30, tag="times")
    deliveries = client.produce(topic, records)
    check_deliveries(records, deliveries, PARTITIONS)
    # Per partition, (offset, timestamp) in offset order; timestamps are 1 s apart and rising.
    by_partition: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r, d in zip(records, deliveries, strict=True):
        by_partition[d.partition].append((d.offset, r.timestamp))
    for entries in by_partition.values():
        entries.sort()
    queries: dict[str, tuple[dict[int, int], dict[int, int | None]]] = {
        "before the first record": (
            {p: e[0][1] - 1 for p, e in by_partition.items()},
            {p: e[0][0] for p, e in by_partition.items()},
        ),
        "exactly a record's timestamp": (
            {p: e[len(e) // 2][1] for p, e in by_partition.items()},
            {p: e[len(e) // 2][0] for p, e in by_partition.items()},
        ),
        "between two records": (
            {p: e[len(e) // 2][1] - 1 for p, e in by_partition.items() if len(e) > 1},
            {p: e[len(e) // 2][0] for p, e in by_partition.items() if len(e) > 1},
        ),
        "after the last record": (
            {p: e[-1][1] + 1 for p, e in by_partition.items()},
            dict.fromkeys(by_partition),
        ),
    }
    answers = {
        what: client.offsets_for_times(topic, timestamps)
        for what, (timestamps, _) in queries.items()
    }
    wrong = {
        what: (queries[what][1], got) for what, got in answers.items() if got != queries[what][1]
    }
    assert not wrong, f"ListOffsets by timestamp (wanted, got): {wrong}"
    client.delete_topic(topic)


def test_idempotent_produce(broker: BrokerProcess, client: ClientDriver) -> None:
    topic = new_topic(client, "idempotent")
    records = keyed_records(45, tag="idem")
    # Three acknowledged rounds from one producer: several batches per partition, so the
    # broker must accept sequence numbers continuing from the previous batch.
    deliveries = client.produce(topic, records,
                                ProduceOptions(compression="gzip", idempotent=True, rounds=3))
    check_deliveries(records, deliveries, PARTITIONS)
    check_round_trip(records, deliveries, consume_all(client, topic, deliveries))
    # The client really was idempotent (some silently turn it off when they judge the broker
    # too old): every stored batch carries one producer id and, per partition, sequences that
    # continue exactly where the previous batch ended.
    batches = stored_batches(broker.bootstrap, topic, PARTITIONS)
    producers = {(h.producer_id, h.producer_epoch) for h in batches}
    assert len(producers) == 1 and min(producers)[0] >= 0, f"producer ids/epochs {producers}"
    sequences = [(h.base_offset, h.base_sequence, h.records_count) for h in batches]
    assert all(seq == offset for offset, seq, _ in sequences), (
        f"(base offset, base sequence, count) per batch: {sequences}: one producer's sequence "
        "in a partition starts at 0 and advances by the record count, like its offsets"
    )
    client.delete_topic(topic)
