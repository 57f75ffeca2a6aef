"""``run``: serve the admin application with uvicorn until SIGINT/SIGTERM (``strata admin``).

SIGINT/SIGTERM start uvicorn's graceful shutdown (in-flight requests finish, then the lifespan
flushes the producer) and the process exits 0. Binds ``host:port``; the port 0 is not
supported (``strata dev`` and probes need a known port).
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Iterator

import uvicorn

from strata.admin.app import create_app
from strata.admin.kafka_gateway import AdminSettings


def run(settings: AdminSettings, host: str, port: int, log_level: str = "info") -> int:
    """Serve until stopped; 0 after a clean shutdown."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    config = uvicorn.Config(create_app(settings), host=host, port=port, log_level=log_level,
                            access_log=False, lifespan="on", loop="asyncio")
    server = _Server(config)
    server.run()
    return 0 if server.started else 1


class _Server(uvicorn.Server):
    """uvicorn's server, but a SIGTERM/SIGINT ends in exit 0 after the graceful shutdown.

    uvicorn re-raises the captured signal once it has shut down (so the process dies "by" the
    signal, exit -15); a service under a supervisor should report a clean stop as 0.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self.handle_exit)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
