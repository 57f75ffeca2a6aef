"""The image and the dev loop: ``hadolint Dockerfile`` is clean; ``skaffold.yaml`` validates
against skaffold's own JSON schema (``skaffold/v4beta14``, vendored in ``schemas/``); what
skaffold deploys in the dev profile renders to one valid Broker; the Dockerfile's targets,
extras and user are the ones the chart and skaffold rely on."""

from __future__ import annotations

import re
import subprocess
import tomllib

import jsonschema
import yaml

from strata.operator import crds

from .deploy_tools import ROOT, helm, venv_tool
from .test_chart import openapi_to_json_schema

SKAFFOLD = ROOT / "skaffold.yaml"
SCHEMA = ROOT / "tests" / "unit" / "deploy" / "schemas" / "skaffold-v4beta14.json"
DOCKERFILE = ROOT / "Dockerfile"


def test_hadolint_is_clean() -> None:
    done = subprocess.run([venv_tool("hadolint"), "--no-color", str(DOCKERFILE)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr


def test_skaffold_yaml_matches_skaffolds_schema() -> None:
    done = subprocess.run([venv_tool("check-jsonschema"), "--schemafile", str(SCHEMA),
                           str(SKAFFOLD)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert yaml.safe_load(SKAFFOLD.read_text())["apiVersion"] == "skaffold/v4beta14"


def test_skaffold_builds_dockerfile_targets_and_deploys_the_chart() -> None:
    config = yaml.safe_load(SKAFFOLD.read_text())
    targets = set(re.findall(r"^FROM \S+ AS (\S+)$", DOCKERFILE.read_text(), re.MULTILINE))
    for artifact in config["build"]["artifacts"]:
        assert artifact["docker"]["target"] in targets
    for release in config["deploy"]["helm"]["releases"]:
        assert (ROOT / release["chartPath"] / "Chart.yaml").exists()


def test_dev_profile_renders_one_valid_single_broker_cluster() -> None:
    profile = next(p for p in yaml.safe_load(SKAFFOLD.read_text())["profiles"]
                   if p["name"] == "dev")
    release = profile["deploy"]["helm"]["releases"][0]
    sets = []
    for key, value in release["setValues"].items():
        sets += ["--set", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    chart = str(ROOT / release["chartPath"])
    done = subprocess.run([helm(), "template", release["name"], chart,
                           "--namespace", release["namespace"], *sets],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    objects = [o for o in yaml.safe_load_all(done.stdout) if o]
    broker = next(o for o in objects if o["kind"] == "Broker")
    schema = crds.BROKER_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    jsonschema.validate(broker, openapi_to_json_schema(schema))
    assert broker["spec"]["replicas"] == 1
    assert broker["spec"]["config"] == {"default.replication.factor": 1,
                                        "offsets.topic.replication.factor": 1,
                                        "min.insync.replicas": 1}
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Topic"] == ["events"]
    ports = {p["resourceName"] for p in profile["portForward"]}
    assert ports == {"dev-bootstrap", "dev-admin"}  # the Broker's Services (BrokerNames)


def test_image_installs_existing_extras_and_runs_as_non_root() -> None:
    text = DOCKERFILE.read_text()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert "operator" in extras
    assert re.search(r"^FROM python:3\.11-slim\S* AS|^ARG PYTHON_IMAGE=python:3\.11-slim\S+$",
                     text, re.MULTILINE)
    runtime = text.split("AS runtime", 1)[1].split("AS spark", 1)[0]
    assert "USER 1000:1000" in runtime
    assert text.rstrip().splitlines()[-1].startswith("CMD")
