"""The REST API's ``group_type``: Kafka's admin ``GroupType`` from confluent-kafka's listing or
description, and its place in the OpenAPI document (the ``type`` field keeps its meaning)."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupType

from strata.admin.app import create_app
from strata.admin.kafka_gateway import AdminSettings
from strata.admin.routers.groups import group_type


def test_group_type_follows_kafka_group_type() -> None:
    assert group_type(ConsumerGroupType.CONSUMER, simple=False) == "consumer"
    assert group_type(ConsumerGroupType.CLASSIC, simple=False) == "classic"
    assert group_type(ConsumerGroupType.CLASSIC, simple=True) == "simple"
    assert group_type(ConsumerGroupType.UNKNOWN, simple=True) == "simple"
    assert group_type(ConsumerGroupType.UNKNOWN, simple=False) == "classic"


def test_openapi_documents_group_type_beside_type() -> None:
    schemas = create_app(AdminSettings("127.0.0.1:1")).openapi()["components"]["schemas"]
    for model in ("GroupSummary", "GroupDescription"):
        field = schemas[model]["properties"]["group_type"]
        options = field.get("anyOf", [field])
        assert ["classic", "consumer", "simple"] in [o.get("enum") for o in options]
    assert schemas["GroupSummary"]["properties"]["type"]["enum"] == ["consumer", "simple"]
