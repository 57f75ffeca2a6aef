"""``strata spark run``: a clear one-line error without pyspark, and for an unknown job."""

from __future__ import annotations

import importlib.util

import pytest
from typer.testing import CliRunner

from strata.cli import spark
from strata.cli.main import app


def test_without_pyspark_the_command_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(spark.importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyspark" else real_find_spec(name, *a))
    result = CliRunner().invoke(app, ["spark", "run", "windowed-counts"])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "strata spark run: pyspark is not installed; install the spark extra: "
        "pip install 'strata[spark]'"
    )


def test_an_unknown_job_is_named_with_the_known_ones() -> None:
    result = CliRunner().invoke(app, ["spark", "run", "nope"])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "strata spark run: unknown job 'nope'; known jobs: windowed-counts"
    )
