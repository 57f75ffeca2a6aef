"""strata.spark.writer: the transactional id of a task (no broker, no Spark task needed)."""

from __future__ import annotations

import pytest

from strata.spark.options import parse_sink_options
from strata.spark.writer import produce_batches, transactional_id


def test_every_attempt_of_a_partition_shares_one_transactional_id() -> None:
    assert transactional_id("job7", 0) == "job7-0"
    assert transactional_id("job7", 12) == "job7-12"
    assert transactional_id("job7", 1) != transactional_id("job7", 2)


def test_a_transactional_write_outside_a_spark_task_fails_naming_the_option() -> None:
    options = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t",
                                  "kafka.transactional.id.prefix": "p"})
    with pytest.raises(RuntimeError, match=r"^kafka\.transactional\.id\.prefix: .*Spark task"):
        produce_batches(options, iter(()))
