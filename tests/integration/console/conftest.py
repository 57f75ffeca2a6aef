"""Fixtures of the web console's browser tests: one real cluster, admin service and Chromium.

* ``console_stack`` (one for the package): a real 3-broker cluster (``ClusterProcesses``, SQLite
  store, racks ``rack-0..2``; each broker also serves a SASL_PLAINTEXT listener with
  SCRAM-SHA-256 and SCRAM-SHA-512, ``sasl_bootstrap``, for the users the console creates)
  with the brokers' authorizer on (``strata.acl``; the PLAINTEXT
  principal ``User:ANONYMOUS`` — the brokers themselves, the test's clients and the admin
  service — is a super user), and the real ``strata admin`` in front of it with a credentials
  file: ``ops`` (a super user of the admin service) and ``viewer``, whose ACLs allow Describe,
  DescribeConfigs and Read on every topic, Describe on groups and the cluster — but neither
  Delete nor Alter (``--acl-cache 0``: every request sees the current ACLs); the console
  samples the brokers' metrics every ``SAMPLE_INTERVAL_S`` and links to a Grafana at
  ``GRAFANA_URL`` (never reached: only the links are checked);
* ``browser``: Debian's Chromium (``make chromium``) driven by Playwright with
  ``executable_path`` (Playwright's own browser download is not used);
* ``ops`` / ``viewer``: a browser context logged in through the console's login page;
* ``shots``: the directory the tests save a screenshot of each page in (the test run's tmp
  output; the path is printed).

``first_paint_ms`` reads the page's First Contentful Paint from the Paint Timing API (relative
to the navigation's start, so it includes the server's rendering).
"""

from __future__ import annotations

import concurrent.futures
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from ..admin.admin_process import running_admin
from ..admin.test_admin_security import write_auth_file
from ..broker_process import free_port
from ..cluster.cluster_processes import ClusterProcesses

OPS: Final = ("ops", "ops-password")
VIEWER: Final = ("viewer", "viewer-password")
PAINT_BUDGET_MS: Final = 300.0
SAMPLE_INTERVAL_S: Final = 1.0  # the console's metrics sampling, fast for the charts' tests
GRAFANA_URL: Final = "http://grafana.invalid:3000"


@dataclass(frozen=True)
class ConsoleStack:
    cluster: ClusterProcesses
    url: str  # the admin service's base URL; the console is at url + "/console/"
    sasl_bootstrap: str  # the brokers' SASL_PLAINTEXT listeners

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3) -> None:
        """``ClusterProcesses.create_topic`` (leaders on every broker) on a thread of its own:
        it runs asyncio, and Playwright's sync API holds this thread's event loop."""
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(self.cluster.create_topic, name, partitions,
                        replication_factor).result()


def _viewer_acls() -> list[AclBinding]:
    def allow(kind: ResourceType, name: str, operation: AclOperation) -> AclBinding:
        return AclBinding(kind, name, ResourcePatternType.LITERAL, "User:viewer", "*",
                          operation, AclPermissionType.ALLOW)

    return [allow(ResourceType.TOPIC, "*", AclOperation.DESCRIBE),
            allow(ResourceType.TOPIC, "*", AclOperation.DESCRIBE_CONFIGS),
            allow(ResourceType.TOPIC, "*", AclOperation.READ),
            allow(ResourceType.GROUP, "*", AclOperation.DESCRIBE),
            allow(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE)]


@pytest.fixture(scope="package")
def console_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleStack]:
    workdir = tmp_path_factory.mktemp("console-cluster")
    cluster = ClusterProcesses(workdir, f"sqlite:///{workdir / 'meta.db'}", 3, {
        "authorizer.class.name": "strata.acl", "super.users": "User:ANONYMOUS"})
    sasl = []
    for i, broker in enumerate(cluster.brokers):
        broker.config["broker.rack"] = f"rack-{i}"
        sasl_port = free_port()
        sasl.append(f"127.0.0.1:{sasl_port}")
        listeners = (f"PLAINTEXT://127.0.0.1:{broker.port},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}")
        broker.config.update({"listeners": listeners, "advertised.listeners": listeners,
                              "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"})
    try:
        cluster.start()
        futures = cluster.admin().create_acls(_viewer_acls(), request_timeout=20)
        for future in futures.values():
            future.result(timeout=30)
        auth = write_auth_file(workdir / "auth.json", {}, dict([OPS, VIEWER]))
        with running_admin(workdir / "admin", cluster.bootstrap,
                           args=["--auth-file", str(auth), "--super-users", "User:ops",
                                 "--acl-cache", "0"],
                           env={"STRATA_CONSOLE_SAMPLE_INTERVAL_S": str(SAMPLE_INTERVAL_S),
                                "STRATA_CONSOLE_GRAFANA_URL": GRAFANA_URL}) as admin:
            yield ConsoleStack(cluster, admin.url, ",".join(sasl))
    finally:
        cluster.stop()


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("Debian's chromium is not installed: run `make chromium`")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="package")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("console-screenshots")
    print(f"console screenshots in {directory}")
    return directory


def log_in(context: BrowserContext, url: str, user: tuple[str, str]) -> Page:
    page = context.new_page()
    page.goto(f"{url}/console/login")
    page.fill("input[name=username]", user[0])
    page.fill("input[name=password]", user[1])
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{url}/console/")
    return page


def _context(browser: Browser, stack: ConsoleStack, user: tuple[str, str]
             ) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    try:
        yield log_in(context, stack.url, user)
    finally:
        context.close()


@pytest.fixture(scope="package")
def ops(browser: Browser, console_stack: ConsoleStack) -> Iterator[Page]:
    yield from _context(browser, console_stack, OPS)


@pytest.fixture(scope="package")
def viewer(browser: Browser, console_stack: ConsoleStack) -> Iterator[Page]:
    yield from _context(browser, console_stack, VIEWER)


def poll(page: Page, check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Reload ``page`` until ``check()`` holds, at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what}")
        page.wait_for_timeout(250)
        page.reload()


def first_paint_ms(page: Page, timeout_s: float = 10.0) -> float:
    """The page's First Contentful Paint in ms since its navigation started (polled: the
    entry is recorded just after the paint)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value: Any = page.evaluate(
            "() => { const e = performance.getEntriesByName('first-contentful-paint')[0];"
            " return e ? e.startTime : null; }")
        if value is not None:
            return float(value)
        if time.monotonic() > deadline:
            raise AssertionError(f"no first-contentful-paint entry for {page.url}")
        page.wait_for_timeout(20)


def visit(page: Page, url: str, shots: Path | None = None, name: str = "") -> float:
    """Open ``url``, check its first paint is within budget, save a screenshot; the paint."""
    page.goto(url)
    paint = first_paint_ms(page)
    print(f"first paint {paint:.0f} ms: {url}")
    if shots is not None and name:
        page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    return paint
