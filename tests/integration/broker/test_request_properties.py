"""The protocol property: every well-formed request, of every API and version the broker lists,
gets an answer the client can read, on a connection that keeps serving, with no traceback.

For each (api key, version) that ``build_registry()`` lists (exactly what ApiVersions
advertises: ``test_api_versions_lists_the_registry`` checks the live answer against it),
hypothesis draws request bodies from kio's request class of that version
(``request_strategies``: every field of its Kafka type, values arbitrary) and a random
correlation id and client id, and sends each on a fresh connection to a real broker. Then:

- a response frame arrives, with the request's correlation id, and kio decodes it at that
  version (Produce with ``acks=0``: no frame arrives, as Kafka);
- it holds no UNKNOWN_SERVER_ERROR (the answer of a handler that raised);
- the same connection answers a follow-up ApiVersions (its correlation id proves no stray
  frame came in between);
- the broker's log gained no traceback.

Special cases, each covered rather than skipped:

- Produce v0-v2 are listed (KIP-896) but kio has no class for them: the body is kio's v3 body
  without ``transactional_id`` (v3 only added it), the answer is read with kafka-python's v0-v2
  response classes, as ``tests/unit/broker/test_produce_removed_versions.py`` does.
- SaslHandshake / SaslAuthenticate: on the PLAINTEXT listener like every API (ILLEGAL_SASL_STATE,
  the connection kept), and on a SASL_PLAINTEXT listener as conversations
  (``test_sasl_conversation_property``): drawn mechanism, drawn tokens (a valid PLAIN or SCRAM
  login among them); each step is answered and decodes; a failed step may close the connection
  (Kafka's rule), a login that succeeded serves the next request, and a fresh connection always
  logs in.
- JoinGroup answered MEMBER_ID_REQUIRED (v4+, KIP-394) is sent again with the member id given,
  as clients do, so drawn members also join.
- AlterClientQuotas: whatever it set is removed after each example, so a drawn
  ``request_percentage`` of 1e-300 does not throttle the rest of the run.

The broker is configured so that legitimately parked requests end fast: group session timeouts
between 10 ms and 1 s, ``max_wait`` and ``rebalance_timeout`` drawn at most 300 ms.

Reproducible: hypothesis is derandomized (no example database), so ``make test`` sends the
same requests every run. ``STRATA_FUZZ_EXAMPLES`` (default ``DEFAULT_EXAMPLES``) sets the
examples per (api key, version) and ``STRATA_FUZZ_SEED`` draws other ones, for long local
runs, e.g. ``STRATA_FUZZ_EXAMPLES=1000 STRATA_FUZZ_SEED=7``. A failure prints the request
hypothesis reduced it to. Bounded: about a minute on 2 busy cores with the defaults.

Defects found in code another change owns are listed in ``KNOWN_DEFECTS`` and marked
``xfail(strict=True)``; the others were fixed, each with a regression test in
``tests/unit/broker/test_request_property_findings.py``.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import socket
import struct
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from strata.broker.handlers import build_registry
from strata.protocol.api_keys import ApiKey
from strata.protocol.codec import decode_response, encode_request
from strata.protocol.error_codes import ErrorCode
from strata.protocol.header import RequestHeader, encode_request_header
from strata.protocol.messages import (
    UnknownMessageVersion,
    build_request,
    encode_body,
    request_type,
)
from strata.security.scram import ScramClient, ScramError
from strata.storage.records import RecordSpec, build_batch

from ..broker_process import GROUPS_CONFIG, BrokerProcess, create_user, free_port, serving
from ..raw_socket import read_frame
from .request_strategies import (
    MAX_SESSION_TIMEOUT_MS,
    MIN_SESSION_TIMEOUT_MS,
    World,
    request_strategy,
    strings,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.producer import ProduceResponse


DEFAULT_EXAMPLES: Final = 25
EXAMPLES: Final = int(os.environ.get("STRATA_FUZZ_EXAMPLES", str(DEFAULT_EXAMPLES)))
# Unset: derandomized (the same examples every run); a number: other examples, reproducibly.
SEED: Final = os.environ.get("STRATA_FUZZ_SEED")
# Per test (one api key and version): a Fetch example may wait MAX_WAIT_MS, a JoinGroup a second.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(max(300, 2 * EXAMPLES))]
ANSWER_TIMEOUT_S: Final = 10.0
TOPICS: Final = ("fuzz", "fuzz-compact")
GROUP: Final = "fuzz-group"
SASL_USER, SASL_PASSWORD = "sasl-fuzz", "sasl-fuzz-secret"  # not in the strategies' words
MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
LISTED: Final = build_registry().version_ranges()
PAIRS: Final = [(key, version) for key, served in sorted(LISTED.items())
                for version in served.versions()]
# Listed, refused on the wire, and without a kio class (KIP-896): see the module docstring.
REMOVED_PRODUCE: Final = frozenset((ApiKey.PRODUCE, v) for v in range(3))

# Defects found by this test in files another change owns; each xfail is strict, so it fails
# the day the defect is fixed and the mark must go.
KNOWN_DEFECTS: Final[dict[tuple[int, int], str]] = {}

PROPERTY = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=SEED is None, database=None,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    suppress_health_check=list(HealthCheck))


def reproducible(test: Any) -> Any:
    """``PROPERTY``, seeded by ``STRATA_FUZZ_SEED`` when it is set."""
    return PROPERTY(test) if SEED is None else seed(int(SEED))(PROPERTY(test))


@dataclasses.dataclass
class Target:
    """The broker under test, what it holds, and how far its log has been checked."""

    broker: BrokerProcess
    sasl_port: int
    world: World
    log_checked: int = 0
    # (api key name and version, outcome) -> examples, printed when the module ends
    outcomes: collections.Counter[tuple[str, str]] = dataclasses.field(
        default_factory=collections.Counter)

    def summary(self) -> str:
        by_outcome: collections.Counter[str] = collections.Counter()
        clean: set[str] = set()
        for (pair, outcome), count in self.outcomes.items():
            by_outcome[outcome] += count
            if outcome != "answered with errors":
                clean.add(pair)
        never = sorted({pair for pair, _ in self.outcomes} - clean)
        return (f"{sum(by_outcome.values())} requests: {dict(by_outcome)}; never answered "
                f"without an error ({len(never)}): {', '.join(never)}")

    def new_log(self) -> str:
        """The broker's log written since the last call."""
        with self.broker.log_path.open("rb") as log:
            log.seek(self.log_checked)
            data = log.read()
        self.log_checked += len(data)
        return data.decode("utf-8", errors="replace")


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=ANSWER_TIMEOUT_S)


