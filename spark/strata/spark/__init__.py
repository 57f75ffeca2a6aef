"""``strata.spark``: a PySpark Python Data Source and sink for Strata (and any Kafka) topics.

``StrataDataSource`` (``name() == "strata"``) mirrors Spark's Kafka source and sink options and
schema, so a job changes only ``format("kafka")`` to ``format("strata")`` after
``spark.dataSource.register(StrataDataSource)``. No JVM jar is needed: the Python workers
fetch record batches themselves (``partition_fetcher`` over ``broker_connection``, decoded by
``record_columns``) and use confluent-kafka for planning, writing and any login they do not
speak. Modules: ``options`` (option parsing) and
``offsets`` (offset arithmetic) are pure and import no pyspark; ``schema``, ``kafka_io`` (every
client call), ``reader``, ``writer``, ``source`` (the ``DataSource``), ``session`` (a local
session for jobs and tests) and ``pipelines`` (example jobs) need the ``spark`` extra.
``StrataDataSource`` is imported on first use, so the pure modules work without pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from strata.spark.source import StrataDataSource

__all__ = ["StrataDataSource"]


def __getattr__(name: str) -> Any:
    if name == "StrataDataSource":
        from strata.spark.source import StrataDataSource

        return StrataDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
