"""IncrementalAlterConfigs of one broker config key over the Kafka protocol.

Owns the request for the BROKER resource: a node id (sent to that broker, as Kafka's admin
client does) or ``""``, the cluster-wide default — which librdkafka cannot name (an empty
resource name), hence a request of our own through ``bootstrap_request``. A refusal (a
read-only key, a bad value) is a ``KafkaClientError`` with Kafka's error name and message.
"""

from __future__ import annotations

from typing import Final

from strata.client.bootstrap_request import bootstrap_request
from strata.client.client_quotas import QuotaTarget
from strata.client.kafka_errors import KafkaClientError
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import kafka_error_name

BROKER_RESOURCE: Final = 4  # Kafka's ConfigResource.Type.BROKER
OP_SET: Final = 0
OP_DELETE: Final = 1


async def alter_broker_config(target: QuotaTarget, address: str | None, resource_name: str,
                              key: str, value: str | None) -> None:
    """IncrementalAlterConfigs of one key of the BROKER resource ``resource_name`` (a node
    id, sent to that broker at ``address`` as Kafka's admin client does; or ``""``: the
    cluster-wide default, to any broker): SET to ``value``, or DELETE when None. librdkafka
    cannot name the default resource (an empty name), hence the request of our own."""
    operation = OP_DELETE if value is None else OP_SET
    response = await bootstrap_request(
        address or target.bootstrap, target.security, target.timeout_s, target.client_id,
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
        {"resources": [{"resource_type": BROKER_RESOURCE, "resource_name": resource_name,
                        "configs": [{"name": key, "config_operation": operation,
                                     "value": value}]}],
         "validate_only": False})
    for result in response.responses:
        if int(result.error_code):
            raise KafkaClientError(kafka_error_name(int(result.error_code)),
                                   result.error_message or f"{key}: refused", subject="",
                                   api="IncrementalAlterConfigs")