def roundtrip(sock: socket.socket, api_key: int, version: int, fields: Any,
              correlation_id: int = 1, client_id: str | None = "strata-properties") -> Any:
    """Send one request (a kio object or version-neutral fields) and decode its answer."""
    body = fields if hasattr(fields, "__api_key__") else build_request(api_key, version, fields)
    sock.sendall(encode_request(RequestHeader(api_key, version, correlation_id, client_id), body))
    got, answer = decode_response(read_frame(sock), api_key, version)
    assert got == correlation_id, f"correlation id {got}, sent {correlation_id}"
    return answer


def api_versions_answered(sock: socket.socket, correlation_id: int) -> None:
    answer = roundtrip(sock, ApiKey.API_VERSIONS, 3, {
        "client_software_name": "strata-properties", "client_software_version": "1"},
        correlation_id)
    assert answer.error_code == ErrorCode.none


def error_codes(value: Any) -> Iterator[int]:
    """Every ``error_code`` in a decoded response, however deep."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if field.name == "error_code":
                yield int(item)
            else:
                yield from error_codes(item)
    elif isinstance(value, tuple):
        for item in value:
            yield from error_codes(item)


# ------------------------------------------------------------------------------ the broker
def prepare(broker: BrokerProcess) -> World:
    """Topics with records, a group with committed offsets; the world the strategies draw from."""
    with connect(broker.port) as sock:
        created = roundtrip(sock, ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": name, "num_partitions": 3 if name == "fuzz" else 1,
                        "replication_factor": 1, "assignments": [],
                        "configs": [{"name": "cleanup.policy",
                                     "value": "compact" if "compact" in name else "delete"}]}
                       for name in TOPICS],
            "timeout_ms": 10_000, "validate_only": False})
        assert [t.error_code for t in created.topics] == [ErrorCode.none] * len(TOPICS)
        metadata = roundtrip(sock, ApiKey.METADATA, 12, {
            "topics": [{"name": name, "topic_id": uuid.UUID(int=0)} for name in TOPICS],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        topic_ids = [t.topic_id for t in metadata.topics]
        produced = roundtrip(sock, ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": name, "partition_data": [{"index": 0, "records": build_batch(
                [RecordSpec(key=b"k", value=b"v", timestamp=1_700_000_000_000)])}]}
                for name in TOPICS]})
        assert {p.error_code for t in produced.responses for p in t.partition_responses} == {0}
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while True:  # the first FindCoordinator creates __consumer_offsets
            found = roundtrip(sock, ApiKey.FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
            if found.error_code == ErrorCode.none:
                break
            assert time.monotonic() < deadline, f"FindCoordinator: {found!r}"
            time.sleep(0.05)
        while True:  # then waits for its partitions to load
            committed = roundtrip(sock, ApiKey.OFFSET_COMMIT, 8, {
                "group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": "fuzz", "partitions": [{
                    "partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                    "committed_metadata": ""}]}]})
            error = committed.topics[0].partitions[0].error_code
            if error == ErrorCode.none:
                break
            assert time.monotonic() < deadline, f"OffsetCommit: {error!r}"
            time.sleep(0.05)
    return World(topics=(*TOPICS, "__consumer_offsets"), topic_ids=topic_ids,
                 groups=(GROUP, "fuzz-empty"))


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """One broker: PLAINTEXT and SASL_PLAINTEXT listeners, ACLs on (ANONYMOUS a super user, so
    the ACL APIs store and match real bindings), short group timeouts, a SCRAM user."""
    workdir = tmp_path_factory.mktemp("property-broker")
    broker = BrokerProcess(workdir, {
        **GROUPS_CONFIG, "num.partitions": "1",
        "group.min.session.timeout.ms": str(MIN_SESSION_TIMEOUT_MS),
        "group.max.session.timeout.ms": str(MAX_SESSION_TIMEOUT_MS),
        "authorizer.class.name": "strata.acl", "super.users": f"User:ANONYMOUS;User:{SASL_USER}",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "connection.failed.authentication.delay.ms": "0",
        "quota.window.num": "2"})
    sasl_port = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    broker.config.update({"listeners": listeners, "advertised.listeners": listeners})
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        create_user(SASL_USER, SASL_PASSWORD, "--mechanism", mechanism,
                    "--log-dir", str(broker.data_dir))
    with serving(broker):
        found = Target(broker, sasl_port, prepare(broker))
        yield found
        print(found.summary())
        assert "Traceback" not in found.new_log(), broker.log_tail()


def assert_no_traceback(target: Target, after: str) -> None:
    assert target.broker.is_running(), f"the broker died after {after}\n{target.broker.log_tail()}"
    log = target.new_log()
    assert "Traceback" not in log, f"traceback in the broker log after {after}:\n{log[-6000:]}"


def remove_client_quotas(port: int) -> None:
    """Remove every client quota (what a drawn AlterClientQuotas may have set)."""
    with connect(port) as sock:
        described = roundtrip(sock, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {
            "components": [], "strict": False})
        assert described.error_code == ErrorCode.none, described
        entries = [{"entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                               for e in entry.entity],
                    "ops": [{"key": v.key, "value": 0.0, "remove": True} for v in entry.values]}
                   for entry in described.entries or ()]
        if entries:
            altered = roundtrip(sock, ApiKey.ALTER_CLIENT_QUOTAS, 1, {
                "entries": entries, "validate_only": False})
            assert set(error_codes(altered)) == {ErrorCode.none}, altered


# ------------------------------------------------------------------------------ the property
def exchange(target: Target, api_key: int, version: int, request: Any, correlation_id: int,
             client_id: str | None) -> Any:
    """Send ``request``; check the answer, the follow-up and the log. Returns the decoded
    answer (None for Produce with ``acks=0``)."""
    header = RequestHeader(api_key, version, correlation_id, client_id)
    sent = f"{ApiKey(api_key).name} v{version} {header} {request!r}"[:4000]
    with connect(target.broker.port) as sock:
        sock.sendall(encode_request(header, request))
        answer = None
        if getattr(request, "acks", None) != 0 or api_key != ApiKey.PRODUCE:
            try:
                frame = read_frame(sock)
            except (ConnectionError, TimeoutError) as exc:
                raise AssertionError(f"no answer ({exc!r}) to {sent}\n"
                                     f"{target.broker.log_tail()}") from exc
            got, answer = decode_response(frame, api_key, version)
            assert got == correlation_id, f"correlation id {got} answering {sent}"
            codes = set(error_codes(answer))
            assert ErrorCode.unknown_server_error not in codes, (
                f"UNKNOWN_SERVER_ERROR answering {sent}: {answer!r}"[:6000])
            outcome = "answered, no error" if codes <= {ErrorCode.none} else "answered with errors"
        else:
            outcome = "acks=0: no answer"
        target.outcomes[pair_id((api_key, version)), outcome] += 1
        follow_up = (correlation_id + 1) & 0x7FFFFFFF
        try:
            api_versions_answered(sock, follow_up)
        except (ConnectionError, TimeoutError) as exc:
            raise AssertionError(f"the connection stopped serving after {sent}: {exc!r}\n"
                                 f"{target.broker.log_tail()}") from exc
    assert_no_traceback(target, sent)
    return answer


def removed_produce_exchange(target: Target, version: int, request: Any,
                             correlation_id: int) -> None:
    """Produce v0-v2 (see the module docstring): v3's body without ``transactional_id``."""
    v3_body = encode_body(request)
    assert v3_body[:2] == b"\xff\xff", "the v3 request was drawn with a transactional id"
    frame = encode_request_header(RequestHeader(ApiKey.PRODUCE, version, correlation_id,
                                                "strata-properties"), 1) + v3_body[2:]
    with connect(target.broker.port) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        if request.acks != 0:
            answer = read_frame(sock)
            response: Any = ProduceResponse.decode(
                struct.pack(">i", len(answer)) + answer, version=version, header=True,
                framed=True)
            assert struct.unpack_from(">i", answer)[0] == correlation_id
            codes = {p.error_code for t in response.responses for p in t.partition_responses}
            assert codes <= {ErrorCode.unsupported_version}, response
        api_versions_answered(sock, (correlation_id + 1) & 0x7FFFFFFF)
    assert_no_traceback(target, f"Produce v{version} {request!r}")


