"""docs/compatibility.md is current (regenerated from the handler registry, kio, the installed
clients and the tests, it equals the committed page), and the page states what it reads."""

from __future__ import annotations

from strata.broker.compatibility_ledger import ApiRow, ClientLibrary, collect, render
from strata.protocol.api_keys import ApiKey
from strata.protocol.registry import VersionRange

from .deploy_tools import ROOT

PAGE = ROOT / "docs" / "compatibility.md"


def test_the_committed_page_is_current() -> None:
    fresh = render(*collect(ROOT))
    assert PAGE.read_text(encoding="utf-8") == fresh, (
        "docs/compatibility.md is not current: run `make compatibility`")


def test_every_served_api_has_a_row_and_every_other_key_is_listed_as_not_served() -> None:
    rows, _ = collect(ROOT)
    served = {row.api_key for row in rows if row.served is not None}
    assert ApiKey.PRODUCE in served and ApiKey.API_VERSIONS in served
    assert {row.api_key for row in rows} == set(ApiKey)


def test_a_client_asking_above_the_served_range_is_marked_as_negotiating_down() -> None:
    rows = [
        ApiRow(ApiKey.FETCH, VersionRange(4, 11), None, 18, ("unit/broker/test_fetch.py",)),
        ApiRow(ApiKey.DESCRIBE_LOG_DIRS, None, None, 5, ()),
    ]
    clients = [ClientLibrary("new-client", "1.0", {ApiKey.FETCH: 17, ApiKey.DESCRIBE_LOG_DIRS: 4}),
               ClientLibrary("old-client", "0.1", {ApiKey.FETCH: 10})]
    page = render(rows, clients)
    assert "| 1 | Fetch | 4-11 | - | 18 | 17 (asks 11) | 10 | `unit/broker/test_fetch.py` |" in page
    assert "| 35 | DescribeLogDirs | 5 | new-client |" in page
    assert render(rows, clients) == page  # pure and deterministic
