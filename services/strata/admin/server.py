"""``run``: serve the admin application with uvicorn until SIGINT/SIGTERM (``strata admin``).

SIGINT/SIGTERM start uvicorn's graceful shutdown (in-flight requests finish, then the lifespan
flushes the producer) and the process exits 0. Binds ``host:port``; the port 0 is not
supported (``strata dev`` and probes need a known port). With ``ServerTls`` it serves HTTPS
only (uvicorn's ``ssl_*``: PEM certificate chain and key, and optionally a CA that client
certificates must chain to, ``client_auth`` ``optional`` or ``required``).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import uvicorn

from strata.admin.app import create_app
from strata.admin.kafka_gateway import AdminSettings

CLIENT_AUTH: Final = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL,
                      "required": ssl.CERT_REQUIRED}


@dataclass(frozen=True, slots=True)
class ServerTls:
    """HTTPS for the admin server: PEM files, as mounted from a ``kubernetes.io/tls`` Secret."""

    certfile: Path
    keyfile: Path
    ca_certs: Path | None = None
    client_auth: str = "none"

    def uvicorn_options(self) -> dict[str, object]:
        if self.client_auth not in CLIENT_AUTH:
            raise ValueError(f"client auth must be one of {', '.join(CLIENT_AUTH)}")
        if self.client_auth != "none" and self.ca_certs is None:
            raise ValueError("client certificates need a CA file to check them against")
        options: dict[str, object] = {"ssl_certfile": str(self.certfile),
                                      "ssl_keyfile": str(self.keyfile),
                                      "ssl_cert_reqs": CLIENT_AUTH[self.client_auth]}
        if self.ca_certs is not None:
            options["ssl_ca_certs"] = str(self.ca_certs)
        return options


def run(settings: AdminSettings, host: str, port: int, log_level: str = "info",
        tls: ServerTls | None = None) -> int:
    """Serve until stopped; 0 after a clean shutdown."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    config = uvicorn.Config(create_app(settings), host=host, port=port, log_level=log_level,
                            access_log=False, lifespan="on", loop="asyncio",
                            **(tls.uvicorn_options() if tls is not None else {}))  # type: ignore[arg-type]
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
