"""Smoke tests of the benchmark harness (bench/): it runs end to end, never timed assertions."""
