"""Hypothesis on the broker's own decoders: arbitrary and mutated bytes give a value or the
decoder's documented error, never another exception.

==========================  ===================================================================
decoder                     documented outcome for bad bytes
==========================  ===================================================================
follower Fetch v11 reader   ``None`` (the fetcher then lets the generic codec name the fault)
``__consumer_offsets``      ``GroupRecordError`` (``UnknownKey`` for a key version nobody wrote)
cluster image JSON          ``ImageFormatError`` / ``ValueError`` / ``KeyError`` / ``TypeError``
                            per value; ``build_image`` skips such entries and never raises
SASL (PLAIN and SCRAM)      an answer, or ``AuthenticationFailed`` (the session then FAILED)
==========================  ===================================================================

The request codec (``strata.protocol``) has its own in ``tests/unit/protocol``; the record batch
readers of storage in ``tests/unit/storage/test_batch_fuzz.py``. Every run is derandomized with
no example database, so CI and a developer see the same examples.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strata.broker.cluster import image as ci
from strata.broker.group.classic_group import OffsetAndMetadata
from strata.broker.group.metadata_codec import (
    GroupMetadataValue,
    GroupRecordError,
    MemberMetadataValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from strata.broker.network.fetch_response import encode_fetch_response
from strata.broker.network.listeners import ListenerSecurity
from strata.broker.network.security_session import AuthenticationFailed, SaslState, SecuritySession
from strata.broker.replication.partition_results import FetchPartitionResult
from strata.client.fetch_codec import read_fetch_response
from strata.security.credentials import FileCredentialStore
from strata.security.sasl import SecurityProtocol
from strata.security.scram import ScramClient, make_credential

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
EDITS = st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=6)


def edited(raw: bytes, edits: list[tuple[int, int]], cut: int) -> bytes:
    out = bytearray(raw)
    for position, value in edits:
        if out:
            out[position % len(out)] = value
    return bytes(out[: max(0, len(out) - cut)])


# ------------------------------------------------------------------ follower Fetch v11 reader
def _fetch_response_body() -> bytes:
    result = FetchPartitionResult(0, 10, 10, 0)
    response = encode_fetch_response(11, [("t", [(0, result), (1, result)])],
                                     read_committed=False)
    return b"".join(c for c in response.chunks if isinstance(c, bytes))


FETCH_RESPONSE = _fetch_response_body()


def test_the_follower_reader_reads_the_valid_sample() -> None:
    parsed = read_fetch_response(FETCH_RESPONSE, 0)
    assert parsed is not None and [p.partition_index for p in parsed.responses[0].partitions] \
        == [0, 1]


@FUZZ
@given(st.binary(max_size=200))
def test_follower_reader_on_arbitrary_bytes(raw: bytes) -> None:
    read_fetch_response(raw, 0)  # a response or None


@FUZZ
@given(EDITS, st.integers(0, 12))
def test_follower_reader_on_mutated_responses(edits: list[tuple[int, int]], cut: int) -> None:
    read_fetch_response(edited(FETCH_RESPONSE, edits, cut), 0)


# ------------------------------------------------------------------ __consumer_offsets records
GROUP_RECORDS = [
    offset_commit_key("g", "t", 3),
    group_metadata_key("g"),
    offset_commit_value(OffsetAndMetadata(42, 1, "meta", 1_700_000_000_000)),
    offset_commit_value(OffsetAndMetadata(42, -1, "", 1, 2)),
    group_metadata_value(GroupMetadataValue(
        "consumer", 3, "range", "m-1", 1_700_000_000_000,
        (MemberMetadataValue("m-1", None, "c", "/127.0.0.1", 300_000, 10_000, b"sub", b"as"),))),
]


def _decode_group_record(raw: bytes) -> None:
    for decode in (decode_key, decode_offset_commit_value, decode_group_metadata_value):
        with contextlib.suppress(GroupRecordError):
            decode(raw)


@FUZZ
@given(st.binary(max_size=200))
def test_group_record_decoders_on_arbitrary_bytes(raw: bytes) -> None:
    _decode_group_record(raw)


@FUZZ
@given(st.sampled_from(GROUP_RECORDS), EDITS, st.integers(0, 12))
def test_group_record_decoders_on_mutated_records(
    raw: bytes, edits: list[tuple[int, int]], cut: int
) -> None:
    _decode_group_record(edited(raw, edits, cut))


# ------------------------------------------------------------------ cluster image JSON
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(
        ["v", "node_id", "host", "port", "rack", "endpoints", "topic_id", "replicas", "isr",
         "leader", "leader_epoch", "partition_epoch", "adding", "removing", "epoch", "configs",
         "replication_factor", "leader_broker_epoch", "x"]), children, max_size=8),
    max_leaves=20,
)
IMAGE_ERRORS = (ci.ImageFormatError, ValueError, KeyError, TypeError)
VALID_VALUES = {
    ci.broker_key(1): ci.BrokerRegistration(1, "h", 9092).encode(),
    ci.topic_key("t"): ci.TopicRegistration("t", uuid.UUID(int=1), 1).encode(),
    ci.partition_key("t", 0): ci.PartitionRegistration(uuid.UUID(int=1), (1,), (1,), 1).encode(),
    ci.CONTROLLER: ci.ControllerRegistration(1, 1).encode(),
    ci.CONTROLLER_EPOCH: ci.encode_epoch(1),
    ci.broker_configs_key(""): ci.encode_configs({"a": "b"}),
}


def _decode_image_value(key: str, raw: bytes) -> None:
    decoders: list[Any] = [
        lambda: ci.BrokerRegistration.decode(raw, 1),
        lambda: ci.TopicRegistration.decode("t", raw),
        lambda: ci.PartitionRegistration.decode(raw),
        lambda: ci.ControllerRegistration.decode(raw),
        lambda: ci.decode_epoch(raw),
        lambda: ci.decode_configs(raw),
    ]
    for decode in decoders:
        with contextlib.suppress(IMAGE_ERRORS):
            decode()
    image = ci.build_image({key: (raw, 1)}, 1)  # never raises: a bad entry is skipped
    assert image.revision == 1


# Found by the fuzzer below: a JSON value of the wrong type raised AttributeError, which neither
# the decoders documented nor build_image caught, so one such entry in the metadata store failed
# every image rebuild. The decoders now raise ImageFormatError for it.
WRONG_TYPES = [
    (ci.topic_key("t"), b'{"topic_id": true, "replication_factor": 1}'),
    (ci.broker_configs_key(""), b'{"configs": true}'),
]


@pytest.mark.parametrize(("key", "raw"), WRONG_TYPES)
def test_cluster_image_skips_wrongly_typed_values(key: str, raw: bytes) -> None:
    _decode_image_value(key, raw)


@FUZZ
@given(st.sampled_from(sorted(VALID_VALUES)), JSON_VALUES)
def test_cluster_image_on_arbitrary_json(key: str, doc: Any) -> None:
    _decode_image_value(key, json.dumps(doc).encode())


@FUZZ
@given(st.sampled_from(sorted(VALID_VALUES)), EDITS, st.integers(0, 12))
def test_cluster_image_on_mutated_values(key: str, edits: list[tuple[int, int]],
                                         cut: int) -> None:
    _decode_image_value(key, edited(VALID_VALUES[key], edits, cut))


# ------------------------------------------------------------------ SASL tokens
@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> FileCredentialStore:
    store = FileCredentialStore(tmp_path_factory.mktemp("credentials"))
    asyncio.run(store.put("alice", make_credential("SCRAM-SHA-512", "secret",
                                                   iterations=4096)))
    return store


def _sasl(store: FileCredentialStore, mechanism: str, tokens: list[bytes]) -> None:
    session = SecuritySession(ListenerSecurity(
        "SASL", SecurityProtocol.SASL_PLAINTEXT, mechanisms=("PLAIN", "SCRAM-SHA-512"),
        credentials=store))
    assert session.handshake(mechanism) == 0

    async def exchange() -> None:
        for token in tokens:
            try:
                await session.authenticate(token)
            except AuthenticationFailed:
                assert session.state is SaslState.FAILED
                return

    asyncio.run(exchange())


def _scram_tokens() -> list[bytes]:
    client = ScramClient("SCRAM-SHA-512", "alice", "secret")
    first = client.first()
    server_first = f"{first.decode().split('r=', 1)[1]}SERVER,s=c2FsdA==,i=4096".encode()
    return [first, client.final(b"r=" + server_first)]


SCRAM_TOKENS = _scram_tokens()


@settings(FUZZ, max_examples=150)
@given(st.sampled_from(["PLAIN", "SCRAM-SHA-512"]), st.lists(st.binary(max_size=120),
                                                            min_size=1, max_size=3))
def test_sasl_on_arbitrary_tokens(credentials: FileCredentialStore, mechanism: str,
                                  tokens: list[bytes]) -> None:
    _sasl(credentials, mechanism, tokens)


@settings(FUZZ, max_examples=150)
@given(st.sampled_from([0, 1]), EDITS, st.integers(0, 12))
def test_sasl_on_mutated_scram_messages(credentials: FileCredentialStore, which: int,
                                        edits: list[tuple[int, int]], cut: int) -> None:
    tokens = list(SCRAM_TOKENS)
    tokens[which] = edited(tokens[which], edits, cut)
    _sasl(credentials, "SCRAM-SHA-512", tokens)


@settings(FUZZ, max_examples=100)
@given(st.text(max_size=20), st.text(max_size=20), st.text(max_size=20))
def test_sasl_plain_on_arbitrary_fields(credentials: FileCredentialStore, authzid: str,
                                        user: str, password: str) -> None:
    _sasl(credentials, "PLAIN", ["\0".join((authzid, user, password)).encode()])
