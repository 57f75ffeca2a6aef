"""SCRAM credential stores: where ``strata users`` puts salted credentials and SASL reads them.

Owns the storage of ``ScramCredential`` s (salt, iterations, StoredKey, ServerKey — never a
password) per (mechanism, user):

* in a cluster, the metadata store, one key per credential::

      /strata/credentials/<mechanism>/<user>   {"v": 1, "mechanism", "salt", "iterations",
                                                 "stored_key", "server_key"}   (base64 fields)

  (``<user>`` percent-encoded, so a ``/`` in a name cannot escape its folder);
* a single broker (no ``metadata.store``): ``credentials.json`` in the first log dir,
  ``{"v": 1, "credentials": {"<mechanism>": {"<user>": {...}}}}``, kept by
  ``strata.storage.json_document`` (replaced atomically, flock-guarded read-modify-writes).

Both are read on every authentication, so a user created or deleted while brokers run takes
effect on the next login. Writers: the ``strata users`` CLI and AlterUserScramCredentials.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from pathlib import Path
from typing import Final, Protocol

from strata.metadata.store import MetadataStore
from strata.security.scram import MECHANISMS, ScramCredential
from strata.storage.json_document import JsonDocumentFile

FORMAT_VERSION: Final = 1
CREDENTIALS_PREFIX: Final = "/strata/credentials/"
CREDENTIALS_FILE: Final = "credentials.json"


class CredentialStore(Protocol):
    async def get(self, mechanism: str, username: str) -> ScramCredential | None: ...

    async def put(self, username: str, credential: ScramCredential) -> None: ...

    async def delete(self, username: str, mechanism: str | None = None) -> bool:
        """Remove one mechanism's credential of a user (all when None); False if none was."""
        ...

    async def users(self) -> dict[str, list[str]]:
        """user -> the mechanisms it has a credential for."""
        ...


def _encode(credential: ScramCredential) -> dict[str, object]:
    return {"v": FORMAT_VERSION, **credential.to_json()}


def _decode(doc: dict[str, object]) -> ScramCredential:
    version = doc.get("v", FORMAT_VERSION)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(f"credential format version {version} is newer than this Strata's")
    return ScramCredential.from_json(doc)


def credential_key(mechanism: str, username: str) -> str:
    return f"{CREDENTIALS_PREFIX}{mechanism}/{urllib.parse.quote(username, safe='')}"


class MetadataCredentialStore:
    """Credentials of a cluster, in its metadata store."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def get(self, mechanism: str, username: str) -> ScramCredential | None:
        entry = await self.store.get(credential_key(mechanism, username))
        return None if entry is None else _decode(json.loads(entry.value))

    async def put(self, username: str, credential: ScramCredential) -> None:
        await self.store.put(credential_key(credential.mechanism, username),
                             json.dumps(_encode(credential), sort_keys=True).encode())

    async def delete(self, username: str, mechanism: str | None = None) -> bool:
        deleted = False
        for name in [mechanism] if mechanism else list(MECHANISMS):
            deleted |= await self.store.delete(credential_key(name, username))
        return deleted

    async def users(self) -> dict[str, list[str]]:
        entries, _ = await self.store.list(CREDENTIALS_PREFIX)
        out: dict[str, list[str]] = {}
        for entry in entries:
            mechanism, _, quoted = entry.key[len(CREDENTIALS_PREFIX):].partition("/")
            out.setdefault(urllib.parse.unquote(quoted), []).append(mechanism)
        return {user: sorted(mechs) for user, mechs in sorted(out.items())}


class FileCredentialStore:
    """Credentials of a single broker, in ``credentials.json`` (mode 0600) of its first log dir
    (``strata.storage.json_document``: versioned, replaced atomically, and flock-guarded, so
    the broker and ``strata users --log-dir`` never lose each other's change)."""

    def __init__(self, log_dir: Path) -> None:
        self.file = JsonDocumentFile(log_dir, CREDENTIALS_FILE, mode=0o600)
        self.path = self.file.path

    def _read(self) -> dict[str, dict[str, dict[str, object]]]:
        credentials: dict[str, dict[str, dict[str, object]]] = self.file.read().get(
            "credentials", {})
        return credentials

    def _write(self, credentials: dict[str, dict[str, dict[str, object]]]) -> None:
        self.file.write({"credentials": credentials})

    async def get(self, mechanism: str, username: str) -> ScramCredential | None:
        credentials = await asyncio.to_thread(self._read)
        doc = credentials.get(mechanism, {}).get(username)
        return None if doc is None else _decode(doc)

    async def put(self, username: str, credential: ScramCredential) -> None:
        def update() -> None:
            with self.file.locked():
                credentials = self._read()
                credentials.setdefault(credential.mechanism, {})[username] = _encode(credential)
                self._write(credentials)

        await asyncio.to_thread(update)

    async def delete(self, username: str, mechanism: str | None = None) -> bool:
        def update() -> bool:
            with self.file.locked():
                credentials = self._read()
                deleted = False
                for name in [mechanism] if mechanism else list(credentials):
                    if credentials.get(name, {}).pop(username, None) is not None:
                        deleted = True
                if deleted:
                    self._write(credentials)
                return deleted

        return await asyncio.to_thread(update)

    async def users(self) -> dict[str, list[str]]:
        credentials = await asyncio.to_thread(self._read)
        out: dict[str, list[str]] = {}
        for mechanism, by_user in credentials.items():
            for username in by_user:
                out.setdefault(username, []).append(mechanism)
        return {user: sorted(mechs) for user, mechs in sorted(out.items())}
