"""``TransactionMarkerSender``: the WriteTxnMarkers channel from the coordinator to the leaders.

Kafka's ``TransactionMarkerChannelManager`` send loop around the pure ``TransactionMarkerBook``:
a task drains the book (``build_requests`` with each partition's current leader), sends one
WriteTxnMarkers request per leader broker, and feeds the answers back (``on_response``,
``on_disconnected``); a partition answered with a retriable error (or whose leader is unknown
for now) is sent again after ``RETRY_BACKOFF_MS``, until it is acknowledged. A transaction none
of whose markers waits any more is handed to ``on_completed`` (the runtime writes its
CompleteCommit / CompleteAbort).

Where a request goes: a leader that is this broker is served in-process (``local_writer``:
the broker's WriteTxnMarkers handler, called as the broker itself); another broker gets the
request over
the inter-broker client (``BrokerClient``, one connection per broker, its inter-broker
listener's address from ``broker_address``). Event-loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, cast

from strata.broker.replication.replica_manager import ReplicaManager
from strata.broker.topic_store import TopicStore
from strata.broker.transaction.transaction_markers import (
    WRITE_TXN_MARKERS_VERSION,
    MarkerRequest,
    PendingCompleteTxn,
    TransactionMarkerBook,
    partition_errors,
)
from strata.broker.transaction.transaction_metadata import TopicPartition
from strata.client.broker_client import BrokerClient, BrokerUnavailableError
from strata.client.security import ClientSecurity
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.storage.clock import Clock

logger = logging.getLogger(__name__)

RETRY_BACKOFF_MS: Final = 100
REQUEST_TIMEOUT_S: Final = 30.0

PartitionErrors = dict[int, dict[TopicPartition, int]]
LocalWriter = Callable[[Any], Awaitable[Any]]
"""A WriteTxnMarkers request (kio) -> its response, served by this broker in-process."""


class TransactionMarkerSender:
    """See the module docstring."""

    def __init__(self, *, node_id: int, clock: Clock, replica_manager: ReplicaManager,
                 topic_store: TopicStore, local_writer: LocalWriter,
                 broker_address: Callable[[int], tuple[str, int] | None] | None = None,
                 security: ClientSecurity | None = None) -> None:
        self.node_id = node_id
        self.clock = clock
        self.replica_manager = replica_manager
        self.topic_store = topic_store
        self.local_writer = local_writer
        self.broker_address = broker_address
        self.security = security
        self.book = TransactionMarkerBook()
        self.on_completed: Callable[[PendingCompleteTxn], None] = lambda pending: None
        # In a cluster: the leader of a partition as the metadata has it.
        self.leader_lookup: Callable[[str, int], int | None] | None = None
        self._clients: dict[tuple[int, str, int], BrokerClient] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="strata-transaction-marker-sender")

    async def close(self) -> None:
        tasks = [*self._sending, *([self._task] if self._task is not None else [])]
        self._task = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    def add(self, pending: PendingCompleteTxn) -> list[PendingCompleteTxn]:
        """Start writing ``pending``'s markers; the transactions completed at once."""
        completed = self.book.add(pending)
        self._wake.set()
        return completed

    # ------------------------------------------------------------------ leaders
    def leader_of(self, tp: TopicPartition) -> int | None:
        """The leader's node id, -1 unknown for now, None: the partition does not exist."""
        topic, index = tp
        record = self.topic_store.get(topic)
        if record is None or not 0 <= index < record.partitions:
            return None
        if self.leader_lookup is not None:
            leader = self.leader_lookup(topic, index)
            return -1 if leader is None else leader
        hosted = self.replica_manager.get_partition(topic, index)
        if hosted is None or hosted.log.offline or hosted.leader_id is None:
            return -1
        return int(hosted.leader_id)

    # ------------------------------------------------------------------ sending
    async def pump(self, *, wait: bool = True) -> None:
        """One round: send every queued marker whose leader is known and account for the
        answers; without ``wait`` each request runs as its own task (a slow broker does not
        hold the markers of the others)."""
        requests, completed = self.book.build_requests(self.leader_of)
        for pending in completed:
            self.on_completed(pending)
        if wait:
            await asyncio.gather(*(self._send(request) for request in requests))
            return
        for request in requests:
            task = asyncio.get_running_loop().create_task(self._send(request))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send(self, request: MarkerRequest) -> None:
        try:
            if request.node_id == self.node_id:
                errors = partition_errors(await self.local_writer(
                    request.to_request(WRITE_TXN_MARKERS_VERSION)))
            else:
                errors = await self._send_remote(request)
        except (BrokerUnavailableError, ConnectionError) as exc:
            logger.info("WriteTxnMarkers to broker %d failed: %s", request.node_id, exc)
            self.book.on_disconnected(request)
            return
        except Exception:
            logger.exception("WriteTxnMarkers to broker %d failed", request.node_id)
            self.book.on_disconnected(request)
            return
        results = self.book.on_response(request, errors)
        for tid, tp, error in results.fatal:
            logger.error("the %s marker of %r cannot be written: %s", tp, tid,
                         ErrorCode(error).name)
        for pending in results.cancelled:
            logger.info("the markers of %r are cancelled (fenced)", pending.transactional_id)
        for pending in results.completed:
            self.on_completed(pending)

    async def _send_remote(self, request: MarkerRequest) -> PartitionErrors:
        address = self.broker_address(request.node_id) if self.broker_address else None
        if address is None:
            raise BrokerUnavailableError(f"no address for broker {request.node_id}")
        key = (request.node_id, *address)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = BrokerClient(
                address[0], address[1], client_id=f"strata-txn-markers-{self.node_id}",
                request_timeout_s=REQUEST_TIMEOUT_S, security=self.security)
        response = await client.request(
            ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION,
            cast(Mapping[str, Any], request.to_request(WRITE_TXN_MARKERS_VERSION)))
        return partition_errors(response)

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.pump(wait=False)
            except Exception:
                logger.exception("transaction marker sender failed")
            timeout = RETRY_BACKOFF_MS / 1000 if len(self.book) else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
