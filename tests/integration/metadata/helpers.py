"""Test helpers: read a watch with deadlines, and drive a store in another process.

``EventPump`` iterates a watch in a background task so a test can wait for events with a
deadline (``take``) or check none arrives (``expect_quiet``) without cancelling the watch.
``Peer`` runs ``peer.py`` (a store in a separate Python process on the same URL): the way to
show two processes share one SQLite file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from strata.metadata import WatchEvent

PEER = Path(__file__).with_name("peer.py")
REPO = Path(__file__).resolve().parents[3]


class EventPump:
    def __init__(self, watch: AsyncIterator[WatchEvent]) -> None:
        self._watch = watch
        self._queue: asyncio.Queue[WatchEvent | BaseException] = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            async for event in self._watch:
                self._queue.put_nowait(event)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            self._queue.put_nowait(exc)

    async def next(self, timeout_s: float = 5.0) -> WatchEvent:
        item = await asyncio.wait_for(self._queue.get(), timeout_s)
        if isinstance(item, BaseException):
            raise item
        return item

    async def take(self, count: int, timeout_s: float = 5.0) -> list[WatchEvent]:
        async with asyncio.timeout(timeout_s):
            return [await self.next(timeout_s) for _ in range(count)]

    async def expect_quiet(self, within_s: float) -> None:
        """Fail if an event arrives within ``within_s`` (time passing is the point here)."""
        with contextlib.suppress(TimeoutError):
            event = await self.next(within_s)
            raise AssertionError(f"unexpected watch event {event}")

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        aclose = getattr(self._watch, "aclose", None)
        if aclose is not None:
            await aclose()


class Peer:
    """``peer.py COMMAND URL ARGS...`` as a child process, spoken to in JSON lines."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, *args: str) -> Peer:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(PEER),
            *args,
            cwd=REPO,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def read(self, timeout_s: float = 10.0) -> Any:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), timeout_s)
        if not line:
            code = await self.process.wait()
            raise AssertionError(f"peer exited with {code} before answering")
        return json.loads(line)

    async def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()

    def kill(self) -> None:
        """SIGKILL this child by PID (a crashed broker)."""
        if self.process.returncode is None:
            self.process.kill()

    async def wait(self, timeout_s: float = 10.0) -> int:
        return await asyncio.wait_for(self.process.wait(), timeout_s)

    async def stop(self) -> None:
        self.kill()
        await self.wait()
