"""Client quota stores: where AlterClientQuotas and ``strata quotas`` keep quota configuration.

Two backends, as for ACLs (``strata.security.acl_store``):

* a cluster: the metadata store, one key per entity::

      /strata/client-quotas/<type>=<name>[&<type>=<name>]
          {"v": 1, "entity": [["client-id", null], ["user", "alice"]],
           "quotas": {"producer_byte_rate": 1048576.0}}

  (types sorted; a name percent-encoded, the default entity written ``<default>``, which no
  encoded name can equal). Brokers see the entries through their metadata cache
  (``ClusterImage.client_quotas``); an alteration compares the version of every key it
  rewrites, so two concurrent alterations of one entity never lose either's keys (the loser
  retries on the new values);
* a single broker (no ``metadata.store``): ``client-quotas.json`` in the first log dir,
  ``{"v": 1, "quotas": [{"entity": [...], "quotas": {...}}]}``
  (``strata.storage.json_document``: replaced atomically, flock-guarded).

The value, not the key, is the truth. Every alteration returns a *version* — the metadata
store's revision, or 0 for the file — that a broker waits for before answering
(read-your-writes). Validation is ``ClientQuotas.alter``'s: a refused entry writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol

from strata.broker.quotas.client_quotas import (
    Alteration,
    ClientQuotaEntity,
    ClientQuotas,
    QuotaRequestError,
)
from strata.metadata.store import Compare, Delete, MetadataStore, Op, Put
from strata.storage.json_document import FORMAT_VERSION, JsonDocumentFile

CLIENT_QUOTAS_PREFIX: Final = "/strata/client-quotas/"
CLIENT_QUOTAS_FILE: Final = "client-quotas.json"
DEFAULT_NAME: Final = "<default>"
_ALTER_ATTEMPTS: Final = 5


def quota_key(entity: ClientQuotaEntity) -> str:
    """The metadata-store key of ``entity``."""
    return CLIENT_QUOTAS_PREFIX + "&".join(
        f"{kind}={DEFAULT_NAME if name is None else urllib.parse.quote(name, safe='')}"
        for kind, name in entity)


def encode_entry(entity: ClientQuotaEntity, quotas: Mapping[str, float]) -> dict[str, Any]:
    return {"entity": [list(pair) for pair in entity], "quotas": dict(sorted(quotas.items()))}


def decode_entry(doc: object) -> tuple[ClientQuotaEntity, dict[str, float]]:
    """One stored entity and its quotas; ``ValueError`` / ``KeyError`` / ``TypeError`` if it is
    not one this Strata can read."""
    if not isinstance(doc, dict):
        raise TypeError("a client quota entry is a JSON object")
    version = doc.get("v", FORMAT_VERSION)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(f"client quota format version {version} is newer than this Strata's")
    entity = tuple(sorted((str(kind), None if name is None else str(name))
                          for kind, name in doc["entity"]))
    quotas = {str(k): float(v) for k, v in doc["quotas"].items()}
    return entity, quotas


def decode_all(docs: Sequence[object]) -> ClientQuotas:
    """The configuration of stored entries, skipping those this Strata cannot read."""
    entries: dict[ClientQuotaEntity, dict[str, float]] = {}
    for doc in docs:
        try:
            entity, quotas = decode_entry(doc)
        except (ValueError, KeyError, TypeError):
            continue
        if quotas:
            entries[entity] = quotas
    return ClientQuotas(entries)


class QuotaStore(Protocol):
    async def quotas(self) -> tuple[ClientQuotas, int]:
        """Every stored quota, and the version it is consistent at."""
        ...

    async def alter(self, alterations: Sequence[Alteration], validate_only: bool
                    ) -> tuple[list[QuotaRequestError | None], int]:
        """Apply the valid alterations (none with ``validate_only``); per alteration None or
        why it was refused, and the version to wait for (0: nothing)."""
        ...


def _changed(before: ClientQuotas, after: ClientQuotas) -> set[ClientQuotaEntity]:
    return {e for e in set(before.entries) | set(after.entries)
            if before.entries.get(e) != after.entries.get(e)}


class MetadataQuotaStore:
    """The client quotas of a cluster, in its metadata store."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def _read(self) -> tuple[ClientQuotas, dict[ClientQuotaEntity, int], int]:
        entries, revision = await self.store.list(CLIENT_QUOTAS_PREFIX)
        docs, versions = [], {}
        for entry in entries:
            try:
                doc = json.loads(entry.value)
                entity, _ = decode_entry(doc)
            except (ValueError, KeyError, TypeError):
                continue
            docs.append(doc)
            versions[entity] = entry.version
        return decode_all(docs), versions, revision

    async def quotas(self) -> tuple[ClientQuotas, int]:
        quotas, _, revision = await self._read()
        return quotas, revision

    async def alter(self, alterations: Sequence[Alteration], validate_only: bool
                    ) -> tuple[list[QuotaRequestError | None], int]:
        for _ in range(_ALTER_ATTEMPTS):
            before, versions, _ = await self._read()
            after, results = before.alter(alterations)
            changed = _changed(before, after)
            if validate_only or not changed:
                return results, 0
            compares = [Compare(quota_key(e), versions.get(e, 0)) for e in sorted(changed)]
            ops: list[Op] = [
                Put(quota_key(e), json.dumps({"v": FORMAT_VERSION,
                                              **encode_entry(e, after.entries[e])}).encode())
                if e in after.entries else Delete(quota_key(e))
                for e in sorted(changed)]
            result = await self.store.transaction(compares, ops)
            if result.succeeded:
                return results, result.revision
        raise TimeoutError("client quotas kept changing under AlterClientQuotas; try again")


class FileQuotaStore:
    """The client quotas of a single broker, in ``client-quotas.json`` of its first log dir."""

    def __init__(self, log_dir: Path) -> None:
        self.file = JsonDocumentFile(log_dir, CLIENT_QUOTAS_FILE)
        self.path = self.file.path
        self._lock = asyncio.Lock()

    def stamp(self) -> tuple[int, int, int] | None:
        return self.file.stamp()

    def read(self) -> ClientQuotas:
        return decode_all(self.file.read().get("quotas", []))

    async def quotas(self) -> tuple[ClientQuotas, int]:
        return await asyncio.to_thread(self.read), 0

    async def alter(self, alterations: Sequence[Alteration], validate_only: bool
                    ) -> tuple[list[QuotaRequestError | None], int]:
        def update() -> list[QuotaRequestError | None]:
            with self.file.locked():
                before = self.read()
                after, results = before.alter(alterations)
                if not validate_only and _changed(before, after):
                    self.file.write({"quotas": [encode_entry(e, q) for e, q in
                                                sorted(after.entries.items(),
                                                       key=lambda item: quota_key(item[0]))]})
                return results

        async with self._lock:
            return await asyncio.to_thread(update), 0
