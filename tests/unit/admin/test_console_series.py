"""The console's pure metrics parts: series rings and counter rates (resets, priming), what it
reads from a broker's ``/metrics`` page, group lags over brokers, topic sizes over log dirs,
the series keys' rights, its settings (the Grafana links), and how the sampler feeds the store
(sums over brokers only when every broker answered)."""

from __future__ import annotations

import itertools

import pytest

from strata.admin.console.broker_scrape import (
    Scrape,
    committed_increase,
    committed_offsets,
    group_lags,
    parse,
)
from strata.admin.console.charts import resource_of
from strata.admin.console.record_view import human_bytes, per_second
from strata.admin.console.sampler import MetricsSampler
from strata.admin.console.series import Ring, SeriesStore
from strata.admin.console.settings import ConsoleSettings
from strata.admin.kafka_gateway import AdminSettings, KafkaGateway
from strata.admin.problems import ProblemError
from strata.client.log_dirs import LogDir, topic_sizes
from strata.security.acl import ResourceType


def test_a_ring_keeps_the_last_points_and_time_only_moves_forward() -> None:
    ring = Ring(3)
    for t in range(5):
        ring.append(float(t), t * 10.0)
    assert ring.points() == [(2.0, 20.0), (3.0, 30.0), (4.0, 40.0)]
    ring.append(4.0, 41.0)  # the same instant: the newer value
    ring.append(3.5, 99.0)  # earlier than the last: replaces it, never goes back
    assert ring.points() == [(2.0, 20.0), (3.0, 30.0), (4.0, 99.0)] and len(ring) == 3
    with pytest.raises(ValueError):
        Ring(0)


def test_counters_become_rates_and_a_reset_counts_as_prometheus_does() -> None:
    store = SeriesStore(capacity=10)
    assert store.counter("c", 100.0, 50.0) is None  # primes only
    assert store.points("c") == [] and store.latest("c") is None
    assert store.counter("c", 102.0, 70.0) == 10.0
    assert store.counter("c", 104.0, 6.0) == 3.0  # restarted: the increase is the new total
    assert store.counter("c", 104.0, 9.0) is None  # no time passed: no rate
    assert store.points("c") == [(102.0, 10.0), (104.0, 3.0)]
    assert store.latest("c") == 3.0 and store.latest("missing") is None


def test_a_counter_known_to_start_at_zero_counts_its_first_increase() -> None:
    store = SeriesStore()
    store.counter_from_zero("t", 10.0)
    assert store.has_counter("t") and store.counter("t", 15.0, 200.0) == 40.0
    points = store.points("t")
    assert points == [(10.0, 0.0), (15.0, 40.0)]
    pairs = itertools.pairwise(points)
    assert sum(rate * (t - before) for (before, _), (t, rate) in pairs) == 200.0


def test_the_store_drops_the_least_recently_written_series() -> None:
    store = SeriesStore(max_series=2)
    store.gauge("a", 1.0, 1.0)
    store.gauge("b", 1.0, 2.0)
    store.gauge("a", 2.0, 3.0)
    store.counter("c", 2.0, 1.0)
    assert sorted(store.keys()) == ["a", "c"] and store.points("b") == []


EXPOSITION = """# HELP strata_log_appended_bytes_total Bytes appended to a partition log.
# TYPE strata_log_appended_bytes_total counter
strata_log_appended_bytes_total{partition="0",topic="orders"} 100.0
strata_log_appended_bytes_total{partition="1",topic="orders"} 50.0
strata_log_appended_bytes_created{partition="0",topic="orders"} 1.7e+09
strata_log_appended_records_total{partition="0",topic="orders"} 4.0
strata_log_appended_records_total{partition="0",topic="pay\\"ments"} 1.0
strata_log_read_bytes_total{partition="0",topic="orders"} 300.0
strata_log_read_bytes_total{partition="0",topic="orders"} NaN
strata_group_lag_records{group="billing",partition="0",topic="orders"} 7.0
strata_group_lag_records{group="billing",partition="x",topic="orders"} 7.0
strata_group_lag_records{group="billing",partition="1",topic="orders"} garbage
strata_log_size_bytes{partition="0",topic="orders"} 999.0
"""


def test_a_metrics_page_gives_traffic_totals_and_lags() -> None:
    scrape = parse(EXPOSITION)
    assert (scrape.bytes_in, scrape.records_in, scrape.bytes_out) == (150.0, 5.0, 300.0)
    assert scrape.topic_bytes_in == {"orders": 150.0}
    assert scrape.topic_records_in == {"orders": 4.0, 'pay"ments': 1.0}
    assert scrape.group_lag == {("billing", "orders", 0): 7.0}
    other = parse('strata_group_lag_records{group="billing",partition="0",topic="orders"} 9\n'
                  'strata_group_lag_records{group="billing",partition="2",topic="orders"} 1\n')
    assert group_lags([scrape, other]) == {"billing": 10.0}
    assert parse("") == parse("not a metric line\n{{{\n")


