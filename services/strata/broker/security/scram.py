"""SCRAM (RFC 5802, RFC 7677): credentials, the server's and the client's side of one exchange.

Pure (no I/O). Owns the SCRAM math and message grammar Kafka's SCRAM-SHA-256 / SCRAM-SHA-512
mechanisms use::

    client-first  = gs2-header client-first-bare       gs2-header = "n,," | "n,a=<authzid>,"
    client-first-bare = "n=" saslname ",r=" c-nonce [",tokenauth=true" ...]
    server-first  = "r=" c-nonce s-nonce ",s=" base64(salt) ",i=" iterations
    client-final  = "c=" base64(gs2-header) ",r=" nonce ",p=" base64(ClientProof)
    server-final  = "v=" base64(ServerSignature)

    SaltedPassword  = PBKDF2-HMAC-H(password, salt, i)      ClientKey = HMAC(SaltedPassword,
    StoredKey       = H(ClientKey)                                          "Client Key")
    ServerKey       = HMAC(SaltedPassword, "Server Key")
    AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
    ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(ServerKey, AuthMessage)

Invariants: a ``ScramCredential`` holds only salt, iteration count, ``StoredKey`` and
``ServerKey`` — never the password nor anything a client could log in with. Proofs are compared
in constant time. A server exchange fails (``ScramError``) on any malformed message, a nonce that
does not extend its own, a channel-binding request, or a wrong proof; every failure reads the
same to the client ("invalid credentials") so it cannot tell a missing user from a wrong password.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

MECHANISMS: Final[dict[str, str]] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
"""Kafka's SCRAM mechanism names -> hashlib algorithm."""
MECHANISM_TYPES: Final[dict[int, str]] = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
"""Kafka's ``ScramMechanism`` type bytes (Describe/AlterUserScramCredentials) -> name."""

DEFAULT_ITERATIONS: Final = 4096
MIN_ITERATIONS: Final = 4096  # Kafka's ScramMechanism.minIterations for both mechanisms
MAX_ITERATIONS: Final = 16384  # Kafka's AlterUserScramCredentials bound


class ScramError(Exception):
    """An exchange that cannot succeed; the message is safe to send to the client."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server stores per (mechanism, user): enough to verify, never to log in."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def to_json(self) -> dict[str, object]:
        return {"mechanism": self.mechanism, "salt": _b64(self.salt),
                "iterations": self.iterations, "stored_key": _b64(self.stored_key),
                "server_key": _b64(self.server_key)}

    @classmethod
    def from_json(cls, doc: dict[str, object]) -> ScramCredential:
        mechanism = str(doc["mechanism"])
        if mechanism not in MECHANISMS:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}")
        iterations = doc["iterations"]
        if not isinstance(iterations, int):
            raise ValueError("iterations is not an integer")
        return cls(mechanism, _unb64(str(doc["salt"])), iterations,
                   _unb64(str(doc["stored_key"])), _unb64(str(doc["server_key"])))

    def verifies(self, password: str) -> bool:
        """True if ``password`` is the one this credential was made from (PLAIN uses this)."""
        keys = _keys(self.mechanism, password, self.salt, self.iterations)
        return hmac.compare_digest(keys[1], self.stored_key)


def _algorithm(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}") from None


def _hmac(algorithm: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, algorithm).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_algorithm(mechanism), _normalize(password).encode(), salt,
                               iterations)


def _keys(mechanism: str, password: str, salt: bytes,
          iterations: int) -> tuple[bytes, bytes, bytes]:
    """(ClientKey, StoredKey, ServerKey)."""
    algorithm = _algorithm(mechanism)
    salted = salted_password(mechanism, password, salt, iterations)
    client_key = _hmac(algorithm, salted, b"Client Key")
    return (client_key, hashlib.new(algorithm, client_key).digest(),
            _hmac(algorithm, salted, b"Server Key"))


def make_credential(mechanism: str, password: str, *, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """A new credential with a random 32-byte salt (or the one given, for test vectors)."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, "
                         f"got {iterations}")
    salt = secrets.token_bytes(32) if salt is None else salt
    _, stored_key, server_key = _keys(mechanism, password, salt, iterations)
    return ScramCredential(mechanism, salt, iterations, stored_key, server_key)


def credential_from_salted_password(mechanism: str, salt: bytes, iterations: int,
                                    salted: bytes) -> ScramCredential:
    """What AlterUserScramCredentials sends (the client salts and iterates): never a password."""
    algorithm = _algorithm(mechanism)
    client_key = _hmac(algorithm, salted, b"Client Key")
    return ScramCredential(mechanism, salt, iterations,
                           hashlib.new(algorithm, client_key).digest(),
                           _hmac(algorithm, salted, b"Server Key"))


