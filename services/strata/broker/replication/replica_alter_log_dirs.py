"""``ReplicaAlterLogDirsManager``: the movers of this broker's replicas between its log dirs.

Kafka's ``ReplicaAlterLogDirsManager`` / ``ReplicaAlterLogDirsThread`` on asyncio: one task per
moving partition (started by AlterReplicaLogDirs) follows the partition's current log into its
future log, one step at a time as ``strata.storage.future_log.next_step`` decides:

* copy: read up to ``replica.fetch.max.bytes`` (1 MiB) of the current log on the event loop
  (a read is a snapshot of file slices), then read the bytes and append them to the future log
  in a worker thread (``future_log.copy_batches``); appends to the current log go on meanwhile;
* truncate / restart: the current log was truncated or its start moved past the copy;
* swap: once what is left to copy is the tail of the current log's active segment, smaller
  than a chunk, the future log is fsynced in a worker thread and the step is re-decided
  (appends went on meanwhile); then the tail left (what arrived since) is copied,
  ``LogManager.replace_current_with_future_log`` runs and ``Partition.log`` is set, in one step
  on the event loop with no await in between. Every append of every partition runs on the
  event loop, so none can land between the last copy and the swap: appends are paused for
  that step only, and a move converges for any append rate below the copy rate (a mover that
  swapped only when it found itself exactly caught up could chase a steady producer forever).
  Afterwards every checkpoint file is rewritten (the partition's entries move to its new dir,
  its cleaner checkpoint too) and cleaning of the partition, paused for the move, resumes.

A mover ends when its move is done, when the partition or its future log goes away
(``LogManager.delete_log``, a newer AlterReplicaLogDirs), or on a storage error (the future log
is then removed; the current log serves on). Reads and writes of the partition are never
refused because of a move. A move a restart cut off starts again from scratch once its
partition is hosted (``resume_interrupted``, every second from the periodic tasks).

One manager per broker (``BrokerState.log_dir_movers``), event-loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from strata.broker.replication.replica_manager import ReplicaManager
from strata.storage.errors import StorageError
from strata.storage.future_log import Action, copy_batches, flush_future, next_step, positions
from strata.storage.log import Log

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
COPY_CHUNK_BYTES = 1024 * 1024  # Kafka's replica.fetch.max.bytes default

class ReplicaAlterLogDirsManager:
    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager
        self.log_manager = replica_manager.log_manager
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        self._stopping: set[TopicPartition] = set()

    def moving(self) -> set[TopicPartition]:
        return {tp for tp, task in self._tasks.items() if not task.done()}

    def add_partition(self, topic: str, partition: int, future: Log) -> None:
        """Start moving the partition into ``future``; its earlier mover must have stopped."""
        tp = (topic, partition)
        if tp in self.moving():
            raise RuntimeError(f"{topic}-{partition} is already moving")
        self._tasks[tp] = asyncio.get_running_loop().create_task(
            self._move(tp, future), name=f"alter-log-dir-{topic}-{partition}")

    def resume_interrupted(self) -> int:
        """Start again each move a restart cut off (``LogManager.interrupted_moves``) whose
        partition is hosted now (Kafka's ``maybeAddLogDirFetchers`` after a restart; the copy
        starts from scratch). Returns how many started."""
        started = 0
        pending = self.log_manager.interrupted_moves
        for tp, destination in list(pending.items()):
            if self.replica_manager.get_partition(*tp) is None or \
                    self.log_manager.get_log(*tp) is None:
                continue  # not hosted (yet): asked again at the next round
            del pending[tp]
            if tp in self.moving():
                continue
            try:
                future = self.log_manager.create_future_log(*tp, destination)
            except StorageError as exc:
                logger.warning("cannot resume moving %s-%d to %s: %s", *tp, destination, exc)
                continue
            if future is not None:
                logger.info("resuming the move of %s-%d to %s", *tp, destination)
                self.add_partition(*tp, future)
                started += 1
        return started

    async def stop(self, topic: str, partition: int) -> None:
        """Stop the partition's mover after its current step (a worker thread is never left
        writing to a future log that is being removed) and wait for it."""
        tp = (topic, partition)
        task = self._tasks.get(tp)
        if task is None:
            return
        self._stopping.add(tp)
        try:
            await asyncio.wait([task])
        finally:
            self._stopping.discard(tp)

    async def wait(self, topic: str, partition: int) -> None:
        """Until the partition's mover (if any) has ended (tests)."""
        task = self._tasks.get((topic, partition))
        if task is not None:
            await asyncio.wait([task])

    async def _move(self, tp: TopicPartition, future: Log) -> None:
        cleaner = self.log_manager.cleaner
        cleaner.abort_and_pause_cleaning(tp)  # a round in progress swaps nothing more
        try:
            await self._follow(tp, future)
        except Exception:  # the move fails alone; the current log serves on
            if self.log_manager.future_log(*tp) is future and \
                    not self.log_manager.shutting_down:  # else: given up meanwhile
                logger.exception("moving %s-%d to %s failed", *tp, future.dir.parent)
                await asyncio.to_thread(self.log_manager.remove_future_log, *tp)
        finally:
            with contextlib.suppress(ValueError):  # not paused: the partition was deleted
                cleaner.resume_cleaning(tp)
            if self._tasks.get(tp) is asyncio.current_task():
                del self._tasks[tp]

    async def _follow(self, tp: TopicPartition, future: Log) -> None:
        flushed = False
        while True:
            partition = self.replica_manager.get_partition(*tp)
            if partition is None or tp in self._stopping or self.log_manager.shutting_down \
                    or self.log_manager.future_log(*tp) is not future:
                return  # deleted, stopped for a newer move, abandoned, or shutting down
            current = partition.log
            if current.offline:
                raise StorageError(f"the current log of {tp[0]}-{tp[1]} is offline")
            step = next_step(positions(current, future))
            if step.action is Action.TRUNCATE:
                await asyncio.to_thread(future.truncate_to, step.offset)
                continue
            if step.action is Action.RESTART:
                await asyncio.to_thread(future.truncate_fully_and_start_at, step.offset)
                continue
            data = current.read(step.offset, COPY_CHUNK_BYTES) \
                if step.action is Action.COPY else None
            tail = step.action is Action.SWAP or (
                data is not None and data.size < COPY_CHUNK_BYTES and
                step.offset >= current.active_segment.base_offset)
            if not tail and data is not None:
                await asyncio.to_thread(copy_batches, future, data)
            elif not flushed:  # fsync the bulk of the copy before the swap
                await asyncio.to_thread(flush_future, future)
                flushed = True
            else:
                # One step on the event loop, with no await: every append of the partition
                # runs on the event loop, so none can come between the last copy (less than
                # a chunk: what arrived since the previous step) and the swap.
                if data is not None:
                    copy_batches(future, data)
                if future.log_end_offset != current.log_end_offset:
                    continue
                source = current.dir.parent
                partition.log = self.log_manager.replace_current_with_future_log(*tp)
                await asyncio.to_thread(self._after_swap, tp, source, partition.log.dir.parent)
                return

    def _after_swap(self, tp: TopicPartition, source: Path, destination: Path) -> None:
        """Blocking: the partition's checkpoint entries (recovery point, log start offset,
        high watermark, how far it is clean) move to its new dir. A failure is only logged:
        the move is done, and the periodic checkpoints write these entries again."""
        try:
            self.log_manager.checkpoint_all()
            self.log_manager.cleaner.manager.alter_checkpoint_dir(tp, source, destination)
        except StorageError as exc:
            logger.error("%s-%d moved, but its checkpoints were not rewritten: %s", *tp, exc)
