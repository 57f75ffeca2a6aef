"""``strata spark run <job> [job options]``: run an example Spark job on a local Spark.

Delegates to the job's ``main`` in ``strata.spark.pipelines`` (its options are the job's own,
passed through: ``strata spark run windowed-counts --help``). ``--bootstrap-servers`` (default
``$STRATA_BOOTSTRAP_SERVERS`` or ``127.0.0.1:9092``) is handed to the job. PySpark is an extra
(``pip install 'strata[spark]'``): without it the command fails with that one line and exit 2,
before anything starts. Java must be on PATH for Spark's JVM.
"""

from __future__ import annotations

import importlib.util
from typing import Annotated

import typer

from strata.cli.errors import EXIT_USAGE, CliError, reported_errors
from strata.cli.kafka_client import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP

app = typer.Typer(help="Spark jobs on Strata topics (needs the spark extra).",
                  no_args_is_help=True)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job: windowed-counts.")],
    bootstrap_servers: Annotated[
        str,
        typer.Option("--bootstrap-servers", "-b", envvar=BOOTSTRAP_ENV, metavar="HOST:PORT,...",
                     help="Brokers the job reads from and writes to."),
    ] = DEFAULT_BOOTSTRAP,
) -> None:
    """Run JOB on a local Spark (extra options go to the job)."""
    with reported_errors(ctx):
        if importlib.util.find_spec("pyspark") is None:
            raise CliError("pyspark is not installed; install the spark extra: "
                           "pip install 'strata[spark]'", EXIT_USAGE)
        from strata.spark.pipelines import JOBS, job_main

        if job not in JOBS:
            raise CliError(f"unknown job {job!r}; known jobs: {', '.join(sorted(JOBS))}",
                           EXIT_USAGE)
        main = job_main(job)
    raise typer.Exit(main(["--bootstrap-servers", bootstrap_servers, *ctx.args]))
