"""Strata's sans-IO Kafka protocol codec (framing, headers, kio adapters, error codes)."""
