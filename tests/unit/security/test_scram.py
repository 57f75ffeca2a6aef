"""SCRAM math and exchanges: RFC 7677's SCRAM-SHA-256 test vector, both sides, refusals."""

from __future__ import annotations

import base64

import pytest

from strata.security.scram import (
    CredentialLookup,
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    decode_saslname,
    encode_saslname,
    make_credential,
)

# RFC 7677 section 3.
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _lookup(credential: ScramCredential | None) -> CredentialLookup:
    async def lookup(mechanism: str, username: str) -> ScramCredential | None:
        return credential if username == "user" else None
    return lookup


async def test_server_side_of_the_rfc_7677_vector() -> None:
    credential = make_credential("SCRAM-SHA-256", "pencil", salt=SALT)
    server = ScramServer("SCRAM-SHA-256", _lookup(credential), nonce=SERVER_NONCE)
    assert await server.evaluate(CLIENT_FIRST) == SERVER_FIRST
    assert await server.evaluate(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.username == "user"


def test_client_side_of_the_rfc_7677_vector() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)
    assert client.first() == CLIENT_FIRST
    assert client.final(SERVER_FIRST) == CLIENT_FINAL
    client.verify(SERVER_FINAL)
    with pytest.raises(ScramError):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


def test_a_credential_holds_no_password_and_round_trips() -> None:
    credential = make_credential("SCRAM-SHA-512", "pencil")
    doc = credential.to_json()
    assert "pencil" not in str(doc)
    assert ScramCredential.from_json(doc) == credential
    assert len(credential.salt) == 32 and len(credential.stored_key) == 64
    assert credential.verifies("pencil") and not credential.verifies("pencil2")
    assert make_credential("SCRAM-SHA-512", "pencil").salt != credential.salt


def test_iterations_are_bounded_like_kafka() -> None:
    with pytest.raises(ValueError, match="iterations"):
        make_credential("SCRAM-SHA-256", "p", iterations=1000)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_client_and_server_agree(mechanism: str) -> None:
    credential = make_credential(mechanism, "s3cret, with = signs")
    server = ScramServer(mechanism, _lookup(credential))
    client = ScramClient(mechanism, "user", "s3cret, with = signs")
    final = client.final(await server.evaluate(client.first()))
    client.verify(await server.evaluate(final))
    assert server.complete


async def test_wrong_password_unknown_user_and_tampering_fail() -> None:
    credential = make_credential("SCRAM-SHA-512", "right")
    server = ScramServer("SCRAM-SHA-512", _lookup(credential))
    client = ScramClient("SCRAM-SHA-512", "user", "wrong")
    final = client.final(await server.evaluate(client.first()))
    with pytest.raises(ScramError, match="invalid credentials"):
        await server.evaluate(final)
    assert not server.complete

    stranger = ScramClient("SCRAM-SHA-512", "nobody", "right")
    with pytest.raises(ScramError, match="invalid credentials"):
        await ScramServer("SCRAM-SHA-512", _lookup(credential)).evaluate(stranger.first())

    server = ScramServer("SCRAM-SHA-512", _lookup(credential))
    client = ScramClient("SCRAM-SHA-512", "user", "right")
    final = client.final(await server.evaluate(client.first()))
    with pytest.raises(ScramError, match="nonce"):
        await server.evaluate(final.replace(b",r=", b",r=x", 1))


@pytest.mark.parametrize("message", [b"p=tls-unique,,n=user,r=abc", b"n,,r=abc", b"n,,n=user",
                                     b"n,,n=us=er,r=abc", b"\xff"])
async def test_malformed_client_first_messages_fail(message: bytes) -> None:
    credential = make_credential("SCRAM-SHA-256", "pencil")
    with pytest.raises(ScramError):
        await ScramServer("SCRAM-SHA-256", _lookup(credential)).evaluate(message)


def test_saslname_escaping() -> None:
    assert encode_saslname("a,b=c") == "a=2Cb=3Dc"
    assert decode_saslname("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ScramError):
        decode_saslname("a=2Db")
