"""Whether a SASL login works, asked the way a client finds out: a Metadata request answered
(True) or librdkafka reporting _AUTHENTICATION (False), polled with a deadline."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient


def can_log_in(config: Mapping[str, Any], timeout_s: float = 20.0) -> bool:
    """``config``: librdkafka properties with the bootstrap server and the SASL login."""
    errors: list[KafkaError] = []
    client = AdminClient({**config, "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(KafkaException):
            client.list_topics(timeout=0.5)
            return True
        client.poll(0)
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            return False
    raise AssertionError(f"{config.get('sasl.username')}'s login neither succeeded nor failed: "
                         f"{errors}")
