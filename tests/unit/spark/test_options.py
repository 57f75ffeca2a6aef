"""strata.spark.options: Spark's Kafka option rules, each wrong option named in its error."""

from __future__ import annotations

import pytest

from strata.spark.options import (
    EARLIEST,
    LATEST,
    StrataOptionError,
    parse_sink_options,
    parse_source_options,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(streaming: bool | None = False, **options: str):
    return parse_source_options({**BASE, **options}, streaming=streaming)


def test_defaults_follow_spark_batch_and_streaming() -> None:
    batch = parse(subscribe="a")
    assert (batch.starting, batch.ending) == (EARLIEST, LATEST)
    stream = parse(True, subscribe="a")
    assert stream.starting == LATEST
    assert stream.fail_on_data_loss is True and stream.include_headers is False
    assert stream.client_config == {"bootstrap.servers": "127.0.0.1:9092"}


def test_option_names_are_case_insensitive_and_kafka_prefix_goes_to_the_client() -> None:
    opts = parse_source_options(
        {"Kafka.Bootstrap.Servers": "h:1", "SUBSCRIBEPATTERN": "ev.*",
         "kafka.client.id": "me", "includeHeaders": "TRUE", "minPartitions": "4"},
        streaming=False,
    )
    assert opts.subscription == "subscribePattern" and opts.pattern == "ev.*"
    assert opts.client_config == {"bootstrap.servers": "h:1", "client.id": "me"}
    assert opts.include_headers is True and opts.min_partitions == 4


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "subscribe/subscribePattern/assign"),
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "subscribe/subscribePattern/assign"),
        ({"subscribe": " , "}, "subscribe"),
        ({"subscribePattern": "("}, "subscribePattern"),
        ({"assign": "[0]"}, "assign"),
        ({"assign": '{"a": []}'}, "assign"),
        ({"subscribe": "a", "startingOffsets": "newest"}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": "latest"}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'}, "startingOffsets"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets"),
        ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, "endingOffsets"),
        ({"subscribe": "a", "startingTimestamp": "yesterday"}, "startingTimestamp"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions"),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "10"}, "maxOffsetsPerTrigger"),
        ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit"),
    ],
)
def test_a_wrong_batch_option_is_named(options: dict[str, str], named: str) -> None:
    with pytest.raises(StrataOptionError) as caught:
        parse(**options)
    assert str(caught.value).startswith(f"{named}:")


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(StrataOptionError, match=r"^kafka\.bootstrap\.servers: required"):
        parse_source_options({"subscribe": "a"}, streaming=True)


def test_streaming_rejects_ending_offsets_and_accepts_a_read_limit() -> None:
    with pytest.raises(StrataOptionError, match=r"^endingOffsets:"):
        parse(True, subscribe="a", endingOffsets="latest")
    assert parse(True, subscribe="a", maxOffsetsPerTrigger="7").max_offsets_per_trigger == 7
    with pytest.raises(StrataOptionError, match=r"^maxOffsetsPerTrigger:"):
        parse(True, subscribe="a", maxOffsetsPerTrigger="-1")


def test_json_offsets_and_assign_are_parsed() -> None:
    opts = parse(assign='{"a": [1, 0, 1], "b": [2]}',
                 startingOffsets='{"a": {"0": 5, "1": -2}}', endingOffsets='{"a": {"0": -1}}')
    assert opts.assigned == {"a": (0, 1), "b": (2,)}
    assert opts.starting == {"a": {0: 5, 1: -2}}
    assert opts.ending == {"a": {0: -1}}
    assert opts.matches("a") and not opts.matches("c")


def test_pattern_matches_whole_names_and_never_internal_topics() -> None:
    opts = parse(subscribePattern="ev.*")
    assert opts.matches("events") and not opts.matches("my-events")
    assert not parse(subscribePattern=".*").matches("__consumer_offsets")


def test_starting_timestamp_is_kept_and_makes_a_batch_start_from_it() -> None:
    assert parse(subscribe="a", startingTimestamp="1700000000000").starting_timestamp_ms == \
        1_700_000_000_000


def test_sink_options() -> None:
    sink = parse_sink_options({**BASE, "topic": "out", "kafka.linger.ms": "1"})
    assert sink.topic == "out"
    assert sink.client_config == {"bootstrap.servers": "127.0.0.1:9092", "linger.ms": "1"}
    assert parse_sink_options(BASE).topic is None
    with pytest.raises(StrataOptionError, match=r"^topic:"):
        parse_sink_options({**BASE, "topic": " "})


def test_isolation_level_defaults_to_read_uncommitted_as_spark() -> None:
    assert parse(subscribe="a").isolation_level == "read_uncommitted"
    assert parse(subscribe="a").read_committed is False
    committed = parse(subscribe="a", **{"kafka.isolation.level": " READ_COMMITTED"})
    assert committed.isolation_level == "read_committed" and committed.read_committed
    # Kept out of the client config: the readers set it on every client and request.
    assert "isolation.level" not in committed.client_config
    assert parse(True, subscribe="a", **{"kafka.isolation.level": "read_uncommitted"}) \
        .isolation_level == "read_uncommitted"
    with pytest.raises(StrataOptionError, match=r"^kafka\.isolation\.level: .*'serializable'"):
        parse(subscribe="a", **{"kafka.isolation.level": "serializable"})


def test_transactional_id_prefix_is_a_sink_option() -> None:
    sink = parse_sink_options({**BASE, "topic": "out", "Kafka.Transactional.Id.Prefix": " job7 "})
    assert sink.transactional_id_prefix == "job7"
    assert "transactional.id.prefix" not in sink.client_config
    assert parse_sink_options({**BASE, "topic": "out"}).transactional_id_prefix is None
    with pytest.raises(StrataOptionError, match=r"^kafka\.transactional\.id\.prefix: .*empty"):
        parse_sink_options({**BASE, "kafka.transactional.id.prefix": "  "})
    with pytest.raises(StrataOptionError, match=r"^kafka\.transactional\.id: .*prefix"):
        parse_sink_options({**BASE, "kafka.transactional.id": "one"})
    with pytest.raises(StrataOptionError, match=r"^kafka\.transactional\.id\.prefix: a sink"):
        parse(subscribe="a", **{"kafka.transactional.id.prefix": "job7"})
