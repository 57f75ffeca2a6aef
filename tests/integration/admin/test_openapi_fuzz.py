"""schemathesis against the admin API's own OpenAPI document, served by the real process over a
real broker: no 5xx, every status documented, every body (problem+json included) matching its
schema and content type.

Bounded: a few examples per operation and generation mode (valid and invalid input,
``MAX_EXAMPLES``), derandomized, deadline off (each example is a real Kafka round trip). The
operations that create partitions (POST /v1/topics, POST .../partitions) run too, with every
generated count the API would accept folded down to 1-3 (``fold_counts``): random counts up to
the API's cap would make thousands of partition logs on the test broker. Counts the API must
refuse (over ``MAX_PARTITIONS``, below -1) are sent as generated and must be 4xx.
"""

from __future__ import annotations

import itertools
import os

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode, checks

from strata.admin.models import MAX_PARTITIONS

from .admin_process import AdminProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHECKS = [checks.not_a_server_error, checks.status_code_conformance,
          checks.content_type_conformance, checks.response_schema_conformance]
# ``STRATA_FUZZ_EXAMPLES`` widens a run by hand (CI keeps the default).
MAX_EXAMPLES = int(os.environ.get("STRATA_FUZZ_EXAMPLES", "8"))


def fold_counts(case: schemathesis.Case) -> schemathesis.Case:
    """Partition counts the API accepts (2..MAX_PARTITIONS) become 1-3; the others stay."""
    body = case.body
    if isinstance(body, dict):
        for key in ("partitions", "count"):
            value = body.get(key)
            # JSON's 2747.0 is an integer too (JSON Schema and pydantic agree): fold it as well.
            if isinstance(value, int | float) and not isinstance(value, bool) and \
                    3 < value <= MAX_PARTITIONS and value == int(value):
                body[key] = int(value) % 3 + 1
    return case


def test_api_conforms_to_its_openapi(isolated_admin: AdminProcess) -> None:
    admin_service = isolated_admin
    # A topic and records for the browse / describe operations to find now and then.
    with httpx.Client(base_url=admin_service.url, timeout=30.0) as client:
        assert client.post("/v1/topics", json={"name": "a", "partitions": 1}).status_code == 201
        assert client.post("/v1/topics/a/records", json=[{"value": "x"}]).status_code == 200
    schema = schemathesis.openapi.from_url(f"{admin_service.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 16
    for operation, mode in itertools.product(operations, GenerationMode):
        # schemathesis' own pytest plugin does not load under pytest 9: drive hypothesis here.
        takes_input = operation.path_parameters or operation.query or operation.body
        if mode is GenerationMode.NEGATIVE and not takes_input:
            continue  # nothing to make invalid (GET /healthz)
        @given(case=operation.as_strategy(mode).map(fold_counts))
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
