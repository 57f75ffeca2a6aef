"""``acls.json`` of a single broker: writers in several processes never lose each other's ACLs."""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path

from strata.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from strata.security.acl_store import FileAclStore

PER_WRITER = 25


def _binding(writer: int, i: int) -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType.TOPIC, f"t-{writer}-{i}", PatternType.LITERAL),
                      AccessControlEntry(f"User:w{writer}", "*", AclOperation.READ,
                                         AclPermissionType.ALLOW))


def _add_one_by_one(log_dir: str, writer: int) -> None:
    store = FileAclStore(Path(log_dir))

    async def main() -> None:
        for i in range(PER_WRITER):
            await store.create([_binding(writer, i)])

    asyncio.run(main())


def test_concurrent_writers_in_other_processes_keep_every_acl(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_add_one_by_one, args=(str(tmp_path), w))
               for w in range(4)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(timeout=120)
        assert p.exitcode == 0
    stored = FileAclStore(tmp_path).read()
    assert set(stored) == {_binding(w, i) for w in range(4) for i in range(PER_WRITER)}

