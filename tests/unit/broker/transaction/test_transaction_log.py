"""The ``__transaction_state`` record formats: golden bytes, round trips, bad input, partitions.

The golden bytes are written out by hand, field by field, from Kafka's
``TransactionLogKey.json`` (coordinator record type 0, version 0) and ``TransactionLogValue.json``
(v0; v1 flexible with tagged fields 0 PreviousProducerId, 1 NextProducerId, 2
ClientTransactionVersion) -- not produced by the codec.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strata.broker.coordinator_partition import partition_for
from strata.broker.transaction.transaction_log import (
    TransactionLogError,
    TransactionLogValue,
    key_to_bytes,
    read_key,
    read_value,
    transaction_topic_configs,
    value_to_bytes,
)
from strata.broker.transaction.transaction_metadata import TxnTransitMetadata
from strata.broker.transaction.transaction_state import TransactionState
from strata.broker.transaction.transaction_version import TransactionVersion

T_UPDATE, T_START = 1_700_000_000_123, 1_700_000_000_000

ONGOING = TxnTransitMetadata(
    producer_id=1000, prev_producer_id=999, next_producer_id=-1, producer_epoch=5,
    last_producer_epoch=4, txn_timeout_ms=60_000, txn_state=TransactionState.ONGOING,
    topic_partitions=frozenset({("orders", 2), ("payments", 1), ("orders", 0)}),
    txn_start_timestamp=T_START, txn_last_update_timestamp=T_UPDATE,
    client_transaction_version=TransactionVersion.TV_2)

KEY = bytes.fromhex("0000" "0005" "74786e2d31")  # type 0, string "txn-1"

ONGOING_V0 = bytes.fromhex(
    "0000"                                  # version 0
    "00000000000003e8"                      # ProducerId 1000
    "0005"                                  # ProducerEpoch 5
    "0000ea60"                              # TransactionTimeoutMs 60000
    "01"                                    # TransactionStatus Ongoing
    "00000002"                              # TransactionPartitions: 2 topics
    "0006" "6f7264657273" "00000002" "00000000" "00000002"   # orders [0, 2]
    "0008" "7061796d656e7473" "00000001" "00000001"          # payments [1]
    "0000018bcfe5687b"                      # TransactionLastUpdateTimestampMs
    "0000018bcfe56800"                      # TransactionStartTimestampMs
)

ONGOING_V1 = bytes.fromhex(
    "0001"                                  # version 1 (flexible)
    "00000000000003e8"                      # ProducerId 1000
    "0005"                                  # ProducerEpoch 5
    "0000ea60"                              # TransactionTimeoutMs 60000
    "01"                                    # TransactionStatus Ongoing
    "03"                                    # compact array: 2 topics
    "07" "6f7264657273" "03" "00000000" "00000002" "00"      # orders [0, 2], no tags
    "09" "7061796d656e7473" "02" "00000001" "00"             # payments [1], no tags
    "0000018bcfe5687b"                      # TransactionLastUpdateTimestampMs
    "0000018bcfe56800"                      # TransactionStartTimestampMs
    "02"                                    # 2 tagged fields (NextProducerId is -1: omitted)
    "00" "08" "00000000000003e7"            # tag 0 PreviousProducerId 999
    "02" "02" "0002"                        # tag 2 ClientTransactionVersion 2
)

EMPTY = TxnTransitMetadata(
    producer_id=7, prev_producer_id=-1, next_producer_id=-1, producer_epoch=0,
    last_producer_epoch=-1, txn_timeout_ms=1000, txn_state=TransactionState.EMPTY,
    topic_partitions=frozenset(), txn_start_timestamp=-1, txn_last_update_timestamp=T_UPDATE,
    client_transaction_version=TransactionVersion.TV_0)

EMPTY_V0 = bytes.fromhex(
    "0000" "0000000000000007" "0000" "000003e8" "00"
    "ffffffff"                              # null partitions (Empty)
    "0000018bcfe5687b" "ffffffffffffffff")

EMPTY_V1 = bytes.fromhex(
    "0001" "0000000000000007" "0000" "000003e8" "00"
    "00"                                    # null compact array
    "0000018bcfe5687b" "ffffffffffffffff"
    "00")                                   # every tagged field at its default


def test_key_is_kafkas_transaction_log_key() -> None:
    assert key_to_bytes("txn-1") == KEY
    assert read_key(KEY) == "txn-1"


def test_key_of_another_coordinator_record_type_is_reported_not_parsed() -> None:
    assert read_key(bytes.fromhex("0003" "0001" "61")) == 3


@pytest.mark.parametrize(("transit", "level", "golden"), [
    (ONGOING, TransactionVersion.TV_0, ONGOING_V0),
    (ONGOING, TransactionVersion.TV_1, ONGOING_V1),
    (ONGOING, TransactionVersion.TV_2, ONGOING_V1),
    (EMPTY, TransactionVersion.TV_0, EMPTY_V0),
    (EMPTY, TransactionVersion.TV_2, EMPTY_V1),
])
def test_value_golden_bytes(transit: TxnTransitMetadata, level: TransactionVersion,
                            golden: bytes) -> None:
    assert value_to_bytes(transit, level) == golden


def test_value_v1_reads_back_every_field() -> None:
    assert read_value(ONGOING_V1) == TransactionLogValue(
        producer_id=1000, producer_epoch=5, transaction_timeout_ms=60_000,
        transaction_state=TransactionState.ONGOING,
        partitions=frozenset({("orders", 0), ("orders", 2), ("payments", 1)}),
        last_update_timestamp_ms=T_UPDATE, start_timestamp_ms=T_START,
        previous_producer_id=999, next_producer_id=-1, client_transaction_version=2)


def test_value_v0_has_no_tagged_fields() -> None:
    value = read_value(ONGOING_V0)
    assert value is not None
    assert (value.previous_producer_id, value.next_producer_id,
            value.client_transaction_version) == (-1, -1, 0)


def test_next_producer_id_is_tag_1() -> None:
    transit = TxnTransitMetadata(
        1000, 1000, 1001, 32767, 32766, 60_000, TransactionState.PREPARE_COMMIT,
        frozenset({("t", 0)}), T_START, T_UPDATE, TransactionVersion.TV_2)
    data = value_to_bytes(transit, TransactionVersion.TV_2)
    assert data.endswith(bytes.fromhex(
        "03" "00" "08" "00000000000003e8" "01" "08" "00000000000003e9" "02" "02" "0002"))
    value = read_value(data)
    assert value is not None and value.next_producer_id == 1001


def test_a_null_value_is_a_tombstone() -> None:
    assert read_value(None) is None


def test_loaded_metadata_has_no_last_epoch_and_no_partitions_when_empty() -> None:
    value = read_value(ONGOING_V1)
    assert value is not None
    md = value.to_metadata("txn-1")
    assert (md.producer_id, md.prev_producer_id, md.producer_epoch, md.last_producer_epoch) == (
        1000, 999, 5, -1)
    assert md.topic_partitions == {("orders", 0), ("orders", 2), ("payments", 1)}
    assert md.client_transaction_version is TransactionVersion.TV_2
    assert md.pending_state is None


def test_unknown_tagged_fields_are_skipped() -> None:
    data = ONGOING_V1[:-(1 + 10 + 4)] + bytes.fromhex(
        "03" "00" "08" "00000000000003e7" "02" "02" "0002" "05" "01" "ff")
    value = read_value(data)
    assert value is not None and value.previous_producer_id == 999


@pytest.mark.parametrize("data", [
    b"",
    b"\x00",
    bytes.fromhex("0002") + ONGOING_V1[2:],          # unknown value version
    bytes.fromhex("ffff") + ONGOING_V1[2:],
    ONGOING_V0[:-1],                                  # truncated
    ONGOING_V0 + b"\x00",                             # trailing bytes
    ONGOING_V1[:-3],
    ONGOING_V0[:20] + b"\x09" + ONGOING_V0[21:],      # unknown state id 9
    EMPTY_V1[:-1] + bytes.fromhex("01" "00" "04" "00000001"),  # PreviousProducerId of 4 bytes
])
def test_bad_values_raise_transaction_log_error(data: bytes) -> None:
    with pytest.raises(TransactionLogError):
        read_value(data)


@pytest.mark.parametrize("data", [b"\x00", bytes.fromhex("0000" "0005" "74786e"),
                                  bytes.fromhex("0000" "0001" "61" "00"),
                                  bytes.fromhex("0000" "0002" "c328")])
def test_bad_keys_raise_transaction_log_error(data: bytes) -> None:
    with pytest.raises(TransactionLogError):
        read_key(data)


def test_an_empty_transaction_with_partitions_is_refused() -> None:
    bad = TxnTransitMetadata(1, -1, -1, 0, -1, 1000, TransactionState.EMPTY,
                             frozenset({("t", 0)}), -1, 0, TransactionVersion.TV_0)
    with pytest.raises(ValueError, match="Empty"):
        value_to_bytes(bad, TransactionVersion.TV_2)


_ids = st.integers(min_value=-1, max_value=2**63 - 1)
_states = st.sampled_from([s for s in TransactionState if s is not TransactionState.EMPTY])
_partitions = st.frozensets(st.tuples(st.text(min_size=1, max_size=20),
                                      st.integers(min_value=0, max_value=2**31 - 1)),
                            max_size=8)


@given(producer_id=st.integers(min_value=0, max_value=2**63 - 1), prev=_ids, nxt=_ids,
       epoch=st.integers(min_value=0, max_value=32767), state=_states, partitions=_partitions,
       timeout=st.integers(min_value=1, max_value=2**31 - 1),
       stamps=st.tuples(st.integers(min_value=-1, max_value=2**62),
                        st.integers(min_value=-1, max_value=2**62)),
       level=st.sampled_from(list(TransactionVersion)),
       client=st.sampled_from(list(TransactionVersion)))
def test_round_trip(producer_id: int, prev: int, nxt: int, epoch: int, state: TransactionState,
                    partitions: frozenset[tuple[str, int]], timeout: int,
                    stamps: tuple[int, int], level: TransactionVersion,
                    client: TransactionVersion) -> None:
    transit = TxnTransitMetadata(producer_id, prev, nxt, epoch, -1, timeout, state, partitions,
                                 stamps[0], stamps[1], client)
    value = read_value(value_to_bytes(transit, level))
    assert value is not None
    assert (value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
            value.transaction_state, value.partitions, value.start_timestamp_ms,
            value.last_update_timestamp_ms) == (producer_id, epoch, timeout, state, partitions,
                                                stamps[0], stamps[1])
    if level >= TransactionVersion.TV_1:
        assert (value.previous_producer_id, value.next_producer_id,
                value.client_transaction_version) == (prev, nxt, int(client))


@given(st.text(max_size=50))
def test_key_round_trip(transactional_id: str) -> None:
    assert read_key(key_to_bytes(transactional_id)) == transactional_id


# ---------------------------------------------------------------------- partition_for


@pytest.mark.parametrize(("transactional_id", "java_hash_code"), [
    ("hello", 99162322),            # well-known values of Java's String.hashCode
    ("abc", 96354),
    ("", 0),
    ("Aa", 2112), ("BB", 2112),
    ("polygenelubricants", -2**31),  # Integer.MIN_VALUE: Utils.abs gives 0
    ("\U0001f600", 0xD83D * 31 + 0xDE00),  # hashed as its two UTF-16 code units
])
def test_partition_for_is_kafkas_abs_hash_code_modulo(transactional_id: str,
                                                      java_hash_code: int) -> None:
    expected = (0 if java_hash_code == -2**31 else abs(java_hash_code)) % 50
    assert partition_for(transactional_id, 50) == expected


def _java_hash_code(text: str) -> int:
    """An independent statement of Java's rule: sum of UTF-16 units * 31^k, as an int32."""
    units = [int.from_bytes(text.encode("utf-16-be")[i:i + 2], "big")
             for i in range(0, len(text.encode("utf-16-be")), 2)]
    total: int = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@given(st.text(max_size=40), st.integers(min_value=1, max_value=1000))
def test_partition_for_matches_javas_rule(transactional_id: str, partitions: int) -> None:
    h = _java_hash_code(transactional_id)
    assert partition_for(transactional_id, partitions) == (
        (0 if h == -2**31 else abs(h)) % partitions)


def test_partition_for_a_negative_hash_code() -> None:
    assert _java_hash_code("my-transactional-id") < 0
    assert partition_for("my-transactional-id", 50) == 959806496 % 50


def test_partition_for_needs_partitions() -> None:
    with pytest.raises(ValueError):
        partition_for("t", 0)


def test_topic_configs_are_kafkas_enforced_ones() -> None:
    assert transaction_topic_configs(2, 104857600) == {
        "cleanup.policy": "compact", "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false", "min.insync.replicas": "2",
        "segment.bytes": "104857600"}
