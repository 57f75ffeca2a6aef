"""One driver per real Kafka client, all behind the same small interface (``model.ClientDriver``).

The matrix in ``test_matrix.py`` is written once against that interface and run against every
driver, so a difference between clients shows up as one test id failing, not as four diverging
test files. ``DRIVERS`` is the matrix's client axis.
"""

from __future__ import annotations

from collections.abc import Callable

from ..model import ClientDriver
from .aiokafka_driver import AiokafkaDriver
from .confluent_driver import ConfluentKafkaDriver
from .kafka_python_driver import KafkaPythonDriver
from .kafkajs_driver import KafkajsDriver

DRIVERS: dict[str, Callable[[str], ClientDriver]] = {
    "confluent-kafka": ConfluentKafkaDriver,
    "kafka-python": KafkaPythonDriver,
    "aiokafka": AiokafkaDriver,
    "kafkajs": KafkajsDriver,
}

__all__ = ["DRIVERS"]
