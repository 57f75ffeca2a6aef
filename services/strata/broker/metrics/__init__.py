"""The broker's metrics: one module per layer on one registry."""
