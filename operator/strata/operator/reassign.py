"""AlterPartitionReassignments (api key 45, v0, flexible) sent to the controller with Strata's own
Kafka protocol client (``strata.client.broker_client.BrokerClient`` and the
``strata.protocol`` codec): confluent-kafka's AdminClient has no call for it. The operator still
talks to brokers only over the Kafka protocol.

Security: the connection logs in exactly as the operator's confluent-kafka clients do, from the
same librdkafka properties (``security.protocol``, ``sasl.*``, ``ssl.*``, PEM text included),
turned into a ``ClientSecurity`` by ``strata.client.client_properties``: TLS to the
inter-broker listener, then SASL (PLAIN or SCRAM) before the request.

One connection per call: ApiVersions (v0) first, then the request; each step bounded by
``timeout`` (connect and login included). Failures:

* ``ReassignmentNotServed``: the broker does not advertise the API, or closed the connection
  without an answer, as Kafka brokers do for an api key they do not serve; the caller turns it
  into "the scale-down waits".
* ``ReassignmentUnavailable`` (its base): the controller could not be asked at all —
  unreachable, TLS refused, login refused, unusable client properties — with the reason.

Per-partition errors come back by name (Kafka's error names).

ListPartitionReassignments (api key 46, v0) goes the same way: ``ongoing_reassignments``
returns the partitions the controller is still moving (their adding and removing replicas);
the rebalance waits for it to be empty before the next batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from strata.client.broker_client import BrokerClient, BrokerUnavailableError
from strata.client.client_properties import ClientPropertiesError, client_security
from strata.client.security import ClientSecurity
from strata.protocol.api_keys import ApiKey

TopicPartition = tuple[str, int]

API_VERSION: Final = 0
CLIENT_ID: Final = "strata-operator"


class ReassignmentUnavailable(RuntimeError):
    """The controller could not be asked (unreachable, TLS or login refused)."""


class ReassignmentNotServed(ReassignmentUnavailable):
    """The controller closed the connection without answering AlterPartitionReassignments."""


def request_fields(plan: Mapping[TopicPartition, tuple[int, ...]],
                   timeout_ms: int) -> dict[str, Any]:
    """The version-neutral request moving each partition to its new replica list."""
    topics: dict[str, list[dict[str, object]]] = {}
    for (topic, partition), replicas in sorted(plan.items()):
        topics.setdefault(topic, []).append({"partition_index": partition,
                                             "replicas": list(replicas)})
    return {"timeout": timeout_ms,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}


def security_of(client_config: Mapping[str, str]) -> ClientSecurity | None:
    """The login of the operator's librdkafka ``client_config`` (None: PLAINTEXT)."""
    try:
        return client_security(client_config)
    except ClientPropertiesError as exc:
        raise ReassignmentUnavailable(f"the operator's client settings: {exc}") from None


def alter_partition_reassignments(host: str, port: int,
                                  plan: Mapping[TopicPartition, tuple[int, ...]],
                                  timeout: float,
                                  client_config: Mapping[str, str] | None = None,
                                  ) -> dict[TopicPartition, str]:
    """Send the plan to the controller at ``host:port``, logged in per ``client_config``
    (librdkafka properties); returns the error name per partition that was refused (empty: all
    accepted). A top-level error applies to every partition."""
    security = security_of(client_config or {})
    body = asyncio.run(_send(host, port, request_fields(plan, int(timeout * 1000)), timeout,
                             security))
    if int(body.error_code) != 0:
        name = body.error_code.name.upper()
        return {tp: name for tp in plan}
    return {(str(t.name), int(p.partition_index)): p.error_code.name.upper()
            for t in body.responses for p in t.partitions if int(p.error_code) != 0}


def ongoing_reassignments(host: str, port: int, timeout: float,
                          client_config: Mapping[str, str] | None = None,
                          ) -> dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every partition with a reassignment in progress: (adding, removing) replicas."""
    security = security_of(client_config or {})
    body = asyncio.run(_send(host, port, {"timeout_ms": int(timeout * 1000), "topics": None},
                             timeout, security, ApiKey.LIST_PARTITION_REASSIGNMENTS))
    if int(body.error_code) != 0:
        raise ReassignmentUnavailable(
            f"ListPartitionReassignments: {body.error_code.name.upper()} "
            f"{body.error_message or ''}".strip())
    return {(str(t.name), int(p.partition_index)): (tuple(int(r) for r in p.adding_replicas),
                                                    tuple(int(r) for r in p.removing_replicas))
            for t in body.topics for p in t.partitions}


def _closed_by_peer(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, asyncio.IncompleteReadError):
            return True
        exc = exc.__cause__
    return False


async def _send(host: str, port: int, fields: Mapping[str, Any], timeout_s: float,
                security: ClientSecurity | None,
                api: ApiKey = ApiKey.ALTER_PARTITION_REASSIGNMENTS) -> Any:
    """ApiVersions first (connects and logs in; is the API advertised?), then the request."""
    client = BrokerClient(host, port, client_id=CLIENT_ID, request_timeout_s=timeout_s,
                          connect_timeout_s=timeout_s, security=security)
    try:
        try:
            versions = await client.request(ApiKey.API_VERSIONS, 0, {})
        except BrokerUnavailableError as exc:
            raise ReassignmentUnavailable(f"controller {host}:{port}: {exc}") from None
        name = "".join(part.title() for part in api.name.split("_"))
        if not any(int(k.api_key) == api for k in versions.api_keys):
            raise ReassignmentNotServed(f"controller {host}:{port} does not advertise {name}")
        try:
            return await client.request(api, API_VERSION, fields)
        except BrokerUnavailableError as exc:
            if _closed_by_peer(exc):
                raise ReassignmentNotServed(
                    f"controller {host}:{port} closed the connection without an answer "
                    f"({name} not served?)") from None
            raise ReassignmentUnavailable(f"controller {host}:{port}: {exc}") from None
    finally:
        await client.close()
