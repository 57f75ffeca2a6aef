"""Replication: hosted partitions, the produce and fetch data paths, followers fetching
from leaders."""
