"""The console's metrics sampler: the brokers' own ``/metrics`` and log dirs, every few seconds.

No Prometheus is needed: ``MetricsSampler`` reads what each broker serves and keeps the
series the console draws in a ``SeriesStore`` (``strata.admin.console.series``):

* where: the live brokers (DescribeCluster) and each one's ``http.port`` (DescribeConfigs on
  the broker: the port of its ``/metrics``), at ``http://<advertised host>:<http.port>/metrics``;
  looked up again every ``DISCOVERY_S`` and whenever a scrape fails;
* every ``interval_s``: each broker's page (``broker_scrape.parse``) and DescribeLogDirs
  (``strata.client.log_dirs``), then

  - ``broker:<id>:bytes_in|records_in|bytes_out|requests``: counters (rates);
  - ``broker:<id>:under_replicated``: the partitions it leads that are under-replicated;
  - ``cluster:bytes_in|records_in|bytes_out``: the sum of the brokers' rates at this tick;
  - ``cluster:records_out``: records the consumer groups committed past per second (their
    committed offsets' forward moves, ``broker_scrape.committed_increase``);
  - ``topic:<name>:bytes_in|records_in``: counters over the brokers' sums (a topic's series
    appear with its first append, so a topic absent at the previous tick starts from 0 there:
    its first records count too);
  - ``group:<id>:lag``: each group's total lag (``broker_scrape.group_lags``);
  - ``logdir:<broker>:<path>:used``: bytes used on the log dir's file system;

  the sums and lags only from ticks where every broker answered (a missing broker would make a
  total drop, which would read as a counter reset); the latest ``LogDirs`` and topic sizes
  are kept for the pages (``latest_log_dirs``, ``topic_sizes``).

A tick that takes long (a loaded cluster: each broker renders its whole page) stretches the
interval: the sampler then waits ``BUSY_FACTOR`` times as long as the tick took, so it never
keeps the brokers busy more than a third of the time.

Lifecycle: ``ensure_started`` (the first console request) starts one task on the event loop;
``stop`` (the admin service's shutdown) ends it. A failing tick is logged and the next one
tried; nothing here ever fails a page. The clock is injected (``wall``: the points' time,
epoch seconds, as the charts label them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import httpx

from strata.admin.console import broker_scrape
from strata.admin.console.series import SeriesStore
from strata.admin.kafka_gateway import KafkaGateway
from strata.admin.problems import ProblemError
from strata.admin.routers.cluster import describe_cluster
from strata.client import log_dirs

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL_S: Final = 5.0
DISCOVERY_S: Final = 60.0
BUSY_FACTOR: Final = 2.0  # idle at least twice as long as a tick took (a loaded cluster)
HTTP_PORT_KEY: Final = "http.port"
TRAFFIC: Final = ("bytes_in", "records_in", "bytes_out", "requests")


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    id: int
    host: str
    port: int  # Kafka
    metrics_url: str | None


def _endpoints(gateway: KafkaGateway) -> list[BrokerEndpoint]:
    out = []
    for broker in describe_cluster(gateway).brokers:
        url = None
        try:
            entry = gateway.kafka.broker_configs(broker.id).get(HTTP_PORT_KEY)
            if entry is not None and entry.value and int(entry.value) > 0:
                url = f"http://{broker.host}:{int(entry.value)}/metrics"
        except Exception as exc:  # noqa: BLE001 - no metrics for this broker, not a failure
            logger.info("no metrics address for broker %d: %s", broker.id, exc)
        out.append(BrokerEndpoint(broker.id, broker.host, broker.port, url))
    return out


class MetricsSampler:
    """Samples the brokers into ``store`` every ``interval_s`` (see the module docstring)."""

    def __init__(self, gateway: KafkaGateway, store: SeriesStore | None = None,
                 interval_s: float = DEFAULT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.gateway = gateway
        self.store = store if store is not None else SeriesStore()
        self.interval_s = interval_s
        self._clock = clock
        self._wall = wall
        self._task: asyncio.Task[None] | None = None
        self._endpoints: list[BrokerEndpoint] = []
        self._discovered_at: float | None = None
        self.latest_log_dirs: log_dirs.LogDirs | None = None
        self.topic_sizes: dict[str, int] = {}
        self.ticks = 0
        self._last_complete: float | None = None  # the time of the last tick all answered
        self._committed: tuple[float, dict[broker_scrape.GroupPartition, float]] | None = None
        self._first = asyncio.Event()

    # ------------------------------------------------------------------------- lifecycle
    def ensure_started(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(),
                                                                name="console-sampler")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def first_sample(self, timeout_s: float) -> None:
        """Until a first tick finished (bounded): pages that need sizes wait for one."""
        self.ensure_started()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first.wait(), timeout_s)

    async def _run(self) -> None:
        while True:
            started = self._clock()
            try:
                await self.sample()
            except asyncio.CancelledError:
                raise
            except ProblemError as exc:  # the cluster cannot be reached: said once a tick
                logger.info("console metrics sample failed: %s %s", exc.title, exc.detail)
                self._discovered_at = None
            except Exception:
                logger.warning("console metrics sample failed", exc_info=True)
                self._discovered_at = None
            finally:
                self._first.set()
            took = self._clock() - started
            await asyncio.sleep(max(self.interval_s - took, BUSY_FACTOR * took))

    # -------------------------------------------------------------------------- one tick
    async def _discover(self) -> list[BrokerEndpoint]:
        now = self._clock()
        if self._discovered_at is None or now - self._discovered_at >= DISCOVERY_S:
            self._endpoints = await self.gateway.run(_endpoints, self.gateway)
            self._discovered_at = now
        return self._endpoints

    async def _scrape(self, client: httpx.AsyncClient, url: str) -> broker_scrape.Scrape | None:
        try:
            response = await client.get(url)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            logger.info("scrape of %s failed: %s", url, exc)
            return None
        return await asyncio.to_thread(broker_scrape.parse, response.text)

    async def sample(self) -> None:
        """One tick: scrape every broker, describe the log dirs, feed the store."""
        endpoints = await self._discover()
        addresses = {e.id: (e.host, e.port) for e in endpoints}
        async with httpx.AsyncClient(timeout=self.gateway.settings.timeout_s) as client:
            scrapes, dirs = await asyncio.gather(
                asyncio.gather(*(self._scrape(client, e.metrics_url) for e in endpoints
                                 if e.metrics_url is not None)),
                self._log_dirs(addresses))
        t = self._wall()
        with_url = [e for e in endpoints if e.metrics_url is not None]
        answered = {e.id: s for e, s in zip(with_url, scrapes, strict=True) if s is not None}
        self._feed(t, answered, complete=len(answered) == len(endpoints) > 0)
        if dirs is not None:
            self.latest_log_dirs = dirs
            self.topic_sizes = log_dirs.topic_sizes(dirs.dirs)
            for d in dirs.dirs:
                if d.used_bytes is not None:
                    self.store.gauge(f"logdir:{d.broker}:{d.path}:used", t, d.used_bytes)
        if len(answered) < len(with_url) or (dirs is not None and dirs.unreachable):
            self._discovered_at = None  # a broker moved or left: look again next tick
        self.ticks += 1

    async def _log_dirs(self, addresses: Mapping[int, tuple[str, int]]
                        ) -> log_dirs.LogDirs | None:
        try:
            return await self.gateway.call(log_dirs.describe_log_dirs, addresses)
        except ProblemError as exc:
            logger.info("DescribeLogDirs failed: %s", exc.detail)
            return None

    def _feed(self, t: float, scrapes: Mapping[int, broker_scrape.Scrape],
              complete: bool) -> None:
        store = self.store
        sums = dict.fromkeys(TRAFFIC, 0.0)
        known = dict.fromkeys(TRAFFIC, True)
        for broker, scrape in scrapes.items():
            if scrape.under_replicated is not None:
                store.gauge(f"broker:{broker}:under_replicated", t, scrape.under_replicated)
            for name in TRAFFIC:
                rate = store.counter(f"broker:{broker}:{name}", t, getattr(scrape, name))
                if rate is None:
                    known[name] = False
                else:
                    sums[name] += rate
        if not complete:
            return
        for name in TRAFFIC:
            if known[name]:
                store.gauge(f"cluster:{name}", t, sums[name])
        topics_bytes: dict[str, float] = {}
        topics_records: dict[str, float] = {}
        for scrape in scrapes.values():
            for topic, value in scrape.topic_bytes_in.items():
                topics_bytes[topic] = topics_bytes.get(topic, 0.0) + value
            for topic, value in scrape.topic_records_in.items():
                topics_records[topic] = topics_records.get(topic, 0.0) + value
        for prefix, totals in (("bytes_in", topics_bytes), ("records_in", topics_records)):
            for topic, value in totals.items():
                key = f"topic:{topic}:{prefix}"
                if not store.has_counter(key) and self._last_complete is not None:
                    # Absent at the last tick: its counters start at 0 with the first append.
                    store.counter_from_zero(key, self._last_complete)
                store.counter(key, t, value)
        self._last_complete = t
        for group, lag in broker_scrape.group_lags(list(scrapes.values())).items():
            store.gauge(f"group:{group}:lag", t, lag)
        committed = broker_scrape.committed_offsets(list(scrapes.values()))
        if self._committed is not None and t > self._committed[0]:
            moved = broker_scrape.committed_increase(self._committed[1], committed)
            store.gauge("cluster:records_out", t, moved / (t - self._committed[0]))
        self._committed = (t, committed)
