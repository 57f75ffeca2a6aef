"""The console's security forms without a broker: an ACL form read as the binding the brokers
would store (and refused with the reason), a quota form's entity and the quota table's rows,
and a tailed record's JSON (shown as the page shows it)."""

from __future__ import annotations

import pytest

from strata.admin.console.acls import binding_of
from strata.admin.console.quotas import DEFAULT, entity_of, rows_of
from strata.admin.console.record_view import RawRecord, View
from strata.admin.console.records import record_json
from strata.admin.models import ClientQuota, QuotaEntityPart
from strata.admin.problems import ProblemError
from strata.security.acl import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


def test_an_acl_form_is_the_binding_the_brokers_store() -> None:
    binding = binding_of({"resource_type": "TOPIC", "pattern_type": "PREFIXED",
                          "name": "audit-", "principal": "User:auditor",
                          "operation": "READ", "permission": "DENY"})
    assert (binding.pattern.resource_type, binding.pattern.pattern_type,
            binding.pattern.name) == (ResourceType.TOPIC, PatternType.PREFIXED, "audit-")
    assert (binding.entry.principal, binding.entry.host, binding.entry.operation,
            binding.entry.permission_type) == ("User:auditor", "*", AclOperation.READ,
                                               AclPermissionType.DENY)
    cluster = binding_of({"resource_type": "Cluster", "principal": "User:ops",
                          "operation": "Alter"})
    assert cluster.pattern.name == "kafka-cluster"
    assert cluster.entry.permission_type is AclPermissionType.ALLOW


@pytest.mark.parametrize("fields", [
    {"resource_type": "TOPIC", "name": "t", "principal": "auditor", "operation": "READ"},
    {"resource_type": "TOPIC", "name": "", "principal": "User:a", "operation": "READ"},
    {"resource_type": "PLANET", "name": "t", "principal": "User:a", "operation": "READ"},
    {"resource_type": "TOPIC", "name": "t", "principal": "User:a", "operation": "FLY"},
    {"resource_type": "TOPIC", "name": "t", "principal": "User:a", "operation": "ANY"},
])
def test_a_wrong_acl_form_is_refused_with_the_reason(fields: dict[str, str]) -> None:
    with pytest.raises(ProblemError) as refused:
        binding_of(fields)
    assert refused.value.status == 422 and refused.value.title == "VALIDATION_ERROR"


def test_a_quota_form_names_an_entity_and_the_table_rows_send_it_back() -> None:
    entity = entity_of({"user": "bob", "client_id": DEFAULT})
    assert [(p.type, p.name) for p in entity] == [("user", "bob"), ("client-id", None)]
    with pytest.raises(ProblemError):
        entity_of({"user": " ", "client_id": ""})
    rows = rows_of([ClientQuota(entity=entity, quotas={"producer_byte_rate": 1024.0,
                                                       "consumer_byte_rate": 2048.0}),
                    ClientQuota(entity=[QuotaEntityPart(type="client-id", name="app")],
                                quotas={"request_percentage": 50.0})])
    assert [(r.entity, r.user, r.client_id, r.key, r.value) for r in rows] == [
        ("client-id app", None, "app", "request_percentage", 50.0),
        ("user bob, client-id <default>", "bob", DEFAULT, "consumer_byte_rate", 2048.0),
        ("user bob, client-id <default>", "bob", DEFAULT, "producer_byte_rate", 1024.0)]


def test_a_tailed_record_is_shown_as_the_page_shows_it() -> None:
    record = RawRecord(partition=0, offset=7, timestamp=0, timestamp_type="CreateTime", key=None,
                       value=b'{"a":1}', headers=[("h", b"<b>"), ("n", None)])
    assert record_json(record, View.JSON) == {
        "offset": 7, "timestamp": "1970-01-01T00:00:00.000Z", "timestamp_type": "CreateTime",
        "key": None, "value": '{\n  "a": 1\n}', "headers": [["h", "<b>"], ["n", None]]}
