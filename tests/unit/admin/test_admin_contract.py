"""The admin API's contract without a broker: Kafka error names → HTTP statuses, input models
that refuse bad input before any Kafka request, an OpenAPI document that names problem+json
for every error status, and the ``strata admin`` / ``python -m strata.admin`` entry points."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
from confluent_kafka import KafkaError
from pydantic import ValidationError
from typer.testing import CliRunner

from strata.admin.app import create_app
from strata.admin.kafka_gateway import AdminSettings, KafkaGateway
from strata.admin.models import MAX_PARTITIONS, ConfigPatch, NewTopic, OffsetReset
from strata.admin.problems import PROBLEM_MEDIA_TYPE, status_for
from strata.cli.main import app as cli
from strata.client.kafka_errors import KafkaClientError


@pytest.mark.parametrize(("name", "status"), [
    ("TOPIC_ALREADY_EXISTS", 409), ("NON_EMPTY_GROUP", 409),
    ("UNKNOWN_TOPIC_OR_PARTITION", 404), ("GROUP_ID_NOT_FOUND", 404),
    ("INVALID_PARTITIONS", 400), ("INVALID_REPLICATION_FACTOR", 400), ("INVALID_CONFIG", 400),
    ("INVALID_TOPIC_EXCEPTION", 400), ("POLICY_VIOLATION", 400), ("MSG_SIZE_TOO_LARGE", 400),
    ("_TRANSPORT", 503), ("NOT_CONTROLLER", 503), ("REQUEST_TIMED_OUT", 504),
    ("_TIMED_OUT", 504), ("UNKNOWN_SERVER_ERROR", 502),
])
def test_kafka_error_statuses(name: str, status: int) -> None:
    assert status_for(name) == status


def test_input_models_refuse_bad_input() -> None:
    assert NewTopic(name="orders").partitions == -1
    for bad in ({"name": "."}, {"name": "a/b"}, {"name": "x", "partitions": 0},
                {"name": "x", "replication_factor": 0}, {"name": "x", "partitions": 10**6},
                {"name": "x", "extra": 1}):
        with pytest.raises(ValidationError):
            NewTopic.model_validate(bad)
    with pytest.raises(ValidationError):
        ConfigPatch()
    with pytest.raises(ValidationError):
        ConfigPatch(set={"a": "1"}, delete=["a"])
    with pytest.raises(ValidationError):
        OffsetReset.model_validate({"to": "offset"})
    assert OffsetReset.model_validate({"to": "timestamp", "timestamp": 5}).timestamp == 5


def test_openapi_documents_problems_for_every_route() -> None:
    spec = create_app(AdminSettings("127.0.0.1:1")).openapi()
    assert spec["components"]["schemas"]["Problem"]["required"] == [
        "type", "title", "status", "detail"]
    for path, methods in spec["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, operation in methods.items():
            for status in ("400", "404", "409", "422", "503", "504"):
                content = operation["responses"][status]["content"]
                assert PROBLEM_MEDIA_TYPE in content, (method, path, status)


def test_cli_entry_points() -> None:
    result = CliRunner().invoke(cli, ["admin", "--help"])
    assert result.exit_code == 0
    for option in ("--bootstrap-servers", "--port", "--host"):
        assert option in result.output
    module = subprocess.run([sys.executable, "-m", "strata.admin", "--help"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert module.returncode == 0 and "--bootstrap-servers" in module.stdout


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/topics", {"name": "x", "partitions": MAX_PARTITIONS + 1}),
    ("/v1/topics", {"name": "x", "partitions": 10_001.0}),
    ("/v1/topics", {"name": "x", "partitions": -2}),
    ("/v1/topics/x/partitions", {"count": MAX_PARTITIONS + 1}),
    ("/v1/topics/x/partitions", {"count": 0}),
])
async def test_absurd_partition_counts_are_refused_before_any_kafka_request(
    path: str, body: dict[str, object]
) -> None:
    """10,001 partitions (or an impossible count) is a 4xx problem naming the field;
    no broker is reachable here, so a request that reached Kafka would fail otherwise."""
    app = create_app(AdminSettings("127.0.0.1:1", 1.0))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://admin.test") as client:
        response = await client.post(path, json=body)
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM_MEDIA_TYPE
    problem = response.json()
    assert problem["status"] == 422 and problem["detail"]
    assert any(("partitions" in e["loc"] or "count" in e["loc"]) for e in problem["errors"])


def test_one_translation_of_kafka_client_errors_into_problems() -> None:
    gateway = KafkaGateway(AdminSettings(bootstrap_servers="127.0.0.1:1"))
    exists = gateway.problem(KafkaClientError.of(KafkaError(36), "topic 'x'", "CreateTopics"))
    assert (exists.status, exists.title, exists.detail) == (
        409, "TOPIC_ALREADY_EXISTS", "topic 'x': Topic already exists")
    missing = gateway.problem(KafkaClientError.unknown_topic("x"))
    assert (missing.status, missing.detail) == (404, "topic 'x' does not exist")
    late = gateway.problem(KafkaClientError("_TIMED_OUT", "no answer about x within 1s",
                                            subject="x", timed_out=True))
    assert (late.status, late.detail) == (504, "no answer about x within 1s")
    down = KafkaClientError.of(KafkaError(KafkaError._TRANSPORT), "the cluster at h:1",
                               "Metadata")
    down.reason = "SASL authentication error: Authentication failed"
    problem = gateway.problem(down)
    assert (problem.status, problem.title) == (503, "CLUSTER_UNREACHABLE")
    assert problem.detail == ("the cluster at h:1: Broker transport failure (latest client "
                              "error: SASL authentication error: Authentication failed)")
