"""The per-connection SASL state machine, with credentials in a real ``credentials.json``."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.broker.network.listeners import ListenerSecurity, SecurityProtocol
from strata.broker.network.security_session import AuthenticationFailed, SaslState, SecuritySession
from strata.broker.security.credentials import FileCredentialStore
from strata.broker.security.scram import ScramClient, make_credential
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode


@pytest.fixture
async def store(tmp_path: Path) -> FileCredentialStore:
    store = FileCredentialStore(tmp_path)
    await store.put("alice", make_credential("SCRAM-SHA-512", "secret"))
    await store.put("bob", make_credential("SCRAM-SHA-256", "hunter2"))
    return store


def _session(store: FileCredentialStore,
             protocol: SecurityProtocol = SecurityProtocol.SASL_PLAINTEXT) -> SecuritySession:
    return SecuritySession(ListenerSecurity(
        "SASL", protocol, mechanisms=("PLAIN", "SCRAM-SHA-512"), credentials=store))


async def test_plain_checks_the_salted_scram_credential(store: FileCredentialStore) -> None:
    session = _session(store)
    assert not session.allows(ApiKey.METADATA) and session.allows(ApiKey.API_VERSIONS)
    assert session.handshake("PLAIN") == ErrorCode.none
    assert await session.authenticate(b"\x00alice\x00secret") == b""
    assert session.authenticated and session.principal == "User:alice"
    assert session.allows(ApiKey.METADATA)
    assert session.handshake("PLAIN") == ErrorCode.illegal_sasl_state


async def test_plain_falls_back_to_scram_sha_256(store: FileCredentialStore) -> None:
    session = _session(store)
    session.handshake("PLAIN")
    await session.authenticate(b"bob\x00bob\x00hunter2")
    assert session.principal == "User:bob"


@pytest.mark.parametrize("token", [b"\x00alice\x00wrong", b"\x00nobody\x00secret",
                                   b"carol\x00alice\x00secret", b"alice-secret", b"\x00\x00x"])
async def test_failed_plain_closes_the_session(store: FileCredentialStore, token: bytes) -> None:
    session = _session(store)
    session.handshake("PLAIN")
    with pytest.raises(AuthenticationFailed):
        await session.authenticate(token)
    assert session.state is SaslState.FAILED
    assert not session.allows(ApiKey.API_VERSIONS) and not session.allows(ApiKey.METADATA)
    assert session.principal == "User:ANONYMOUS"


async def test_scram_in_two_rounds(store: FileCredentialStore) -> None:
    session = _session(store)
    assert session.handshake("SCRAM-SHA-256") == ErrorCode.unsupported_sasl_mechanism
    assert session.handshake("SCRAM-SHA-512") == ErrorCode.none
    client = ScramClient("SCRAM-SHA-512", "alice", "secret")
    server_first = await session.authenticate(client.first())
    assert not session.authenticated
    client.verify(await session.authenticate(client.final(server_first)))
    assert session.principal == "User:alice"


async def test_authenticate_before_handshake_and_non_sasl_listeners(
        store: FileCredentialStore) -> None:
    session = _session(store)
    with pytest.raises(AuthenticationFailed):
        await session.authenticate(b"\x00alice\x00secret")
    plain = _session(store, SecurityProtocol.SSL)
    assert plain.authenticated and plain.allows(ApiKey.PRODUCE)
    assert plain.handshake("PLAIN") == ErrorCode.illegal_sasl_state


async def test_file_store_lists_deletes_and_keeps_no_password(
        store: FileCredentialStore) -> None:
    assert await store.users() == {"alice": ["SCRAM-SHA-512"], "bob": ["SCRAM-SHA-256"]}
    assert "secret" not in store.path.read_text()
    assert await store.delete("alice") and not await store.delete("alice")
    assert await store.get("SCRAM-SHA-512", "alice") is None
    assert list(store.path.parent.glob("*.tmp")) == []
