"""``bench.native_perf``'s reading of ``strata_perf``'s output and spelling of its command line,
and ``bench.native_client``'s rows and target lines from those figures (no program, no broker)."""

from __future__ import annotations

import dataclasses

import pytest

from bench import native_client
from bench.native_perf import (
    PerfError,
    PerfResult,
    Produce,
    combine,
    consume_args,
    parse_output,
    produce_args,
)
from bench.results import Throughput

PRODUCE_OUTPUT = """\
812345 records sent, 162469.0 records/sec (15.49 MB/sec), 12.3 ms avg latency, 80.1 ms max latency.
1000000 records sent, 181818.2 records/sec (17.34 MB/sec), 10.50 ms avg latency, \
95.00 ms max latency, 9 ms 50th, 20 ms 95th, 41 ms 99th, 90 ms 99.9th.
1000 transactions of 1000 records committed (0 failed), commit latency 4.10 ms 50th, \
19.00 ms 99th, 30.00 ms max.
{"mode": "produce", "records": 1000000, "failed": 0, "requested": 1000000, "record_size": 100, \
"seconds": 5.500000, "records_per_s": 181818.2, "mb_per_s": 17.340, "latency_ms": {"avg": 10.5, \
"max": 95.0, "p50": 9.2, "p95": 20.1, "p99": 41.7, "p999": 90.3}, "transactions": 1000, \
"transactions_failed": 0, "commit_ms": {"p50": 4.1, "p99": 19.0, "max": 30.0}}
"""

CONSUME_OUTPUT = """\
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, \
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-26 12:00:00:000, 2026-11-26 12:00:01:000, 9.5367, 9.5367, 100000, 100000.0, 0, 1000, \
9.5367, 100000.0
99000 records consumed, 99000.0 records/sec (9.44 MB/sec)
{"mode": "consume", "records": 99000, "failed": 0, "requested": 100000, "bytes": 9900000, \
"seconds": 1.000000, "records_per_s": 99000.0, "mb_per_s": 9.441}
"""


def test_produce_output_parses_rates_latency_and_commit_latency() -> None:
    result = parse_output(PRODUCE_OUTPUT)
    assert (result.mode, result.records, result.requested, result.failed) == \
        ("produce", 1_000_000, 1_000_000, 0)
    assert result.seconds == pytest.approx(5.5)
    assert result.records_per_s == pytest.approx(181818.2)
    assert result.latency_ms is not None
    assert (result.latency_ms.p50, result.latency_ms.p99, result.latency_ms.p999) == \
        (9.2, 41.7, 90.3)
    assert result.transactions == 1000
    assert result.commit_ms is not None and result.commit_ms.p99 == 19.0
    assert result.complete
    assert result.client_cpu_s is None  # only ``run`` knows the program's CPU


def test_consume_output_short_of_the_count_is_incomplete() -> None:
    result = parse_output(CONSUME_OUTPUT)
    assert (result.mode, result.records, result.requested) == ("consume", 99_000, 100_000)
    assert result.latency_ms is None and result.commit_ms is None
    assert not result.complete


def test_the_last_result_line_wins_and_other_json_is_ignored() -> None:
    text = CONSUME_OUTPUT + '{"not": "a result"}\n{broken json\n'
    assert parse_output(PRODUCE_OUTPUT + text).mode == "consume"


@pytest.mark.parametrize("text", ["", "1000 records sent, 1.0 records/sec\n",
                                  '{"mode": "produce", "records": "many"}\n'])
def test_output_without_a_result_raises(text: str) -> None:
    with pytest.raises(PerfError):
        parse_output(text)


def test_failed_records_or_transactions_make_a_run_incomplete() -> None:
    failed = PRODUCE_OUTPUT.replace('"failed": 0', '"failed": 3')
    assert not parse_output(failed).complete
    aborted = PRODUCE_OUTPUT.replace('"transactions_failed": 0', '"transactions_failed": 1')
    assert not parse_output(aborted).complete


def test_command_lines() -> None:
    args = produce_args("127.0.0.1:9092", Produce("t", 500, acks="all", transactional_id="x",
                                                  transaction_records=50, throughput=100), 30)
    assert args[0] == "produce"
    pairs = dict(zip(args[1::2], args[2::2], strict=False))
    assert pairs["--bootstrap"] == "127.0.0.1:9092" and pairs["--acks"] == "all"
    assert pairs["--transactional-id"] == "x" and pairs["--transaction-records"] == "50"
    assert pairs["--throughput"] == "100" and pairs["--timeout-s"] == "30"
    assert "--idempotence" not in args
    assert "--idempotence" in produce_args("b", Produce("t", 1, idempotence=True), 1)
    assert consume_args("b", "t", 7, 5, "read_committed")[-4:] == \
        ["--isolation-level", "read_committed", "--timeout-s", "5"]