def pair_id(pair: tuple[int, int]) -> str:
    return f"{ApiKey(pair[0]).name}-v{pair[1]}"


def _marked(pair: tuple[int, int]) -> Any:
    reason = KNOWN_DEFECTS.get(pair)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(*pair, id=pair_id(pair), marks=marks)


@pytest.mark.parametrize(("api_key", "version"), [_marked(p) for p in PAIRS])
def test_every_well_formed_request_is_answered(target: Target, api_key: int,
                                               version: int) -> None:
    removed = (api_key, version) in REMOVED_PRODUCE
    kio_version = 3 if removed else version
    strategy = request_strategy(api_key, kio_version, target.world)
    if removed:
        strategy = strategy.filter(lambda r: r.transactional_id is None)

    @reproducible
    @given(request=strategy, correlation_id=st.integers(0, 0x7FFFFFFF),
           client_id=strings(target.world, nullable=True))
    def answered(request: Any, correlation_id: int, client_id: str | None) -> None:
        if removed:
            removed_produce_exchange(target, version, request, correlation_id)
            return
        answer = exchange(target, api_key, version, request, correlation_id, client_id)
        if api_key == ApiKey.ALTER_CLIENT_QUOTAS:
            remove_client_quotas(target.broker.port)
        if api_key == ApiKey.JOIN_GROUP and answer.error_code == ErrorCode.member_id_required:
            # KIP-394: a client joins again with the member id it was given
            exchange(target, api_key, version, dataclasses.replace(request,
                     member_id=answer.member_id), correlation_id, client_id)

    answered()