def _normalize(password: str) -> str:
    # SASLprep (RFC 4013) is not applied, as Kafka's Java client does not apply it either: the
    # same bytes on both sides is what matters.
    return password


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ScramError("invalid base64") from None


def _fields(message: str) -> dict[str, str]:
    """``a=1,b=2`` -> ``{"a": "1", "b": "2"}`` (values may hold ``=``; extensions kept)."""
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ScramError(f"malformed SCRAM attribute {part[:40]!r}")
        out.setdefault(key, value)
    return out


def decode_saslname(name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is invalid."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i:i + 3]
            if code not in ("=2C", "=3D"):
                raise ScramError("invalid username encoding")
            out.append("," if code == "=2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


CredentialLookup = Callable[[str, str], Awaitable[ScramCredential | None]]
"""``(mechanism, username) -> credential or None``."""

_INVALID: Final = "Authentication failed: invalid credentials"


class ScramServer:
    """The server side of one SCRAM exchange: two client messages in, two answers out."""

    def __init__(self, mechanism: str, lookup: CredentialLookup, *,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._algorithm = _algorithm(mechanism)
        self._lookup = lookup
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self.username: str | None = None
        self.complete = False

    async def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("SCRAM messages are UTF-8") from None
        if self._state == "first":
            return await self._client_first(text)
        if self._state == "final":
            return self._client_final(text)
        raise ScramError("SCRAM exchange already finished")

    async def _client_first(self, text: str) -> bytes:
        if not (text.startswith("n,") or text.startswith("y,")):
            raise ScramError("channel binding is not supported")
        flag, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2 or (authzid and not authzid.startswith("a=")):
            raise ScramError("malformed SCRAM client-first message")
        attrs = _fields(bare)
        if "m" in attrs or "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("malformed SCRAM client-first message")
        username = decode_saslname(attrs["n"])
        if authzid and decode_saslname(authzid[2:]) != username:
            raise ScramError("an authorization id other than the user is not supported")
        credential = await self._lookup(self.mechanism, username)
        if credential is None or credential.mechanism != self.mechanism:
            raise ScramError(_INVALID)
        self._credential, self.username = credential, username
        self._gs2_header = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._combined_nonce = attrs["r"] + self._nonce
        self._server_first = (f"r={self._combined_nonce},s={_b64(credential.salt)},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self._state = "done"
        credential = self._credential
        assert credential is not None
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("malformed SCRAM client-final message")
        attrs = _fields(without_proof)
        if attrs.get("r") != self._combined_nonce:
            raise ScramError("invalid SCRAM nonce")
        if _unb64(attrs.get("c", "")) != self._gs2_header.encode():
            raise ScramError("invalid SCRAM channel binding")
        proof = _unb64(proof_part)
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 without_proof)).encode()
        client_signature = _hmac(self._algorithm, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise ScramError(_INVALID)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._algorithm, client_key).digest(),
                                   credential.stored_key):
            raise ScramError(_INVALID)
        self.complete = True
        server_signature = _hmac(self._algorithm, credential.server_key, auth_message)
        return f"v={_b64(server_signature)}".encode()


class ScramClient:
    """The client side (inter-broker fetchers, tests): ``first()``, ``final(server_first)``,
    ``verify(server_final)``."""

    def __init__(self, mechanism: str, username: str, password: str, *,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._algorithm = _algorithm(mechanism)
        self._password = password
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._bare = f"n={encode_saslname(username)},r={self._nonce}"
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = _fields(text)
        nonce = attrs.get("r", "")
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise ScramError("the server's nonce does not extend ours")
        iterations = int(attrs.get("i", "0"))
        self._salted = salted_password(self.mechanism, self._password, _unb64(attrs["s"]),
                                       iterations)
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        self._auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = _hmac(self._algorithm, self._salted, b"Client Key")
        stored_key = hashlib.new(self._algorithm, client_key).digest()
        signature = _hmac(self._algorithm, stored_key, self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _fields(server_final.decode())
        if "e" in attrs:
            raise ScramError(f"server refused: {attrs['e']}")
        server_key = _hmac(self._algorithm, self._salted, b"Server Key")
        expected = _hmac(self._algorithm, server_key, self._auth_message)
        if not hmac.compare_digest(_unb64(attrs.get("v", "")), expected):
            raise ScramError("the server's signature is wrong")
