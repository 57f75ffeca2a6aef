"""``strata transactions`` without a broker: argument errors (one line, exit 2), the rows and
tables it prints (Kafka's tool's headers, JSON with snake_case keys), an unreachable cluster
(exit 1 naming the address), and ``find-hanging``'s pure rules (``strata.client.transactions``).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from strata.cli import transactions as cli
from strata.cli.errors import CliError
from strata.cli.main import app
from strata.cli.output import OutputFormat
from strata.client.transactions import (
    AbortSpec,
    OpenTransaction,
    ProducerState,
    TransactionDescription,
    TransactionListing,
    hanging,
    open_transactions,
)

NOW = 1_700_000_600_000


def producer(pid: int, start: int = 10, last: int = NOW - 120_000,
             coordinator_epoch: int = 3) -> ProducerState:
    return ProducerState(pid, 2, 5, last, coordinator_epoch, start)


@pytest.mark.parametrize(("args", "line"), [
    (["transactions", "find-hanging"],
     "strata transactions find-hanging: find-hanging requires either --topic or --broker-id "
     "to limit the scope of the search"),
    (["transactions", "find-hanging", "--broker-id", "1", "--partition", "0"],
     "strata transactions find-hanging: --partition requires --topic"),
    (["transactions", "abort", "--topic", "t", "--partition", "0"],
     "strata transactions abort: the transaction to abort must be identified either with "
     "--start-offset or with --producer-id, --producer-epoch and --coordinator-epoch"),
    (["transactions", "abort", "--topic", "t", "--partition", "0", "--producer-id", "7"],
     "strata transactions abort: missing required argument --producer-epoch"),
    (["transactions", "abort", "--topic", "t", "--partition", "0", "--producer-id", "7",
      "--producer-epoch", "1"],
     "strata transactions abort: missing required argument --coordinator-epoch"),
    (["transactions", "abort", "--topic", "t", "--partition", "0", "--producer-id", "7",
      "--start-offset", "3"],
     "strata transactions abort: give either --start-offset or --producer-id, not both"),
    (["transactions", "describe"],
     "strata transactions describe: Missing option '--transactional-id'."),
    (["transactions", "describe-producers", "--topic", "t", "--partition", "-1"],
     "strata transactions describe-producers: Invalid value for '--partition': Input should "
     "be greater than or equal to 0"),
])
def test_argument_errors_are_one_line_and_exit_2(args: list[str], line: str) -> None:
    result = CliRunner().invoke(app, [*args, "-b", "127.0.0.1:1", "--timeout", "1"],
                                prog_name="strata")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""


def test_an_unreachable_cluster_is_exit_1_naming_the_address() -> None:
    result = CliRunner().invoke(app, ["transactions", "list", "-b", "127.0.0.1:1",
                                      "--timeout", "1"], prog_name="strata")
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("strata transactions list: cannot reach a broker at 127.0.0.1:1 "
                           "within 1s: ")
    assert "Traceback" not in result.output


def test_abort_spec_of_explicit_ids_clamps_a_missing_coordinator_epoch() -> None:
    assert cli.abort_spec_of("t", 0, None, 7, 1, -1) == AbortSpec("t", 0, 7, 1, 0)
    assert cli.abort_spec_of("t", 0, None, 7, 1, 4) == AbortSpec("t", 0, 7, 1, 4)
    assert cli.abort_spec_of("t", 0, 12, None, None, None) is None
    with pytest.raises(CliError) as caught:
        cli.abort_spec_of("t", 0, None, None, None, None)
    assert caught.value.exit_code == 2


def test_rows_use_kafkas_columns(capsys: pytest.CaptureFixture[str]) -> None:
    listed = [TransactionListing("tx-a", 1, 4000, "Ongoing")]
    cli._print(OutputFormat.TEXT, cli.LIST_HEADERS, cli.listing_rows(listed))
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["TransactionalId", "Coordinator", "ProducerId",
                              "TransactionState"]
    assert row.split() == ["tx-a", "1", "4000", "Ongoing"]
    # No rows: the header alone, as kafka-transactions.sh prints it.
    cli._print(OutputFormat.TEXT, cli.HANGING_HEADERS, [])
    assert capsys.readouterr().out.split() == list(cli.HANGING_HEADERS)


def test_describe_row_reports_duration_and_none_without_a_transaction(
        capsys: pytest.CaptureFixture[str]) -> None:
    open_one = TransactionDescription(2, "tx-a", 4000, 3, "Ongoing", 60_000, NOW - 1_500,
                                      (("orders", 0), ("orders", 1)))
    row = cli.description_row(open_one, NOW)
    assert row["transaction_duration_ms"] == 1_500
    assert row["topic_partitions"] == ["orders-0", "orders-1"]
    empty = TransactionDescription(2, "tx-b", 4001, 0, "Empty", 60_000, None, ())
    cli._print(OutputFormat.JSON, cli.DESCRIBE_HEADERS, [cli.description_row(empty, NOW)])
    document = json.loads(capsys.readouterr().out)
    assert document["current_transaction_start_time_ms"] is None
    assert document["transaction_duration_ms"] is None
    cli._print(OutputFormat.TEXT, cli.DESCRIBE_HEADERS, [cli.description_row(empty, NOW)])
    assert capsys.readouterr().out.splitlines()[1].split()[6:8] == ["None", "None"]


def test_producer_and_hanging_rows() -> None:
    [idle] = cli.producer_rows([producer(1, start=-1)])
    assert idle["current_transaction_start_offset"] is None
    found = [OpenTransaction("orders", 0, producer(1, last=NOW - 3 * 60_000))]
    [row] = cli.hanging_rows(found, NOW)
    assert (row["start_offset"], row["coordinator_epoch"], row["duration_min"]) == (10, 3, 3)


def test_open_transactions_older_than_the_timeout() -> None:
    states = {("orders", 0): [producer(1), producer(2, start=-1),
                              producer(3, last=NOW - 1_000)]}
    found = open_transactions(states, 60_000, NOW)
    assert [t.producer.producer_id for t in found] == [1]  # 2 has none open, 3 is too young
    assert [t.producer.producer_id for t in open_transactions(states, 0, NOW)] == [1, 3]


def test_hanging_is_kafkas_rule() -> None:
    candidates = [OpenTransaction("orders", 0, producer(1)),
                  OpenTransaction("orders", 1, producer(1)),
                  OpenTransaction("orders", 0, producer(2)),
                  OpenTransaction("orders", 0, producer(3))]
    described = TransactionDescription(1, "tx-1", 1, 2, "Ongoing", 60_000, NOW,
                                       (("orders", 0),))
    found = hanging(candidates, {1: "tx-1", 3: "tx-3"}, {"tx-1": described, "tx-3": None})
    # orders-1 is not in tx-1's transaction; producer 2 has no transactional id; tx-3 is
    # unknown to its coordinator. orders-0 of tx-1 will get its marker.
    assert [(t.partition, t.producer.producer_id) for t in found] == [(1, 1), (0, 2), (0, 3)]
