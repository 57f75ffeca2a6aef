"""Who may call the admin API: bearer tokens and HTTP basic users, as Kafka principals.

Pure (no I/O but ``load``, which reads the file once). Owns the credentials file format, the
password and token hashes, and the check of one presented credential. The file is JSON (a
Kubernetes Secret key mounted as a file, ``--auth-file`` / ``$STRATA_ADMIN_AUTH_FILE``)::

    {"v": 1,
     "users":  [{"username": "alice",
                 "password": "pbkdf2-sha256$600000$<salt, base64>$<derived key, base64>"}],
     "tokens": [{"username": "ci-bot",
                 "sha256": "<hex SHA-256 of the token>"}]}

Invariants:

* no plaintext secret is ever stored: a password is kept as PBKDF2-HMAC-SHA256 with a random
  16-byte salt and its iteration count (``hash_password``); a token, which is random and long
  (``new_token``: 32 bytes, URL-safe base64), as its SHA-256 (``hash_token``);
* a user or token authenticates as the Kafka principal ``User:<username>`` — the same principal
  a SASL login with that name gets on a broker, so one set of ACLs governs both;
* comparisons are constant-time (``hmac.compare_digest``); a successful password check is
  remembered (keyed by an HMAC of the password under a per-process random key, never the
  password) so PBKDF2's deliberate cost is paid once per user and password, not per request.

Make entries with ``python -m strata.admin.credentials add-user FILE alice`` (password from
``$STRATA_ADMIN_PASSWORD`` or a prompt) and ``add-token FILE ci-bot`` (prints the new token
once).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

FORMAT_VERSION: Final = 1
SCHEME: Final = "pbkdf2-sha256"
DEFAULT_ITERATIONS: Final = 600_000  # OWASP's 2023 figure for PBKDF2-HMAC-SHA256
MIN_ITERATIONS: Final = 1_000
SALT_BYTES: Final = 16
USER_TYPE: Final = "User"


class CredentialsError(ValueError):
    """The credentials file is malformed; the message says where."""


def principal(username: str) -> str:
    """The Kafka principal of an admin API user (``User:alice``)."""
    return f"{USER_TYPE}:{username}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(password: str, iterations: int = DEFAULT_ITERATIONS,
                  salt: bytes | None = None) -> str:
    """``pbkdf2-sha256$<iterations>$<salt>$<key>`` of ``password`` (a fresh salt by default)."""
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"iterations must be >= {MIN_ITERATIONS}")
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    key = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    return f"{SCHEME}${iterations}${_b64(salt)}${_b64(key)}"


@dataclass(frozen=True, slots=True)
class PasswordHash:
    iterations: int
    salt: bytes
    key: bytes

    @classmethod
    def parse(cls, text: str, where: str) -> PasswordHash:
        parts = text.split("$")
        if len(parts) != 4 or parts[0] != SCHEME:
            raise CredentialsError(f"{where}: password must be "
                                   f"'{SCHEME}$<iterations>$<salt>$<key>' (see hash_password)")
        try:
            iterations = int(parts[1])
            salt = base64.b64decode(parts[2], validate=True)
            key = base64.b64decode(parts[3], validate=True)
        except ValueError:
            raise CredentialsError(f"{where}: malformed {SCHEME} hash") from None
        if iterations < MIN_ITERATIONS or not salt or len(key) != 32:
            raise CredentialsError(f"{where}: {SCHEME} needs >= {MIN_ITERATIONS} iterations, "
                                   "a salt and a 32-byte key")
        return cls(iterations, salt, key)

    def matches(self, password: str) -> bool:
        derived = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), self.salt,
                                      self.iterations)
        return hmac.compare_digest(derived, self.key)


def new_token() -> str:
    """A new random bearer token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass
