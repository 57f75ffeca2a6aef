"""strata.spark.writer: a transactional sink's ids and checks (no broker, no Spark task)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from strata.spark.options import StrataOptionError, parse_sink_options
from strata.spark.writer import check_sink_schema, produce_batches, transactional_id


def test_every_attempt_of_a_partition_shares_one_transactional_id() -> None:
    assert transactional_id("job7", 0) == "job7-0"
    assert transactional_id("job7", 12) == "job7-12"
    assert transactional_id("job7", 1) != transactional_id("job7", 2)


def test_a_transactional_write_outside_a_spark_task_fails_naming_the_option() -> None:
    options = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t",
                                  "kafka.transactional.id.prefix": "p"})
    with pytest.raises(RuntimeError, match=r"^kafka\.transactional\.id\.prefix: .*Spark task"):
        produce_batches(options, iter(()))


def test_a_transactional_sink_needs_a_login_the_driver_can_commit_with() -> None:
    schema = StructType([StructField("value", BinaryType())])
    options = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t",
                                  "kafka.transactional.id.prefix": "p",
                                  "kafka.security.protocol": "SASL_PLAINTEXT",
                                  "kafka.sasl.mechanism": "GSSAPI"})
    with pytest.raises(StrataOptionError, match=r"^kafka\.transactional\.id\.prefix: .*login"):
        check_sink_schema(schema, options)
    check_sink_schema(schema, parse_sink_options({"kafka.bootstrap.servers": "h:1",
                                                  "topic": "t",
                                                  "kafka.transactional.id.prefix": "p"}))
