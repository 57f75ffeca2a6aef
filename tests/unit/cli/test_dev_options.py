"""``strata dev -o key=value`` and ``--racks``: the properties each broker gets (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.cli.dev import broker_properties, parse_dev_settings


def properties(node_id: int, overrides: list[str], racks: str | None) -> dict[str, str]:
    settings = parse_dev_settings(overrides, racks)
    return broker_properties(node_id, 9092 + node_id, 7000, Path("/tmp/logs"), 3,
                             settings.overrides, metadata_store="sqlite:////tmp/m.db",
                             rack=settings.rack_of(node_id))


def test_overrides_reach_every_broker_and_win_over_the_launcher_defaults() -> None:
    for node_id in range(3):
        props = properties(node_id, ["log.retention.ms=3600000", "num.partitions = 6",
                                     "sasl.jaas.config=a=b"], None)
        assert props["log.retention.ms"] == "3600000"
        assert props["num.partitions"] == "6"  # the launcher's own default is 1
        assert props["sasl.jaas.config"] == "a=b"  # only the first = splits
        assert props["node.id"] == str(node_id)
        assert "broker.rack" not in props


def test_racks_are_given_round_robin() -> None:
    assert [properties(i, [], "r1,r2")["broker.rack"] for i in range(3)] == ["r1", "r2", "r1"]
    assert [properties(i, [], "a, b ,c")["broker.rack"] for i in range(3)] == ["a", "b", "c"]


@pytest.mark.parametrize(("overrides", "racks", "message"), [
    (["log.retention.ms"], None, "is not key=value"),
    (["=1"], None, "is not key=value"),
    (["node.id=4"], None, "set by strata dev for each broker"),
    (["listeners=PLAINTEXT://:1"], None, "set by strata dev for each broker"),
    (["broker.rack=a"], None, "use --racks"),
    ([], "a,,b", "--racks"),
    ([], "", "--racks"),
])
def test_bad_options_are_refused(overrides: list[str], racks: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_dev_settings(overrides, racks)
