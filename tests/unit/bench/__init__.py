"""Unit tests of the benchmark harness (bench/): pure parts, no servers."""
