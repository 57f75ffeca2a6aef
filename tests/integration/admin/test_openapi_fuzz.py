"""schemathesis against the admin API's own OpenAPI document, served by the real process over a
real broker: no 5xx, every status documented, every body (problem+json included) matching its
schema and content type.

Bounded: a few examples per operation and generation mode (valid and invalid input,
``MAX_EXAMPLES``), derandomized, deadline off (each example is a real Kafka round trip). The
operations that create partitions (POST /v1/topics, POST .../partitions) are left to
``test_topics_api``: random counts up to the API's cap would make thousands of partition logs
on the test broker.
"""

from __future__ import annotations

import itertools

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode, checks

from .admin_process import AdminProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHECKS = [checks.not_a_server_error, checks.status_code_conformance,
          checks.content_type_conformance, checks.response_schema_conformance]
MAX_EXAMPLES = 8


def test_api_conforms_to_its_openapi(admin_service: AdminProcess) -> None:
    # A topic and records for the browse / describe operations to find now and then.
    with httpx.Client(base_url=admin_service.url, timeout=30.0) as client:
        assert client.post("/v1/topics", json={"name": "a", "partitions": 1}).status_code == 201
        assert client.post("/v1/topics/a/records", json=[{"value": "x"}]).status_code == 200
    schema = schemathesis.openapi.from_url(f"{admin_service.url}/openapi.json").exclude(
        method="POST", path_regex=r"^/v1/topics(/\{name\}/partitions)?$")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14
    for operation, mode in itertools.product(operations, GenerationMode):
        # schemathesis' own pytest plugin does not load under pytest 9: drive hypothesis here.
        takes_input = operation.path_parameters or operation.query or operation.body
        if mode is GenerationMode.NEGATIVE and not takes_input:
            continue  # nothing to make invalid (GET /healthz)
        @given(case=operation.as_strategy(mode))
        @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def conforms(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=CHECKS, timeout=30)

        conforms()
    with httpx.Client(base_url=admin_service.url, timeout=30.0) as client:
        answered = [line for line in client.get("/metrics").text.splitlines()
                    if line.startswith("strata_admin_requests_total")]
    assert sum(float(line.rsplit(" ", 1)[1]) for line in answered) > 2 * len(operations)
    assert not [line for line in answered if 'status="5' in line], answered
