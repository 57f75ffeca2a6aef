"""How ``strata users`` and ``strata acls`` reach what brokers read, without a broker.

Owns the two options they share and the one way to open the target: ``--metadata-store URL``
(a cluster's store, opened with ``strata.metadata.factory.open_store`` and closed after the
work) or ``--log-dir DIR`` (a single broker's files) — exactly one of them, else a usage error.
Storage failures become one ``CliError`` line naming the exception.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from strata.cli.errors import CliError, usage_error
from strata.metadata.store import MetadataStore
from strata.storage.errors import StorageError

S = TypeVar("S")
T = TypeVar("T")

StoreOption = Annotated[str | None, typer.Option(
    "--metadata-store", help="A cluster's metadata store: sqlite:///path, etcd://host:port "
    "or etcds://host:port (TLS files from STRATA_METADATA_STORE_SSL_CAFILE/_CERTFILE/_KEYFILE).")]
LogDirOption = Annotated[Path | None, typer.Option(
    "--log-dir", help="A single broker's first log dir (no metadata.store).")]


def run_on_store(metadata_store: str | None, log_dir: Path | None,
                 in_log_dir: Callable[[Path], S], in_store: Callable[[MetadataStore], S],
                 work: Callable[[S], Awaitable[T]]) -> T:
    """``work`` on the store the options name: ``in_log_dir(log_dir)`` or
    ``in_store(<the opened metadata store>)``."""
    if (metadata_store is None) == (log_dir is None):
        raise usage_error("give exactly one of --metadata-store and --log-dir")

    async def main() -> T:
        if log_dir is not None:
            return await work(in_log_dir(log_dir))
        from strata.metadata.factory import open_store
        from strata.metadata.store_tls import StoreTls

        assert metadata_store is not None  # etcds://: TLS files from STRATA_METADATA_STORE_SSL_*
        store = open_store(metadata_store, tls=StoreTls.from_env(os.environ))
        try:
            return await work(in_store(store))
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except (OSError, ValueError, StorageError) as exc:
        raise CliError(f"{type(exc).__name__}: {exc}") from exc
