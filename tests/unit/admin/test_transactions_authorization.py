"""The transaction routes' ACL checks without a broker (Kafka's rules for the APIs behind
them): describe needs TransactionalId Describe, abort Topic Write and ClusterAction; a caller
who has them goes on to the (unreachable) cluster: 503, not 403."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from strata.admin.problems import PROBLEM_MEDIA_TYPE
from strata.security.acl import CLUSTER_NAME, AclOperation, ResourceType

from .test_admin_security import _allow, _app, _basic

ABORT = {"topic": "orders", "partition": 0, "start_offset": 5}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    bindings = [
        _allow("User:alice", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, "tx-a"),
        _allow("User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders"),
        _allow("User:alice", AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME),
        _allow("User:bob", AclOperation.WRITE, ResourceType.TOPIC, "orders"),
    ]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=_app(bindings)),
                                 base_url="http://admin.test") as test_client:
        yield test_client


@pytest.mark.parametrize(("method", "path", "body", "title", "needed"), [
    ("GET", "/v1/transactions/tx-a", None, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
     "Describe TransactionalId 'tx-a'"),
    ("POST", "/v1/transactions/abort", ABORT, "CLUSTER_AUTHORIZATION_FAILED",
     "ClusterAction Cluster"),
])
async def test_a_caller_without_the_right_gets_403_with_kafkas_name(
        client: httpx.AsyncClient, method: str, path: str, body: object, title: str,
        needed: str) -> None:
    for who in (_basic("carol", "carol-pw"), "Bearer bob-token"):
        response = await client.request(method, path, headers={"Authorization": who},
                                         json=body)
        assert response.status_code == 403, (who, response.text)
        assert response.headers["content-type"] == PROBLEM_MEDIA_TYPE
        problem = response.json()
        if who.startswith("Bearer"):  # bob may write the topic: refused on what he lacks
            assert problem["title"] == title
            assert problem["detail"] == f"User:bob is not allowed to {needed}", problem
        else:  # carol has no ACL at all: refused on the first check
            assert problem["title"] in (title, "TOPIC_AUTHORIZATION_FAILED")


async def test_abort_needs_write_on_the_topic_first(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/transactions/abort", json={**ABORT, "topic": "other"},
                                 headers={"Authorization": "Bearer alice-token"})
    assert response.status_code == 403
    assert response.json()["title"] == "TOPIC_AUTHORIZATION_FAILED"


async def test_allowed_callers_reach_the_cluster(client: httpx.AsyncClient) -> None:
    alice = {"Authorization": "Bearer alice-token"}
    for method, path, body in (("GET", "/v1/transactions/tx-a", None),
                               ("POST", "/v1/transactions/abort", ABORT),
                               ("GET", "/v1/transactions", None)):
        response = await client.request(method, path, headers=alice, json=body)
        assert response.status_code == 503, response.text
