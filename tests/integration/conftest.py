"""Shared fixtures of the integration suite: real broker processes on loopback.

``broker`` is one broker per test module (modules whose tests don't disturb each other share
it; a module that restarts or abuses its broker gets its own by also using this fixture — it is
per module anyway). A test that needs a broker of its own, or one with other settings, uses
``make_broker``. When a test fails, the tail of every broker's log that the test could have
touched is attached to its report, so a CI failure shows what the broker said.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import ExitStack

import pytest

from .broker_process import BrokerProcess, running_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker for the whole module, stopped with SIGTERM (a shutdown that is not clean fails
    the module's last test at teardown)."""
    with running_broker(tmp_path_factory.mktemp("broker")) as started:
        yield started


@pytest.fixture
def make_broker(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[Mapping[str, str] | None], BrokerProcess]]:
    """Start brokers of the test's own (with config overrides); all stopped after the test."""
    with ExitStack() as stack:

        def make(overrides: Mapping[str, str] | None = None) -> BrokerProcess:
            workdir = tmp_path_factory.mktemp("broker")
            return stack.enter_context(running_broker(workdir, overrides))

        yield make


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for instance in BrokerProcess.instances:
            # The brokers this test used: running now, or requested by it (even if it died).
            used = instance in getattr(item, "funcargs", {}).values()
            if instance.starts and (instance.is_running() or used):
                report.sections.append((f"broker {instance.bootstrap} log", instance.log_tail()))
    return report