def _step(records_per_s: float, server_cpu_s: float = 1.0) -> native_client.Step:
    result = parse_output(PRODUCE_OUTPUT)
    figures = {**result.__dict__, "records_per_s": records_per_s,
               "seconds": result.records / records_per_s, "client_cpu_s": 0.5}
    return native_client.Step("x", PerfResult(**figures), server_cpu_s)


def test_rows_and_targets_read_each_figure_against_its_reference() -> None:
    steps = {"1": _step(1_000_000), "1-consume": _step(2_000_000), "rf3-p6": _step(500_000),
             "rf3-acks1": _step(800_000), "rf3-p1000": _step(250_000),
             "idempotent": _step(400_000), "transactional": _step(300_000)}
    rows = native_client.rows(steps, None)
    assert [r.scenario.split(",")[0] for r in rows][:2] == ["1 broker", "3 brokers"]
    assert rows[0].produce is not None and rows[0].produce.records_per_s == \
        pytest.approx(1_000_000)
    assert rows[0].produce.server_cpu_us_per_record == pytest.approx(1.0)
    lines = "\n".join(native_client.target_lines(steps, None))
    assert "50% of 1 broker acks=1" in lines and "1.00 us/record" in lines
    assert "acks=1: 80% of 1 broker" in lines
    assert "50% of the 6-partition rate" in lines
    assert ("transactional, 1 producer(s): 300,000 records/s against idempotent acks=all "
            "400,000: 75%") in lines
    assert "commit latency p50 4.1 ms, p99 19.0 ms" in lines
    assert "Redis" not in lines and "half the maximum rate" not in lines


def test_an_incomplete_step_is_marked_in_its_row() -> None:
    short = parse_output(CONSUME_OUTPUT)
    steps = {"1": _step(1_000_000), "1-consume": native_client.Step("c", short, 0.1),
             "rf3-p1": native_client.Step("p", parse_output(PRODUCE_OUTPUT.replace(
                 '"failed": 0', '"failed": 2')), 1.0)}
    by_scenario = {row.scenario: row for row in native_client.rows(steps, None)}
    single = [s for s in by_scenario if s.startswith("1 broker")]
    assert single and "[incomplete: 99,000 of 100,000 records" in single[0]
    assert any("1 partition, acks=all" in s and "2 failed" in s for s in by_scenario)
    assert native_client.Step("ok", parse_output(PRODUCE_OUTPUT), 1.0).note() == ""


def test_redis_and_half_rate_targets() -> None:
    half = _step(100_000)
    steps = {"1": _step(1_000_000), "1-consume": _step(2_000_000), "rf3-half": half}
    redis = Throughput(1_000_000, 2.5, 100, 1.0)  # 400,000 records/s
    lines = native_client.target_lines(steps, redis)
    assert "1 broker acks=1: 2.50x Redis XADD (target >= 2.5x)" in lines
    assert any("produce->ack p99 41.7 ms" in line for line in lines)
    assert native_client.rows(steps, redis)[-1].system == "Redis Streams"


def test_several_producers_combine_into_one_result_and_their_own_rows() -> None:
    one = parse_output(PRODUCE_OUTPUT)
    slow = dataclasses.replace(one, records=one.records * 2, latency_ms=dataclasses.replace(
        one.latency_ms, p50=one.latency_ms.p50 * 3, p99=one.latency_ms.p99 * 3)
        if one.latency_ms else None, client_cpu_s=1.0)
    combined = combine([dataclasses.replace(one, client_cpu_s=0.5), slow], seconds=2.0)
    assert combined.records == one.records * 3
    assert combined.records_per_s == pytest.approx(one.records * 3 / 2.0)
    assert combined.client_cpu_s == pytest.approx(1.5)
    assert one.latency_ms is not None and combined.latency_ms is not None
    assert combined.latency_ms.p50 == pytest.approx(one.latency_ms.p50 * 2)  # median of two
    assert combined.latency_ms.p99 == pytest.approx(one.latency_ms.p99 * 3)  # the slowest
    assert combined.transactions == one.transactions * 2
    steps = {"idempotent-6": _step(600_000, 1.0), "transactional-6": _step(300_000, 6.0)}
    rows = native_client.rows(steps, None)
    assert [r.scenario for r in rows] == [
        "3 brokers, RF 3, 6 partitions, acks=all idempotent, 6 producers (native)",
        "3 brokers, RF 3, 6 partitions, transactional (1,000 records/transaction), 6 producers "
        "(native)"]
    lines = "\n".join(native_client.target_lines(steps, None))
    assert ("transactional, 6 producer(s): 300,000 records/s against idempotent acks=all "
            "600,000: 50%") in lines
    with pytest.raises(ValueError):
        combine([], seconds=1.0)
