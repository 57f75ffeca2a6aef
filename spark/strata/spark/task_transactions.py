"""The transactions of the ``strata`` sink's tasks, committed by the Spark driver.

Why the driver: a Python Data Source writer cannot tell, inside ``write()``, whether its input
ended because the task's rows were all written or because something upstream failed (a UDF
raising ends the Arrow stream the writer reads exactly like the last row does, and Spark then
fails the task). So a task never commits; it writes its rows in a transaction, flushes them and
hands :class:`PendingTransaction` (the ``transactional.id`` and the producer id and epoch
:func:`producer_identity` learnt right after ``InitProducerId``) to the driver in its commit
message. Spark calls the writer's ``commit(messages)`` only once every task succeeded; it
sends ``EndTxn(commit)`` for each (:func:`end_transaction`), as Flink's Kafka sink resumes
its pre-committed transactions. ``abort(messages)`` ends the successful tasks' transactions
with ``EndTxn(abort)`` and fences every other task's id (:func:`fence`: ``InitProducerId``
aborts whatever transaction that id left open), so a failed job leaves nothing visible and
nothing open.

Invariants: the producer id and epoch are read right after the task's own ``InitProducerId``,
so an attempt that was fenced later (a speculative or retried attempt of the same partition)
cannot be committed: its ``EndTxn`` fails with ``PRODUCER_FENCED``/``INVALID_PRODUCER_EPOCH``
and the driver raises; a task with no rows has nothing to commit (``Empty`` transaction).
Requests go through :class:`~strata.spark.broker_connection.BrokerConnection` (PLAINTEXT,
SSL, SASL PLAIN/SCRAM), retried while the coordinator moves or loads.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from confluent_kafka import Producer

from strata.protocol import ApiKey, ErrorCode
from strata.spark import broker_connection
from strata.spark.broker_connection import BrokerConnection
from strata.spark.options import StrataOptionError

FIND_COORDINATOR_VERSION: Final = 4
DESCRIBE_TRANSACTIONS_VERSION: Final = 0
END_TXN_VERSION: Final = 3
TRANSACTION_KEY_TYPE: Final = 1
REQUEST_DEADLINE_S: Final = 60.0
_RETRY_S: Final = 0.1
_RETRIABLE: Final = frozenset({
    ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator, ErrorCode.concurrent_transactions,
})


class TransactionError(RuntimeError):
    """A task's transaction could not be committed or aborted; the message names it."""


@dataclass(frozen=True)
class PendingTransaction:
    """A task's flushed, uncommitted transaction: what ``EndTxn`` needs."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def check_login(client_config: Mapping[str, Any]) -> None:
    """Plan time: the driver and the tasks must be able to reach the coordinators directly."""
    if not broker_connection.supported(client_config):
        raise StrataOptionError(
            "kafka.transactional.id.prefix: needs a PLAINTEXT, SSL or SASL PLAIN/SCRAM login "
            "(the driver commits the tasks' transactions over its own connection)")


class _Retriable(Exception):
    pass


def _bootstrap(client_config: Mapping[str, Any]) -> list[tuple[str, int]]:
    result = []
    for item in str(client_config["bootstrap.servers"]).split(","):
        host, _, port = item.strip().rpartition(":")
        result.append((host.strip("[]") or "127.0.0.1", int(port)))
    return result


def _connect(client_config: Mapping[str, Any], host: str, port: int) -> BrokerConnection:
    return BrokerConnection(host, port, str(client_config.get("client.id", "strata-spark")),
                            broker_connection.security_of(client_config))


def _coordinator(client_config: Mapping[str, Any], txid: str) -> BrokerConnection:
    problems: list[str] = []
    for host, port in _bootstrap(client_config):
        try:
            connection = _connect(client_config, host, port)
        except OSError as exc:
            problems.append(f"{host}:{port}: {exc}")
            continue
        try:
            answer = connection.request(ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_VERSION, {
                "key_type": TRANSACTION_KEY_TYPE, "coordinator_keys": [txid]}).coordinators[0]
        finally:
            connection.close()
        if answer.error_code != ErrorCode.none:
            raise _Retriable(f"FindCoordinator answered {ErrorCode(answer.error_code).name}")
        return _connect(client_config, answer.host, int(answer.port))
    raise _Retriable(f"no bootstrap server answered: {'; '.join(problems)}")


def _ask(client_config: Mapping[str, Any], txid: str, api_key: int, version: int,
         fields: dict[str, Any], what: str) -> Any:
    """Send one request to ``txid``'s coordinator, retrying while it moves or loads; the
    response, whose error code the caller checks (retriable ones are retried here)."""
    deadline = time.monotonic() + REQUEST_DEADLINE_S
    problem = "no answer"
    while time.monotonic() < deadline:
        try:
            connection = _coordinator(client_config, txid)
            try:
                response = connection.request(api_key, version, fields)
            finally:
                connection.close()
        except (_Retriable, OSError) as exc:
            problem = str(exc)
        else:
            error = getattr(response, "error_code", None)
            if error is None:  # DescribeTransactions: one answer per id
                error = response.transaction_states[0].error_code
            if error not in _RETRIABLE:
                return response
            problem = f"answered {ErrorCode(error).name}"
        time.sleep(_RETRY_S)
    raise TransactionError(f"transactional.id {txid}: {what} failed for "
                           f"{REQUEST_DEADLINE_S:.0f}s: {problem}")


def producer_identity(client_config: Mapping[str, Any], txid: str) -> tuple[int, int]:
    """``(producer_id, producer_epoch)`` the coordinator holds for ``txid`` now (task side,
    right after the task's producer initialised it)."""
    response = _ask(client_config, txid, ApiKey.DESCRIBE_TRANSACTIONS,
                    DESCRIBE_TRANSACTIONS_VERSION, {"transactional_ids": [txid]},
                    "DescribeTransactions")
    state = response.transaction_states[0]
    if state.error_code != ErrorCode.none:
        raise TransactionError(f"transactional.id {txid}: DescribeTransactions answered "
                               f"{ErrorCode(state.error_code).name}")
    return int(state.producer_id), int(state.producer_epoch)


def end_transaction(client_config: Mapping[str, Any], pending: PendingTransaction,
                    commit: bool) -> None:
    """``EndTxn`` for a task's transaction (driver side); raises naming the id if the
    coordinator refuses (e.g. the attempt was fenced, or the transaction timed out)."""
    txid = pending.transactional_id
    response = _ask(client_config, txid, ApiKey.END_TXN, END_TXN_VERSION, {
        "transactional_id": txid, "producer_id": pending.producer_id,
        "producer_epoch": pending.producer_epoch, "committed": commit},
        "EndTxn")
    if response.error_code != ErrorCode.none:
        raise TransactionError(
            f"transactional.id {txid}: EndTxn({'commit' if commit else 'abort'}) answered "
            f"{ErrorCode(response.error_code).name} (fenced by a later attempt, or aborted "
            "after transaction.timeout.ms)")


def fence(client_config: Mapping[str, Any], txids: Iterable[str], timeout_s: float) -> None:
    """Initialise each id with a new producer: the coordinator aborts the transaction the id
    left open (a failed task's) and bumps its epoch, so no earlier producer can write."""
    for txid in txids:
        producer = Producer({**client_config, "transactional.id": txid})
        producer.init_transactions(timeout_s)
        producer.flush(0)
