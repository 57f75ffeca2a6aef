"""One Kafka request to the first bootstrap broker that answers, for the APIs librdkafka lacks.

Owns how Strata's tools send the requests confluent-kafka has no call for (partition
reassignments, client quotas): over ``BrokerClient``, to each ``host:port`` of the bootstrap
list in turn until one answers, logged in with the ``ClientSecurity`` of the same
librdkafka-style properties the tools give their confluent-kafka clients (the caller reads
them with ``client_properties.client_security``). Every attempt is bounded by ``timeout_s``;
when no broker answers, the one unreachable ``KafkaClientError`` the confluent-kafka calls
raise too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strata.client.broker_client import BrokerClient, BrokerUnavailableError
from strata.client.kafka_errors import KafkaClientError
from strata.client.security import ClientSecurity


async def bootstrap_request(bootstrap: str, security: ClientSecurity | None,
                            timeout_s: float, client_id: str, api_key: int, version: int,
                            fields: Mapping[str, Any]) -> Any:
    """The decoded response of the first broker of ``bootstrap`` that answers."""
    last = "no bootstrap server given"
    for address in filter(None, (a.strip() for a in bootstrap.split(","))):
        host, _, port = address.rpartition(":")
        client = BrokerClient(host.strip("[]"), int(port), client_id=client_id,
                              request_timeout_s=timeout_s, connect_timeout_s=timeout_s,
                              security=security)
        try:
            return await client.request(api_key, version, fields)
        except BrokerUnavailableError as exc:
            last = str(exc)
        finally:
            await client.close()
    raise KafkaClientError("_TRANSPORT", last, subject=f"the cluster at {bootstrap}",
                           unreachable=True, reason=last, bootstrap=bootstrap,
                           timeout_s=timeout_s)
