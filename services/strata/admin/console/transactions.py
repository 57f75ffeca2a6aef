"""``/console/transactions``: transactions — the list and one transactional id's state.

Each page is the REST route of the same name, rendered (``strata.admin.routers.transactions``,
over ``strata.client.transactions``):

* ``GET /console/transactions``: ListTransactions on every broker, optionally filtered by state
  (``?state=Ongoing``); only the ids the caller may Describe;
* ``GET /console/transactions/{id}``: DescribeTransactions at the id's coordinator — state,
  producer id and epoch, timeout, how long the open transaction has run, its partitions and
  (DescribeProducers at each leader) the offset it starts at there, with an Abort button;
* ``GET /console/transactions/hanging?topic=|broker_id=``: ``kafka-transactions.sh
  find-hanging`` (the REST route ``GET /v1/transactions/hanging`` itself), each with Abort;
* ``POST /console/transactions/abort``: ``topic``, ``partition``, ``start_offset`` — the REST
  route ``POST /v1/transactions/abort`` itself (Kafka's ``Admin.abortTransaction``: the
  producer whose transaction starts there, then WriteTxnMarkers ABORT to the leader).

Authorization, the REST routes': TransactionalId Describe to see an id; find-hanging Topic
Read (or Cluster Describe by broker); abort Topic Write and Cluster ClusterAction (the Abort
buttons are shown only with ClusterAction).
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute, int_field
from strata.admin.routers.transactions import _list, abort_transaction, find_hanging
from strata.admin.transaction_models import HangingTransaction, TransactionAbort
from strata.client import transactions as txn
from strata.security.acl import AclOperation, ResourceType

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)

TransactionalId = Annotated[str, Path(min_length=1, max_length=8191)]
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
          "CompleteAbort", "PrepareEpochFence", "Dead")


@router.get("/transactions")
async def transactions(
    console: ConsoleDep,
    state: Annotated[str, Query(max_length=32)] = "",
) -> Response:
    states = [state] if state in STATES else []
    rows = await console.gateway.call(_list, states, [], -1)
    visible = await console.allowed_names(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                          [row.transactional_id for row in rows])
    rows = sorted((row for row in rows if row.transactional_id in visible),
                  key=lambda row: row.transactional_id)
    return console.render("transactions.html", transactions=rows, states=STATES,
                          state=state if state in STATES else "", section="transactions")


@router.get("/transactions/hanging")
async def hanging(
    console: ConsoleDep,
    topic: Annotated[str, Query(max_length=249)] = "",
    broker_id: Annotated[str, Query(max_length=10)] = "",
    max_transaction_timeout_ms: Annotated[int, Query(ge=0, le=2**63 - 1)] = (
        txn.DEFAULT_MAX_TRANSACTION_TIMEOUT_MS),
) -> Response:
    """``kafka-transactions.sh find-hanging`` by topic or broker (the REST route itself),
    each found transaction with its Abort button."""
    found: list[HangingTransaction] | None = None
    if topic.strip() or broker_id.strip():
        broker = int_field({"broker_id": broker_id}, "broker_id")
        found = await find_hanging(console.gateway, console.access, topic.strip() or None,
                                   None, broker, max_transaction_timeout_ms)
    return console.render("transactions_hanging.html", found=found, topic=topic,
                          broker_id=broker_id, max_ms=max_transaction_timeout_ms,
                          notice="", section="transactions")


@router.post("/transactions/abort")
async def abort(console: ConsoleDep) -> Response:
    """Abort the transaction starting at ``start_offset`` of ``topic``/``partition`` (the
    REST route itself: Topic Write and Cluster ClusterAction, DescribeProducers then
    WriteTxnMarkers ABORT), then back to the page it was asked from."""
    fields = await console.form()
    body = TransactionAbort(topic=fields.get("topic", ""),
                            partition=int_field(fields, "partition", -1),
                            start_offset=int_field(fields, "start_offset", -1))
    done = await abort_transaction(console.gateway, console.access, body)
    back = fields.get("back", "")
    notice = (f"aborted the transaction of producer {done.producer_id} (epoch "
              f"{done.producer_epoch}) on {done.topic}-{done.partition}")
    if back:
        return await _render_transaction(console, back, notice)
    return console.render("transactions_hanging.html", found=None, topic=body.topic,
                          broker_id="", max_ms=txn.DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
                          notice=notice, section="transactions")


async def _open_partitions(console: ConsoleDep, found: txn.TransactionDescription
                           ) -> list[tuple[str, int, int | None]]:
    """Each partition of an open transaction with where the transaction starts there (its
    producer's ``current_txn_start_offset``, DescribeProducers at the leader; None if the
    leader reports none)."""
    out = []
    for topic, partition in found.topic_partitions:
        producers = await console.gateway.call(txn.describe_producers, topic, partition)
        starts = [p.current_txn_start_offset for p in producers
                  if p.producer_id == found.producer_id and p.current_txn_start_offset >= 0]
        out.append((topic, partition, starts[0] if starts else None))
    return out


async def _render_transaction(console: ConsoleDep, transactional_id: str,
                              notice: str = "") -> Response:
    await console.access.require(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                 transactional_id)
    found = await console.gateway.call(txn.describe_transaction, transactional_id)
    start = found.transaction_start_time_ms
    running = None if start is None else max(0, int(time.time() * 1000) - start)
    may_abort = await console.access.allowed(AclOperation.CLUSTER_ACTION,
                                             ResourceType.CLUSTER)
    partitions = (await _open_partitions(console, found) if may_abort
                  else [(t, p, None) for t, p in found.topic_partitions])
    return console.render("transaction.html", txn=found, running_ms=running,
                          partitions=partitions, may_abort=may_abort, notice=notice,
                          section="transactions")


@router.get("/transactions/{transactional_id}")
async def transaction(console: ConsoleDep, transactional_id: TransactionalId) -> Response:
    return await _render_transaction(console, transactional_id)
