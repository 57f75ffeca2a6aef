"""ACL stores: where CreateAcls, DeleteAcls and ``strata acls`` keep ``AclBinding`` s.

Two backends, as for SCRAM credentials (``strata.security.credentials``):

* a cluster: the metadata store, one key per binding (so concurrent creations never conflict
  and a creation is idempotent)::

      /strata/acls/<ResourceType>/<PATTERN>/<name>/<principal>/<host>/<Operation>/<Permission>
          {"v": 1, "resource_type": "Topic", "pattern_type": "PREFIXED", "name": "orders-",
           "principal": "User:alice", "host": "*", "operation": "Write",
           "permission_type": "Allow"}

  (name, principal and host percent-encoded, so a ``/`` cannot escape its folder). Brokers see
  them through their metadata cache (``ClusterImage.acls``): one watch, no extra round trip;
* a single broker (no ``metadata.store``): ``acls.json`` in the first log dir,
  ``{"v": 1, "acls": [<the objects above>]}``, kept by ``strata.storage.json_document``
  (replaced atomically, so a reader never sees half a file).

The value, not the key, is the truth (a reader decodes values only); ``"v"`` newer than
``FORMAT_VERSION`` is refused. Every write returns a *version* — the metadata store's revision,
or a counter for the file — that a broker waits for before answering (read-your-writes).
Writers: CreateAcls / DeleteAcls handlers, the ``strata acls`` CLI. One writer per file at a
time: a lock within a process, and an exclusive ``flock`` on ``acls.json.lock`` around each
read-modify-write across processes (the broker and the CLI), so no change overwrites another.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.parse
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final, Protocol

from strata.metadata.store import Delete, MetadataStore, Put
from strata.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    select,
)
from strata.storage.json_document import JsonDocumentFile

FORMAT_VERSION: Final = 1
ACLS_PREFIX: Final = "/strata/acls/"
ACLS_FILE: Final = "acls.json"


def encode_binding(binding: AclBinding) -> dict[str, object]:
    pattern, entry = binding.pattern, binding.entry
    return {"v": FORMAT_VERSION, "resource_type": pattern.resource_type.kafka_name,
            "pattern_type": pattern.pattern_type.name, "name": pattern.name,
            "principal": entry.principal, "host": entry.host,
            "operation": entry.operation.kafka_name,
            "permission_type": entry.permission_type.kafka_name}


def decode_binding(doc: object) -> AclBinding:
    """The binding of one stored object; ``ValueError`` / ``KeyError`` / ``TypeError`` if it is
    not one this Strata can read."""
    if not isinstance(doc, dict):
        raise TypeError("an ACL is a JSON object")
    version = doc.get("v", FORMAT_VERSION)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(f"ACL format version {version} is newer than this Strata's")
    return AclBinding(
        ResourcePattern(ResourceType.parse(doc["resource_type"]), str(doc["name"]),
                        PatternType.parse(doc["pattern_type"])),
        AccessControlEntry(str(doc["principal"]), str(doc["host"]),
                           AclOperation.parse(doc["operation"]),
                           AclPermissionType.parse(doc["permission_type"])))


def acl_key(binding: AclBinding) -> str:
    pattern, entry = binding.pattern, binding.entry

    def quote(text: str) -> str:
        return urllib.parse.quote(text, safe="")

    return (f"{ACLS_PREFIX}{pattern.resource_type.kafka_name}/{pattern.pattern_type.name}/"
            f"{quote(pattern.name)}/{quote(entry.principal)}/{quote(entry.host)}/"
            f"{entry.operation.kafka_name}/{entry.permission_type.kafka_name}")


class AclStore(Protocol):
    async def bindings(self) -> tuple[list[AclBinding], int]:
        """Every stored binding, and the version they are consistent at."""
        ...

    async def create(self, bindings: Sequence[AclBinding]) -> int:
        """Store ``bindings`` (validated by the caller; existing ones are kept); the version
        (0: nothing to wait for)."""
        ...

    async def delete(self, filters: Sequence[AclBindingFilter]
                     ) -> tuple[list[list[AclBinding]], int]:
        """Remove every binding a filter selects: per filter the ones it selected, and the
        version after."""
        ...


class MetadataAclStore:
    """The ACLs of a cluster, in its metadata store."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def bindings(self) -> tuple[list[AclBinding], int]:
        entries, revision = await self.store.list(ACLS_PREFIX)
        out = []
        for entry in entries:
            try:
                out.append(decode_binding(json.loads(entry.value)))
            except (ValueError, KeyError, TypeError):
                continue  # a newer Strata's ACL: not enforced by this one (logged by nobody)
        return sorted(out), revision

    async def create(self, bindings: Sequence[AclBinding]) -> int:
        ops = {acl_key(b): Put(acl_key(b), json.dumps(encode_binding(b), sort_keys=True).encode())
               for b in bindings}
        if not ops:
            return 0
        result = await self.store.transaction((), list(ops.values()))
        return result.revision

    async def delete(self, filters: Sequence[AclBindingFilter]
                     ) -> tuple[list[list[AclBinding]], int]:
        existing, revision = await self.bindings()
        matched = [select(existing, f) for f in filters]
        keys = sorted({acl_key(b) for found in matched for b in found})
        if keys:
            result = await self.store.transaction((), [Delete(k) for k in keys])
            revision = result.revision
        return matched, revision


class FileAclStore:
    """The ACLs of a single broker, in ``acls.json`` of its first log dir
    (``strata.storage.json_document``: versioned, replaced atomically, flock-guarded)."""

    def __init__(self, log_dir: Path) -> None:
        self.file = JsonDocumentFile(log_dir, ACLS_FILE)
        self.path = self.file.path
        self._lock = asyncio.Lock()

    def stamp(self) -> tuple[int, int, int] | None:
        """Changes when anyone rewrites the file (None if absent)."""
        return self.file.stamp()

    def read(self) -> list[AclBinding]:
        return sorted({decode_binding(item) for item in self.file.read().get("acls", [])})

    def _file_locked(self) -> contextlib.AbstractContextManager[None]:
        """The broker (CreateAcls, DeleteAcls) and ``strata acls --log-dir`` read-modify-write
        the file one at a time, so neither loses the other's change."""
        return self.file.locked()

    def _write(self, bindings: Iterable[AclBinding]) -> None:
        items = [encode_binding(b) for b in sorted(set(bindings))]
        for item in items:
            item.pop("v")
        self.file.write({"acls": items})

    async def bindings(self) -> tuple[list[AclBinding], int]:
        return await asyncio.to_thread(self.read), 0

    async def create(self, bindings: Sequence[AclBinding]) -> int:
        async with self._lock:
            def update() -> None:
                with self._file_locked():
                    current = set(self.read())
                    if not current.issuperset(bindings):
                        self._write(current | set(bindings))

            await asyncio.to_thread(update)
        return 0

    async def delete(self, filters: Sequence[AclBindingFilter]
                     ) -> tuple[list[list[AclBinding]], int]:
        async with self._lock:
            def update() -> list[list[AclBinding]]:
                with self._file_locked():
                    current = self.read()
                    matched = [select(current, f) for f in filters]
                    gone = {b for found in matched for b in found}
                    if gone:
                        self._write(b for b in current if b not in gone)
                    return matched

            return await asyncio.to_thread(update), 0
