"""A SparkSession for Strata's jobs and tests, with the ``strata`` source registered.

Owns the process-level settings a local Spark needs here: ``SPARK_LOCAL_IP`` (loopback unless
already set) and ``PYSPARK_PYTHON`` (the interpreter running this code, so executor workers
import the same installed ``strata.spark``; otherwise they start whatever ``python3`` is first
on PATH). :func:`get_session` returns the active session when there is one (a notebook, a test
fixture); under ``spark-submit`` (``PYSPARK_GATEWAY_PORT`` is set) it builds the session
spark-submit configured, never overriding its master; otherwise it builds a local one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from strata.spark.source import StrataDataSource

# Local-mode defaults: few shuffle partitions (2 cores), no UI port, and task retries
# ("local[N,F]": N threads, F attempts per task) so at-least-once retries happen locally too.
LOCAL_CONF: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}


def prepare_environment() -> None:
    """Set ``SPARK_LOCAL_IP`` and ``PYSPARK_PYTHON`` for a local session (callers' values win)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


DEFAULT_MASTER = "local[*,3]"


def get_session(app_name: str, master: str | None = None,
                conf: Mapping[str, str] | None = None) -> SparkSession:
    """The active session, or a new one (local unless under spark-submit); either way with
    ``strata`` registered. ``master`` only applies to a session built here."""
    active = SparkSession.getActiveSession()
    if active is None:
        builder = SparkSession.builder.appName(app_name)
        if "PYSPARK_GATEWAY_PORT" not in os.environ or master is not None:
            prepare_environment()
            builder = builder.master(master or DEFAULT_MASTER)
            for key, value in {**LOCAL_CONF, **(conf or {})}.items():
                builder = builder.config(key, value)
        active = builder.getOrCreate()
    active.dataSource.register(StrataDataSource)
    return active
