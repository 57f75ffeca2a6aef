"""The production metadata store: ``MetadataStore`` on an etcd cluster (``etcd://h:p,...``;
``etcds://`` with ``tls``: the PEM bytes ``StoreTls.read`` returns).

Every operation is one etcd RPC on the raw stubs of the ``EtcdSession``'s aetcd client (aetcd's
own helpers cannot read at a revision, compare on ``mod_revision`` or return per-op results),
with the session's retries. Mapping to etcd:

* ``Entry.version`` is ``mod_revision``; ``Compare(key, v)`` is ``mod_revision(key) == v``,
  which etcd evaluates as 0 for an absent key — so version 0 means "absent" for free;
* put, compare-and-set, delete and ``transaction`` are all one ``Txn``; its failure branch reads
  the compared keys so ``TxnResult.conflicts`` can name the compares that failed;
* ``list`` is one ``Range`` (etcd returns it sorted by key) and reports the response header's
  revision;
* leases are etcd leases (TTL rounded up to whole seconds — etcd's unit — and raised to etcd's
  minimum, which ``--election-timeout`` sets); keep-alive is our ``LeaseKeeper`` sending one
  ``LeaseKeepAlive`` request every TTL/3. Note: etcd extends every lease on a leader change,
  so a dead broker's key can outlive its TTL by the election time;
* ``compact(c)`` compacts etcd at ``c + 1`` (etcd keeps the state *at* its compaction
  revision, we promise to discard it); watches are ``etcd_watch.watch_events``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Sequence
from typing import Any

from aetcd import rpc

from .errors import LeaseNotFoundError, MetadataStoreError
from .etcd_session import EtcdSession
from .etcd_watch import watch_events, watch_range
from .keys import decode_key, encode_key
from .leases import Lease, LeaseKeeper
from .store import (
    Compare,
    Delete,
    Entry,
    Op,
    Put,
    TransactionalWrites,
    TxnResult,
    WatchEvent,
    check_txn,
)


class EtcdStore(TransactionalWrites):
    """``MetadataStore`` on etcd; see the module docstring."""

    def __init__(
        self,
        endpoints: tuple[tuple[str, int], ...],
        *,
        retry_deadline_s: float = 10.0,
        rpc_timeout_s: float = 2.0,
        tls: tuple[bytes | None, bytes | None, bytes | None] | None = None,
    ) -> None:
        self._session = EtcdSession(
            endpoints, retry_deadline_s=retry_deadline_s, rpc_timeout_s=rpc_timeout_s, tls=tls
        )
        self._timeout = rpc_timeout_s
        self._keeper = LeaseKeeper(self._refresh)

    # -- reads --------------------------------------------------------------------------------

    async def get(self, key: str) -> Entry | None:
        request = rpc.RangeRequest(key=encode_key(key))
        response = await self._session.call(
            "get", lambda c: c.kvstub.Range(request, timeout=self._timeout, metadata=c.metadata)
        )
        return _entry(response.kvs[0]) if response.kvs else None

    async def list(self, prefix: str) -> tuple[list[Entry], int]:
        key, range_end = watch_range(prefix)
        request = rpc.RangeRequest(key=key, range_end=range_end)
        response = await self._session.call(
            "list", lambda c: c.kvstub.Range(request, timeout=self._timeout, metadata=c.metadata)
        )
        return [_entry(kv) for kv in response.kvs], int(response.header.revision)

    # -- writes -------------------------------------------------------------------------------

    async def delete(self, key: str, *, version: int | None = None) -> bool:
        compares = () if version is None else (Compare(key, version),)
        response = await self._txn(compares, (Delete(key),))
        return bool(response.succeeded) and response.responses[0].response_delete_range.deleted > 0

    async def transaction(self, compares: Sequence[Compare], ops: Sequence[Op]) -> TxnResult:
        response = await self._txn(compares, ops)
        revision = int(response.header.revision)
        if response.succeeded:
            return TxnResult(True, revision)
        conflicts = []
        for compare, answer in zip(compares, response.responses, strict=True):
            kvs = answer.response_range.kvs
            if (kvs[0].mod_revision if kvs else 0) != compare.version:
                conflicts.append(compare.key)
        return TxnResult(False, revision, tuple(conflicts))

    async def _txn(self, compares: Sequence[Compare], ops: Sequence[Op]) -> Any:
        check_txn(compares, ops)
        request = rpc.TxnRequest(
            compare=[
                rpc.Compare(
                    key=encode_key(c.key),
                    target=rpc.Compare.CompareTarget.MOD,
                    result=rpc.Compare.CompareResult.EQUAL,
                    mod_revision=c.version,
                )
                for c in compares
            ],
            success=[_request_op(op) for op in ops],
            failure=[
                rpc.RequestOp(request_range=rpc.RangeRequest(key=encode_key(c.key), keys_only=True))
                for c in compares
            ],
        )
        lease = next((op.lease for op in ops if isinstance(op, Put) and op.lease), None)
        return await self._session.call(
            "txn",
            lambda c: c.kvstub.Txn(request, timeout=self._timeout, metadata=c.metadata),
            lease_id=lease,
        )

    # -- leases -------------------------------------------------------------------------------

    async def grant_lease(self, ttl_s: float, *, keep_alive: bool = True) -> Lease:
        if ttl_s <= 0:
            raise ValueError(f"lease TTL must be positive, not {ttl_s}")
        request = rpc.LeaseGrantRequest(TTL=math.ceil(ttl_s))
        response = await self._session.call(
            "lease grant",
            lambda c: c.leasestub.LeaseGrant(request, timeout=self._timeout, metadata=c.metadata),
        )
        if response.error:
            raise MetadataStoreError(f"etcd lease grant: {response.error}")
        lease = Lease(int(response.ID), float(response.TTL))
        if keep_alive:
            self._keeper.start(lease)
        return lease

    async def revoke_lease(self, lease_id: int) -> None:
        await self._keeper.stop(lease_id)
        request = rpc.LeaseRevokeRequest(ID=lease_id)
        with contextlib.suppress(LeaseNotFoundError):  # expired or revoked already
            await self._session.call(
                "lease revoke",
                lambda c: c.leasestub.LeaseRevoke(
                    request, timeout=self._timeout, metadata=c.metadata
                ),
                lease_id=lease_id,
            )

    async def _refresh(self, lease_id: int) -> bool:
        async def keep_alive_once(client: Any) -> bool:
            stream = client.leasestub.LeaseKeepAlive(
                iter([rpc.LeaseKeepAliveRequest(ID=lease_id)]),
                timeout=self._timeout,
                metadata=client.metadata,
            )
            try:
                async for reply in stream:
                    return int(reply.TTL) > 0
                return False
            finally:
                stream.cancel()

        return await self._session.call("lease keep-alive", keep_alive_once)

    # -- history ------------------------------------------------------------------------------

    def watch(self, prefix: str, *, from_revision: int) -> AsyncIterator[WatchEvent]:
        return watch_events(self._session, prefix, from_revision)

    async def compact(self, revision: int) -> None:
        request = rpc.CompactionRequest(revision=revision + 1)
        try:
            await self._session.call(
                "compact",
                lambda c: c.kvstub.Compact(request, timeout=self._timeout, metadata=c.metadata),
            )
        except MetadataStoreError as exc:
            if "future revision" in str(exc):
                raise ValueError(f"compact({revision}): must be below the revision") from exc
            if "compacted" not in str(exc):
                raise

    async def close(self) -> None:
        await self._keeper.close()
        await self._session.close()


def _request_op(op: Op) -> Any:
    if isinstance(op, Delete):
        return rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=encode_key(op.key)))
    return rpc.RequestOp(
        request_put=rpc.PutRequest(key=encode_key(op.key), value=op.value, lease=op.lease or 0)
    )


def _entry(kv: Any) -> Entry:
    return Entry(decode_key(kv.key), bytes(kv.value), int(kv.mod_revision), int(kv.lease) or None)