def test_api_versions_lists_the_registry(target: Target) -> None:
    """The pairs above are what the live broker advertises, and kio has a class for each
    (but the three removed Produce versions)."""
    with connect(target.broker.port) as sock:
        answer = roundtrip(sock, ApiKey.API_VERSIONS, 3, {
            "client_software_name": "strata-properties", "client_software_version": "1"})
    advertised = {(k.api_key, v) for k in answer.api_keys
                  for v in range(k.min_version, k.max_version + 1)}
    assert advertised == set(PAIRS)
    without_class = set()
    for pair in PAIRS:
        try:
            request_type(*pair)
        except UnknownMessageVersion:
            without_class.add(pair)
    assert without_class == REMOVED_PRODUCE


# ------------------------------------------------------------------------------ SASL
@st.composite
def sasl_tokens(draw: st.DrawFn, world: World) -> tuple[str, bytes | None]:
    """(mechanism named in SaslHandshake, first SaslAuthenticate token; None: a real SCRAM
    client's, whose conversation is then completed)."""
    mechanism = draw(st.one_of(st.sampled_from(MECHANISMS), strings(world, nullable=False)))
    assert mechanism is not None
    token = draw(st.one_of(
        st.none(),
        st.just(f"\0{SASL_USER}\0{SASL_PASSWORD}".encode()),
        st.builds(lambda u, p: f"\0{u}\0{p}".encode(), strings(world, False), st.text()),
        st.binary(max_size=64)))
    return mechanism, token


