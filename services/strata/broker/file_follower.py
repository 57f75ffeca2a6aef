"""Following a single broker's JSON document that other processes rewrite.

Owns the loop by which a broker without a metadata store keeps state that ``strata`` commands
change behind its back (``acls.json`` by ``strata acls --log-dir``, ``client-quotas.json`` by
``strata quotas``' file store) in force: load it once at start-up, then every ``poll_s``
compare the file's stamp (``JsonDocumentFile.stamp``: inode, size, mtime) with the one last
loaded and reload when it changed. A file that cannot be read keeps what is in force, with a
warning naming it. ``reload_now`` is for the broker's own writes (read-your-writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from strata.storage.json_document import JsonDocumentFile

logger = logging.getLogger(__name__)

FILE_POLL_S: Final = 1.0


class FileFollower:
    """Calls ``reload`` at start and whenever ``file`` changes; ``what`` names it in logs."""

    def __init__(self, file: JsonDocumentFile, reload: Callable[[], Awaitable[None]],
                 what: str, poll_s: float = FILE_POLL_S) -> None:
        self.file = file
        self._reload = reload
        self._what = what
        self._poll_s = poll_s
        self._stamp: tuple[int, int, int] | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.reload_now()
        self._task = asyncio.get_running_loop().create_task(
            self._follow(), name=f"strata-follow-{self.file.path.name}")

    async def reload_now(self) -> None:
        self._stamp = await asyncio.to_thread(self.file.stamp)
        await self._reload()

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self._poll_s)
            try:
                if await asyncio.to_thread(self.file.stamp) != self._stamp:
                    await self.reload_now()
            except (OSError, ValueError) as exc:
                logger.warning("cannot read %s: %s (keeping the %s in force)",
                               self.file.path, exc, self._what)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