def test_committed_offsets_moving_forward_are_the_records_consumed() -> None:
    before = committed_offsets([parse(
        'strata_group_committed_offset{group="a",partition="0",topic="t"} 10\n'
        'strata_group_committed_offset{group="b",partition="0",topic="t"} 50\n'
        'strata_group_committed_offset{group="c",partition="0",topic="t"} 7\n')])
    now = committed_offsets([
        parse('strata_group_committed_offset{group="a",partition="0",topic="t"} 14\n'
              'strata_group_committed_offset{group="b",partition="0",topic="t"} 20\n'
              'strata_group_committed_offset{group="d",partition="0",topic="t"} 99\n'),
        parse('strata_group_committed_offset{group="a",partition="0",topic="t"} 15\n')])
    assert now[("a", "t", 0)] == 15.0
    # a: +5; b reset back: 0; c deleted and d new: not counted
    assert committed_increase(before, now) == 5.0


def test_topic_sizes_sum_every_replica() -> None:
    dirs = [LogDir(0, "/d0", None, 1000, 400, {("a", 0): 10, ("b", 0): 5}),
            LogDir(1, "/d1", None, None, None, {("a", 0): 10, ("a", 1): 3}),
            LogDir(2, "/d2", "KAFKA_STORAGE_ERROR", None, None)]
    assert topic_sizes(dirs) == {"a": 23, "b": 5}
    assert dirs[0].used_bytes == 600 and dirs[1].used_bytes is None and dirs[0].data_bytes == 15


def test_series_keys_need_the_describe_right_of_what_they_show() -> None:
    assert resource_of("cluster:bytes_in") == (ResourceType.CLUSTER, "kafka-cluster")
    assert resource_of("logdir:0:/var/lib/strata:used")[0] is ResourceType.CLUSTER
    assert resource_of("topic:orders:records_in") == (ResourceType.TOPIC, "orders")
    assert resource_of("group:team:billing:lag") == (ResourceType.GROUP, "team:billing")
    for bad in ("cluster", "topic:orders", "secrets:x:y", "group::lag"):
        with pytest.raises(ProblemError):
            resource_of(bad)


def test_settings_come_from_the_environment_and_make_grafana_links() -> None:
    assert ConsoleSettings.from_env({}) == ConsoleSettings(None, 5.0)
    settings = ConsoleSettings.from_env({"STRATA_CONSOLE_GRAFANA_URL": "https://g.example/",
                                         "STRATA_CONSOLE_SAMPLE_INTERVAL_S": "0.1"})
    assert settings.sample_interval_s == 0.5
    assert settings.grafana_link("cluster") == "https://g.example/d/strata-cluster-overview"
    assert settings.grafana_link("groups", group="a b&c") == \
        "https://g.example/d/strata-consumer-groups?var-group=a+b%26c"
    assert ConsoleSettings.from_env({}).grafana_link("topics", topic="x") is None
    for env in ({"STRATA_CONSOLE_GRAFANA_URL": "javascript:alert(1)"},
                {"STRATA_CONSOLE_SAMPLE_INTERVAL_S": "often"}):
        with pytest.raises(ValueError):
            ConsoleSettings.from_env(env)


def test_sizes_and_rates_are_shown_short() -> None:
    assert human_bytes(None) == "\u2013" and human_bytes(512) == "512 B"
    assert human_bytes(1536) == "1.5 KiB" and human_bytes(3 * 1024**3) == "3.0 GiB"
    assert per_second(None) == "\u2013" and per_second(0) == "0/s"
    assert per_second(12.54) == "12.5/s" and per_second(1234.4) == "1234/s"
    assert per_second(0.25) == "0.25/s"


def test_the_sampler_sums_brokers_and_skips_incomplete_ticks() -> None:
    sampler = MetricsSampler(KafkaGateway(AdminSettings("127.0.0.1:1", 1.0)))
    store = sampler.store

    def scrape(records: float, topic_records: float | None, committed: float) -> Scrape:
        topic = {} if topic_records is None else {"t": topic_records}
        return Scrape(bytes_in=records * 10, records_in=records, bytes_out=0.0,
                      topic_bytes_in={k: v * 10 for k, v in topic.items()},
                      topic_records_in=topic, group_committed={("g", "t", 0): committed})

    sampler._feed(100.0, {0: scrape(10, None, 0), 1: scrape(20, None, 0)}, complete=True)
    assert store.points("cluster:records_in") == []  # counters primed only
    sampler._feed(102.0, {0: scrape(14, None, 0), 1: scrape(26, None, 0)}, complete=True)
    assert store.points("cluster:records_in") == [(102.0, 5.0)]  # (4 + 6) / 2 s
    # a topic appearing between two ticks counts from zero at the last complete one
    sampler._feed(104.0, {0: scrape(14, 8, 6), 1: scrape(26, None, 6)}, complete=True)
    assert store.points("topic:t:records_in") == [(102.0, 0.0), (104.0, 4.0)]
    # committed 0 -> 6 in 2 s
    assert store.points("cluster:records_out") == [(102.0, 0.0), (104.0, 3.0)]
    # a broker missing: its own counters go on, no sums, no topic or group points
    sampler._feed(106.0, {0: scrape(20, 10, 8)}, complete=False)
    assert store.points("broker:0:records_in")[-1] == (106.0, 3.0)
    assert store.latest("cluster:records_in") == 0.0  # the 104 s point (nothing produced)
    assert store.points("topic:t:records_in")[-1] == (104.0, 4.0)