class AdminCredentials:
    """The users and tokens of one credentials file; ``check_*`` return a principal or None."""

    users: Mapping[str, PasswordHash] = field(default_factory=dict)
    tokens: Mapping[str, str] = field(default_factory=dict)  # sha256 hex -> username
    _verified: dict[bytes, str] = field(default_factory=dict, repr=False)
    _cache_key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def parse(cls, document: Any) -> AdminCredentials:
        if not isinstance(document, Mapping):
            raise CredentialsError("the credentials file must hold a JSON object")
        version = document.get("v", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise CredentialsError(f"format version {version!r} is not {FORMAT_VERSION}")
        users: dict[str, PasswordHash] = {}
        for i, entry in enumerate(_entries(document, "users")):
            where = f"users[{i}]"
            username = _username(entry, where)
            if username in users:
                raise CredentialsError(f"{where}: user {username!r} is listed twice")
            password = entry.get("password")
            if not isinstance(password, str):
                raise CredentialsError(f"{where}: password (a {SCHEME} hash) is required")
            users[username] = PasswordHash.parse(password, where)
        tokens: dict[str, str] = {}
        for i, entry in enumerate(_entries(document, "tokens")):
            where = f"tokens[{i}]"
            username = _username(entry, where)
            digest = entry.get("sha256")
            if (not isinstance(digest, str) or len(digest) != 64
                    or any(c not in "0123456789abcdef" for c in digest.lower())):
                raise CredentialsError(f"{where}: sha256 must be the token's hex SHA-256")
            tokens[digest.lower()] = username
        return cls(users, tokens)

    @classmethod
    def load(cls, path: Path) -> AdminCredentials:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CredentialsError(f"{path}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise CredentialsError(f"{path}: not JSON ({exc})") from None
        try:
            return cls.parse(document)
        except CredentialsError as exc:
            raise CredentialsError(f"{path}: {exc}") from None

    def check_token(self, token: str) -> str | None:
        digest = hash_token(token)
        for known, username in self.tokens.items():
            if hmac.compare_digest(known, digest):
                return principal(username)
        return None

    def check_password(self, username: str, password: str) -> str | None:
        stored = self.users.get(username)
        if stored is None:
            return None
        cache_key = hmac.new(self._cache_key, f"{username}\0{password}".encode(),
                             hashlib.sha256).digest()
        with self._lock:
            if self._verified.get(cache_key) == username:
                return principal(username)
        if not stored.matches(password):
            return None
        with self._lock:
            if len(self._verified) > 10_000:
                self._verified.clear()
            self._verified[cache_key] = username
        return principal(username)


def _entries(document: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    raw = document.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(e, Mapping) for e in raw):
        raise CredentialsError(f"{key} must be a list of objects")
    return raw


def _username(entry: Mapping[str, Any], where: str) -> str:
    username = entry.get("username")
    if not isinstance(username, str) or not username or ":" in username:
        raise CredentialsError(f"{where}: username must be a non-empty string without ':'")
    return username


# ------------------------------------------------------------------------------ file editing
def _read_document(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"v": FORMAT_VERSION, "users": [], "tokens": []}
    AdminCredentials.load(path)  # refuses a malformed file, naming it
    return dict(json.loads(path.read_text(encoding="utf-8")))


def _write_document(path: Path, document: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(document, indent=2) + "\n")
    os.replace(tmp, path)


def add_user(path: Path, username: str, password: str,
             iterations: int = DEFAULT_ITERATIONS) -> None:
    """Add ``username`` to the file (created if missing), replacing its password if listed."""
    _username({"username": username}, "username")
    document = _read_document(path)
    users = [u for u in document.get("users", []) if u.get("username") != username]
    users.append({"username": username, "password": hash_password(password, iterations)})
    _write_document(path, {**document, "users": users})


def add_token(path: Path, username: str) -> str:
    """Add a new token for ``username`` to the file; returns the token (shown only once)."""
    _username({"username": username}, "username")
    document = _read_document(path)
    token = new_token()
    tokens = [*document.get("tokens", []), {"username": username, "sha256": hash_token(token)}]
    _write_document(path, {**document, "tokens": tokens})
    return token


def main(argv: list[str] | None = None) -> int:
    import argparse
    import getpass
    import sys

    parser = argparse.ArgumentParser(prog="python -m strata.admin.credentials",
                                     description="Edit an admin API credentials file.")
    commands = parser.add_subparsers(dest="command", required=True)
    user = commands.add_parser("add-user", help="add or replace an HTTP basic user")
    user.add_argument("file", type=Path)
    user.add_argument("username")
    user.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    token = commands.add_parser("add-token", help="add a bearer token; prints it once")
    token.add_argument("file", type=Path)
    token.add_argument("username")
    args = parser.parse_args(argv)
    try:
        if args.command == "add-user":
            password = os.environ.get("STRATA_ADMIN_PASSWORD") or getpass.getpass()
            add_user(args.file, args.username, password, args.iterations)
        else:
            print(add_token(args.file, args.username))
    except (CredentialsError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
