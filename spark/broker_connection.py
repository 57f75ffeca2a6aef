"""One blocking Kafka-protocol connection from a Spark executor to one broker.

Owns :class:`BrokerConnection`: connect (TCP, then TLS when the client properties say
``SSL``/``SASL_SSL``), log in (SASL PLAIN or SCRAM with :mod:`strata.broker.security.sasl_client`,
the exchange followers use), then one request at a time. The login is described by the
source's ``kafka.*`` options with librdkafka's names (``security.protocol``, ``sasl.mechanism``,
``sasl.username``, ``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``, ...),
read by :func:`strata.broker.security.client_properties.client_security`, the same reader the
CLI and the operator use.

Invariants: a response whose correlation id is not the request's closes nothing but raises
``ConnectionError``; raw responses are read into one buffer that the next response overwrites
(no allocation and zero-filling per fetch), so a raw body is valid until the next request; a
refused login or an untrusted certificate is :class:`AuthenticationError`, which retrying
cannot fix (callers must not retry it); every other failure is ``OSError``/``ConnectionError``.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import ssl
import struct
from collections.abc import Mapping
from typing import Any, Final

from strata.broker.security.client_properties import ClientPropertiesError, client_security
from strata.broker.security.listeners import ClientSecurity
from strata.broker.security.sasl_client import SaslClientError, sasl_login
from strata.protocol import RequestHeader, build_request, decode_response, encode_request

REQUEST_TIMEOUT_S: Final = 30.0
_SIZE: Final = struct.Struct(">i")


class AuthenticationError(RuntimeError):
    """The broker refused the login, or its certificate is not trusted: retrying cannot help."""


def security_of(client_config: Mapping[str, Any]) -> ClientSecurity | None:
    """The connection security the client properties describe (None: PLAINTEXT); raises
    ``ClientPropertiesError`` for what this connection cannot do (e.g. GSSAPI)."""
    return client_security({key: str(value) for key, value in client_config.items()
                            if key == "security.protocol" or key.startswith(("sasl.", "ssl."))})


def supported(client_config: Mapping[str, Any]) -> bool:
    """Whether :class:`BrokerConnection` can log in as the client properties say."""
    try:
        security_of(client_config)
    except ClientPropertiesError:
        return False
    return True


class BrokerConnection:
    """A connected, logged-in connection; ``close()`` it when done."""

    def __init__(self, host: str, port: int, client_id: str,
                 security: ClientSecurity | None = None) -> None:
        self.client_id = client_id
        self._ids = itertools.count(1)
        self._buffer = bytearray(64 * 1024)
        sock = socket.create_connection((host, port), timeout=REQUEST_TIMEOUT_S)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if security is not None and security.ssl_context is not None:
                try:
                    sock = security.ssl_context.wrap_socket(sock, server_hostname=host)
                except ssl.SSLCertVerificationError as exc:
                    raise AuthenticationError(f"TLS with {host}:{port}: {exc}") from exc
            self.sock = sock
            if security is not None and security.sasl_mechanism is not None:
                self._login(security, f"{host}:{port}")
        except BaseException:
            sock.close()
            raise

    def _login(self, security: ClientSecurity, where: str) -> None:
        async def send(api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
            return self.request(api_key, version, dict(fields))

        assert security.sasl_mechanism is not None
        try:
            # The exchange is written for an event loop; here every send() blocks instead.
            asyncio.run(sasl_login(send, security.sasl_mechanism, security.username,
                                   security.password))
        except SaslClientError as exc:
            raise AuthenticationError(f"{where}: {exc}") from exc

    def close(self) -> None:
        self.sock.close()

    def request(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        """Send a request; its response decoded by :mod:`strata.protocol` (kio)."""
        correlation_id = self._send(api_key, version, fields)
        got, body = decode_response(self._read_frame(), api_key, version)
        self._check(got, correlation_id)
        return body

    def request_raw(self, api_key: int, version: int, fields: dict[str, Any]) -> memoryview:
        """Send a request with a v0 response header; the response body, valid until the next
        request on this connection."""
        correlation_id = self._send(api_key, version, fields)
        frame = self._read_frame()
        self._check(_SIZE.unpack_from(frame, 0)[0], correlation_id)
        return frame[4:]

    def _send(self, api_key: int, version: int, fields: dict[str, Any]) -> int:
        correlation_id = next(self._ids)
        self.sock.sendall(encode_request(
            RequestHeader(api_key, version, correlation_id, self.client_id),
            build_request(api_key, version, fields)))
        return correlation_id

    @staticmethod
    def _check(got: int, correlation_id: int) -> None:
        if got != correlation_id:
            raise ConnectionError(f"response correlation id {got}, expected {correlation_id}")

    def _read_frame(self) -> memoryview:
        (size,) = _SIZE.unpack(self._read_into(memoryview(bytearray(4))))
        if size > len(self._buffer):
            self._buffer = bytearray(size)
        return self._read_into(memoryview(self._buffer)[:size])

    def _read_into(self, buf: memoryview) -> memoryview:
        at, size = 0, len(buf)
        while at < size:
            got = self.sock.recv_into(buf[at:])
            if not got:
                raise ConnectionError("the broker closed the connection")
            at += got
        return buf.toreadonly()
