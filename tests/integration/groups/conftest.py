"""Brokers for the consumer-group tests: group timings scaled down for loopback (NOTES.md).

``group_broker`` is one broker per module; ``make_group_broker`` starts one of a test's own (for
tests that restart it or need an empty topic namespace). Both run the internal topic with a
replication factor of 1 (a single broker) and no initial rebalance delay, so a group forms as
soon as its members have joined.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Final

import pytest

from ..broker_process import BrokerProcess, running_broker

GROUP_SETTINGS: Final[Mapping[str, str]] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
}


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("broker"), GROUP_SETTINGS) as started:
        yield started


@pytest.fixture
def make_group_broker(
    make_broker: Callable[[Mapping[str, str] | None], BrokerProcess],
) -> Callable[[], BrokerProcess]:
    return lambda: make_broker(GROUP_SETTINGS)
