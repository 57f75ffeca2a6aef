"""``strata.spark.pipelines``: example Spark jobs built on the ``strata`` source and sink.

``JOBS`` maps a job name (what ``strata spark run <job>`` takes) to its module; every job
module has ``main(argv) -> int`` and runs as a script under ``spark-submit`` too.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Final

JOBS: Final[dict[str, str]] = {
    "windowed-counts": "strata.spark.pipelines.windowed_counts",
}


def job_main(name: str) -> Callable[[Sequence[str] | None], int]:
    """The ``main`` of job ``name``; ``KeyError`` names the known jobs."""
    if name not in JOBS:
        raise KeyError(f"unknown job {name!r}; known jobs: {', '.join(sorted(JOBS))}")
    module = importlib.import_module(JOBS[name])
    main: Callable[[Sequence[str] | None], int] = module.main
    return main
