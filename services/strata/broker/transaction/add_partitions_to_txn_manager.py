"""``AddPartitionsToTxnManager``: a partition leader's questions to the transaction coordinator.

Kafka's ``AddPartitionsToTxnManager`` (KIP-890). Before a transactional append whose producer
has no open transaction on the partition (``Log.maybe_start_transaction_verification``), the
leader sends the coordinator of the ``transactional_id`` an inter-broker AddPartitionsToTxn
(v5, by transaction): ``verify_only`` to check that the partition is in the transaction, or,
for a transactions v2 client (``TransactionSupportedOperation.ADD_PARTITION``), to add it. The
answer, translated by ``transaction_verification.coordinator_error``, is one error per
partition; an empty map means every partition is verified.

Where the question goes: the leader of the id's ``__transaction_state`` partition
(``TransactionRuntime.coordinator_node``). This broker is served in-process (``local_handler``:
the broker's own AddPartitionsToTxn handler, called as the broker); another broker over the
inter-broker client (``BrokerClient``, one per broker, its address from ``broker_address``).
No coordinator known: COORDINATOR_NOT_AVAILABLE; a lost connection or timeout:
NETWORK_EXCEPTION; a coordinator that does not know v4+ (UNSUPPORTED_VERSION): verification is
skipped, as Kafka does. One request per produce (Kafka batches the questions of concurrent
requests per coordinator; a Python broker gains little from it). Event-loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

from strata.broker.transaction.transaction_metadata import TopicPartition
from strata.broker.transaction.transaction_runtime import TransactionRuntime
from strata.broker.transaction.transaction_verification import (
    ADD_PARTITIONS_TO_TXN_BROKER_VERSION,
    TransactionSupportedOperation,
    coordinator_error,
)
from strata.client.broker_client import BrokerClient, BrokerUnavailableError
from strata.client.security import ClientSecurity
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_request

logger = logging.getLogger(__name__)

REQUEST_TIMEOUT_S: Final = 30.0
LocalHandler = Callable[[Any], Awaitable[Any]]
"""An AddPartitionsToTxn request (kio) -> its response, served by this broker in-process."""


class AddPartitionsToTxnManager:
    """See the module docstring."""

    def __init__(self, *, node_id: int, runtime: TransactionRuntime,
                 local_handler: LocalHandler) -> None:
        self.node_id = node_id
        self.runtime = runtime
        self.local_handler = local_handler
        self.broker_address: Callable[[int], tuple[str, int] | None] | None = None
        self.security: ClientSecurity | None = None
        self._clients: dict[tuple[int, str, int], BrokerClient] = {}

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    async def verify_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: Iterable[TopicPartition], operation: TransactionSupportedOperation,
    ) -> dict[TopicPartition, ErrorCode]:
        """The partitions that failed verification, with their errors (empty: all verified)."""
        wanted = list(dict.fromkeys(partitions))
        if not wanted:
            return {}
        node = self.runtime.coordinator_node(transactional_id)
        if node is None or node < 0:
            return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
        fields = _request_fields(transactional_id, producer_id, producer_epoch, wanted,
                                 operation.verify_only)
        try:
            if node == self.node_id:
                response = await self.local_handler(build_request(
                    ApiKey.ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_TO_TXN_BROKER_VERSION, fields))
            else:
                response = await self._send_remote(node, fields)
        except (BrokerUnavailableError, ConnectionError, TimeoutError) as exc:
            logger.info("AddPartitionsToTxn to broker %d failed: %s", node, exc)
            return dict.fromkeys(wanted, ErrorCode.network_exception)
        top = int(response.error_code)
        if top == ErrorCode.unsupported_version:
            return {}
        if top != ErrorCode.none:
            return dict.fromkeys(wanted, coordinator_error(top, operation))
        errors: dict[TopicPartition, ErrorCode] = {}
        answered: set[TopicPartition] = set()
        for txn in response.results_by_transaction:
            for topic in txn.topic_results:
                for result in topic.results_by_partition:
                    tp = (str(topic.name), int(result.partition_index))
                    answered.add(tp)
                    if result.partition_error_code != ErrorCode.none:
                        errors[tp] = coordinator_error(int(result.partition_error_code),
                                                       operation)
        for tp in wanted:  # a coordinator that left a partition out did not verify it
            if tp not in answered:
                errors[tp] = ErrorCode.invalid_txn_state
        return errors

    async def _send_remote(self, node: int, fields: Mapping[str, Any]) -> Any:
        address = self.broker_address(node) if self.broker_address else None
        if address is None:
            raise BrokerUnavailableError(f"no address for broker {node}")
        key = (node, *address)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = BrokerClient(
                address[0], address[1], client_id=f"strata-txn-verification-{self.node_id}",
                request_timeout_s=REQUEST_TIMEOUT_S, security=self.security)
        return await client.request(ApiKey.ADD_PARTITIONS_TO_TXN,
                                    ADD_PARTITIONS_TO_TXN_BROKER_VERSION, fields)


def _request_fields(transactional_id: str, producer_id: int, producer_epoch: int,
                    partitions: list[TopicPartition], verify_only: bool) -> dict[str, Any]:
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    return {"transactions": [{
        "transactional_id": transactional_id, "producer_id": producer_id,
        "producer_epoch": producer_epoch, "verify_only": verify_only,
        "topics": [{"name": topic, "partitions": indexes}
                   for topic, indexes in by_topic.items()],
    }]}