SASL_PAIRS: Final = [(h, a) for h in LISTED[ApiKey.SASL_HANDSHAKE].versions()
                     for a in LISTED[ApiKey.SASL_AUTHENTICATE].versions()]


@pytest.mark.parametrize(("handshake_version", "authenticate_version"), SASL_PAIRS,
                         ids=[f"handshake-v{h}-authenticate-v{a}" for h, a in SASL_PAIRS])
def test_sasl_conversation_property(target: Target, handshake_version: int,
                                    authenticate_version: int) -> None:
    strategy = st.tuples(sasl_tokens(target.world), st.booleans(),
                         st.binary(max_size=32))

    @reproducible
    @given(drawn=strategy)
    def conversation(drawn: tuple[tuple[str, bytes | None], bool, bytes]) -> None:
        (mechanism, token), versions_first, second_token = drawn
        logged_in = sasl_conversation(target, mechanism, token, versions_first, second_token,
                                      handshake_version, authenticate_version)
        assert_no_traceback(target, f"SASL {mechanism} {token!r}")
        if not logged_in:  # a fresh connection still logs in
            assert sasl_conversation(target, "SCRAM-SHA-512", None, True, b"",
                                     handshake_version, authenticate_version)

    conversation()


def sasl_conversation(target: Target, mechanism: str, token: bytes | None, versions_first: bool,
                      second_token: bytes, handshake_version: int,
                      authenticate_version: int) -> bool:
    """One conversation on the SASL listener; True when it logged in (and then Metadata was
    served on that connection)."""
    scram = None
    if token is None:
        scram = ScramClient(mechanism if mechanism.startswith("SCRAM-") else "SCRAM-SHA-512",
                            SASL_USER, SASL_PASSWORD)
        token = scram.first()
    with connect(target.sasl_port) as sock:
        if versions_first:
            api_versions_answered(sock, 1)
        handshake = roundtrip(sock, ApiKey.SASL_HANDSHAKE, handshake_version,
                              {"mechanism": mechanism}, 2)
        if handshake.error_code != ErrorCode.none:
            assert handshake.error_code == ErrorCode.unsupported_sasl_mechanism, handshake
            return False
        rounds = [token, second_token]
        for index, auth_bytes in enumerate(rounds):
            try:
                answer = roundtrip(sock, ApiKey.SASL_AUTHENTICATE, authenticate_version,
                                   {"auth_bytes": auth_bytes}, 3 + index)
            except ConnectionError:
                assert handshake_version == 0, "SaslAuthenticate after v1 was not answered"
                return False  # v0's next frame is a raw token, not SaslAuthenticate (Kafka)
            if answer.error_code != ErrorCode.none:
                assert answer.error_code == ErrorCode.sasl_authentication_failed, answer
                return False
            if scram is None or index == 1:
                break
            try:
                rounds[1] = scram.final(bytes(answer.auth_bytes))
            except ScramError:
                return False
        metadata = roundtrip(sock, ApiKey.METADATA, 12, {
            "topics": None, "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}, 9)
        assert [b.node_id for b in metadata.brokers] == [1]  # (topics: a drawn DeleteTopics)
        return True
