"""``/console/transactions``: transactions — the list and one transactional id's state.

Each page is the REST route of the same name, rendered (``strata.admin.routers.transactions``,
over ``strata.client.transactions``):

* ``GET /console/transactions``: ListTransactions on every broker, optionally filtered by state
  (``?state=Ongoing``); only the ids the caller may Describe;
* ``GET /console/transactions/{id}``: DescribeTransactions at the id's coordinator — state,
  producer id and epoch, timeout, how long the open transaction has run, its partitions.

Authorization: TransactionalId Describe, as the REST routes. Aborting a hanging transaction
stays with ``strata transactions abort`` / ``POST /v1/transactions/abort``.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from strata.admin.console.web import PREFIX, ConsoleDep, ConsoleRoute
from strata.admin.routers.transactions import _list
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


@router.get("/transactions/{transactional_id}")
async def transaction(console: ConsoleDep, transactional_id: TransactionalId) -> Response:
    await console.access.require(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                 transactional_id)
    found = await console.gateway.call(txn.describe_transaction, transactional_id)
    start = found.transaction_start_time_ms
    running = None if start is None else max(0, int(time.time() * 1000) - start)
    return console.render("transaction.html", txn=found, running_ms=running,
                          section="transactions")
