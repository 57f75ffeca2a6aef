"""A metadata store in a separate process, driven by the contract suite (``helpers.Peer``).

``python peer.py COMMAND URL ARGS...``; answers are JSON lines on stdout; ``go`` on stdin
starts the racing commands so both processes begin together.

    race URL PREFIX N        create PREFIX0..PREFIX{N-1} with CAS(version=0), in a random
                             order; {"won": [i...]}
    increment URL KEY N      N compare-and-set increments of the integer at KEY; {"attempts": k}
    watch URL PREFIX FROM N  the first N events of watch(PREFIX, FROM), one line each
    hold-lease URL KEY TTL   put KEY under a kept-alive lease, {"lease": id}; then wait to be killed
"""

from __future__ import annotations

import asyncio
import json
import random
import sys

from strata.metadata import MetadataStore, open_store


def emit(value: object) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


async def wait_go() -> None:
    emit("ready")
    line = await asyncio.to_thread(sys.stdin.readline)
    assert line.strip() == "go", line


async def race(store: MetadataStore, prefix: str, count: str) -> None:
    await wait_go()
    won = []
    for i in random.sample(range(int(count)), int(count)):
        if await store.compare_and_set(f"{prefix}{i}", b"peer", version=0) is not None:
            won.append(i)
    emit({"won": won})


async def increment(store: MetadataStore, key: str, count: str) -> None:
    await wait_go()
    attempts = 0
    for _ in range(int(count)):
        while True:
            attempts += 1
            entry = await store.get(key)
            assert entry is not None
            new = str(int(entry.value) + 1).encode()
            if await store.compare_and_set(key, new, version=entry.version) is not None:
                break
    emit({"attempts": attempts})


async def watch(store: MetadataStore, prefix: str, from_revision: str, count: str) -> None:
    seen = 0
    emit("ready")
    async for event in store.watch(prefix, from_revision=int(from_revision)):
        emit([event.kind.value, event.key, event.value.decode(), event.revision])
        seen += 1
        if seen == int(count):
            return


async def hold_lease(store: MetadataStore, key: str, ttl: str) -> None:
    lease = await store.grant_lease(float(ttl))
    version = await store.put(key, b"held", lease=lease.id)
    emit({"lease": lease.id, "version": version})
    await asyncio.Event().wait()


COMMANDS = {"race": race, "increment": increment, "watch": watch, "hold-lease": hold_lease}


async def main(command: str, url: str, *args: str) -> None:
    store = open_store(url)
    try:
        await COMMANDS[command](store, *args)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
