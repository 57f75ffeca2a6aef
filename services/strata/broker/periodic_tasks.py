"""``PeriodicTasks``: the broker's background jobs (Kafka's ``KafkaScheduler`` jobs).

Owns which job runs how often (the interval configs, Kafka's names) and on which thread:

* ``flush_dirty_logs`` (``log.flush.scheduler.interval.ms``) and the recovery-point,
  log-start-offset and high-watermark checkpoints run in worker threads: fsync never runs on
  the loop;
* retention (``log.retention.check.interval.ms``), producer-id expiration and committed-offset
  expiry (``offsets.retention.check.interval.ms``) run on the loop: they change segment lists
  and group state, which the loop owns;
* ISR expiration every ``replica.lag.time.max.ms`` / 2, on the loop (Kafka's isr-expiration);
* every second, on the loop, the AlterReplicaLogDirs moves a restart cut off start again once
  their partition is hosted (``ReplicaAlterLogDirsManager.resume_interrupted``);
* ``log.cleaner.threads`` compaction workers: ``clean_one`` in a thread, again at once while
  there was work, else after ``log.cleaner.backoff.ms`` (Kafka's ``CleanerThread``).

Invariants: every job waits on the broker's stop event, never sleeps, so all end promptly
once it is set (a flush in progress completes; the server aborts a cleaning round); a job
that raises is logged and runs again at its next interval. Started and joined on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from strata.broker.broker_state import BrokerState
from strata.broker.config import BrokerConfig
from strata.storage.log_manager import LogManager

logger = logging.getLogger(__name__)

RESUME_MOVES_INTERVAL_S = 1.0  # how soon a cut-off AlterReplicaLogDirs move starts again


class PeriodicTasks:
    def __init__(self, config: BrokerConfig, stopping: asyncio.Event) -> None:
        self.config = config
        self._stopping = stopping
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, state: BrokerState) -> None:
        """Schedule every job (the startup's last step before ready)."""
        config, log_manager = self.config, state.log_manager
        loop = asyncio.get_running_loop()
        self._schedule("flush", "log.flush.scheduler.interval.ms",
                       lambda: asyncio.to_thread(log_manager.flush_dirty_logs))
        self._schedule("recovery-point checkpoint", "log.flush.offset.checkpoint.interval.ms",
                       lambda: asyncio.to_thread(log_manager.checkpoint_recovery_points))
        self._schedule("log-start-offset checkpoint",
                       "log.flush.start.offset.checkpoint.interval.ms",
                       lambda: asyncio.to_thread(log_manager.checkpoint_log_start_offsets))
        self._schedule("high-watermark checkpoint", "replica.high.watermark.checkpoint.interval.ms",
                       lambda: asyncio.to_thread(log_manager.checkpoint_high_watermarks))
        self._schedule("retention", "log.retention.check.interval.ms",
                       lambda: _on_loop(log_manager.cleanup_logs))
        self._schedule("producer-id expiration", "producer.id.expiration.check.interval.ms",
                       lambda: _on_loop(log_manager.remove_expired_producers))
        self._schedule("group metadata expiration", "offsets.retention.check.interval.ms",
                       lambda: _on_loop(state.group_coordinator.cleanup_group_metadata))
        # Kafka's isr-expiration task: every replica.lag.time.max.ms / 2.
        max_lag_ms = config.get_int("replica.lag.time.max.ms")
        self._tasks.append(loop.create_task(self._every(
            "isr expiration", max_lag_ms / 2000.0,
            lambda: _on_loop(lambda: state.replica_manager.maybe_shrink_isr(max_lag_ms))),
            name="strata-isr-expiration"))
        # Moves between log dirs a restart cut off start again once their partition is hosted.
        self._tasks.append(loop.create_task(self._every(
            "log dir moves", RESUME_MOVES_INTERVAL_S,
            lambda: _on_loop(state.log_dir_movers.resume_interrupted)),
            name="strata-log-dir-moves"))
        if log_manager.cleaner_config.enable:
            for worker in range(log_manager.cleaner_config.threads):
                self._tasks.append(loop.create_task(self._clean(log_manager),
                                                    name=f"strata-cleaner-{worker}"))

    async def join(self) -> None:
        """Wait for every job to end (after the stop event was set)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _schedule(self, name: str, interval_key: str,
                  work: Callable[[], Awaitable[object]]) -> None:
        interval_s = self.config.get_int(interval_key) / 1000.0
        self._tasks.append(asyncio.get_running_loop().create_task(
            self._every(name, interval_s, work), name=f"strata-{name}"))

    async def _every(self, name: str, interval_s: float,
                     work: Callable[[], Awaitable[object]]) -> None:
        interval_s = max(interval_s, 0.01)
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), interval_s)
            if self._stopping.is_set():
                return
            try:
                await work()
            except Exception:
                logger.exception("periodic %s failed", name)

    async def _clean(self, log_manager: LogManager) -> None:
        """One cleaner worker: compact the filthiest log, again at once while there was work,
        else after ``log.cleaner.backoff.ms`` (Kafka's ``CleanerThread``)."""
        backoff_s = log_manager.cleaner_config.backoff_ms / 1000.0
        while not self._stopping.is_set():
            try:
                stats = await asyncio.to_thread(log_manager.clean_one)
            except Exception:
                logger.exception("log cleaner failed")
                stats = None
            if stats is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), backoff_s)


async def _on_loop(work: Callable[[], object]) -> object:
    return work()
