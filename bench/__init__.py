"""Strata's benchmarks: scripts that print figures (Kafka perf-test style lines and tables), never
timed assertions. A package, so its scripts import their siblings relatively: run them as modules
from the repository root, e.g. ``.venv/bin/python -m bench.suite --help`` (``make bench``).
Figures and how to read them: ``docs/benchmarks.md``."""
