"""One blocking Kafka-protocol connection from a Spark executor to one broker.

Owns :class:`BrokerConnection`: connect (TCP, then TLS when the client properties say
``SSL``/``SASL_SSL``), log in (SASL PLAIN or SCRAM with :mod:`strata.broker.security.sasl_client`,
the exchange followers use), then one request at a time. The login is described by the
source's ``kafka.*`` options with librdkafka's names (``security.protocol``, ``sasl.mechanism``,
``sasl.username``, ``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``, ...),
read by :func:`strata.broker.security.client_properties.client_security`, the same reader the
CLI and the operator use.

:func:`supported` says whether this connection can honour the properties at all: any
``ssl.*``/``sasl.*`` property it does not know (a PKCS#12 keystore, a CRL, cipher lists,
``enable.ssl.certificate.verification``, ...) or a mechanism it does not speak (GSSAPI,
OAUTHBEARER) means no, and the caller keeps librdkafka, which honours them. A property it
knows but cannot use (an unreadable CA file) raises ``ClientPropertiesError`` naming it.

Invariants: a response whose correlation id is not the request's raises ``ConnectionError``;
raw responses are read into one buffer that the next response overwrites (no allocation and
zero-filling per fetch), so a raw body is valid until the next request; a refused login, an
untrusted broker certificate or a client certificate refused with a TLS alert is
:class:`AuthenticationError` from the constructor, which retrying cannot fix (callers must not
retry it); network failures are ``OSError``/``ConnectionError`` (a connection closed right
after the TLS handshake says that a refused client certificate looks like that); a response
that does not decode raises the codec's error.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import ssl
import struct
from collections.abc import Mapping
from typing import Any, Final

from strata.broker.network.listeners import ClientSecurity
from strata.broker.security.client_properties import (
    PROPERTIES,
    UnsupportedLogin,
    client_security,
    login_kind,
)
from strata.broker.security.sasl_client import SaslClientError, sasl_login
from strata.protocol import (
    ApiKey,
    RequestHeader,
    build_request,
    decode_response,
    encode_request,
)

REQUEST_TIMEOUT_S: Final = 30.0
_SIZE: Final = struct.Struct(">i")


class AuthenticationError(RuntimeError):
    """The broker refused the login, or its certificate is not trusted: retrying cannot help."""


def _is_security_property(key: str) -> bool:
    return key.startswith(("sasl.", "ssl.", "security.")) or "ssl" in key.split(".")


def security_of(client_config: Mapping[str, Any]) -> ClientSecurity | None:
    """The connection security the client properties describe (None: PLAINTEXT); raises
    ``ClientPropertiesError`` naming a property that cannot be used (e.g. an unreadable file)."""
    return client_security({key: str(value) for key, value in client_config.items()
                            if key in PROPERTIES})


def supported(client_config: Mapping[str, Any]) -> bool:
    """Whether :class:`BrokerConnection` can log in exactly as the client properties say."""
    if any(_is_security_property(key) and key not in PROPERTIES for key in client_config):
        return False
    try:
        login_kind({key: str(value) for key, value in client_config.items()
                    if key in PROPERTIES})
    except UnsupportedLogin:
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
            self.sock = sock
            if security is not None and security.ssl_context is not None:
                self._start_tls(security.ssl_context, host, port)
            if security is not None and security.sasl_mechanism is not None:
                self._login(security, f"{host}:{port}")
        except BaseException:
            getattr(self, "sock", sock).close()  # the TLS socket, once it has wrapped sock
            raise

    def _start_tls(self, context: ssl.SSLContext, host: str, port: int) -> None:
        """TLS, checked by one ApiVersions round trip: under TLS 1.3 a broker that refuses
        the client's certificate says so only in the first record the client reads."""
        try:
            self.sock = context.wrap_socket(self.sock, server_hostname=host)
            self.request(ApiKey.API_VERSIONS, 0, {})
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionError) as exc:
            # Retried like any lost connection, but named: a broker that refuses the client's
            # certificate may just close the connection without a TLS alert (Strata's does).
            raise ConnectionError(
                f"TLS with {host}:{port}: the broker closed the connection right after the "
                "handshake, as a broker does when it refuses the client's certificate "
                f"({exc})") from exc
        except ssl.SSLError as exc:  # a certificate refused either way, or no common protocol
            raise AuthenticationError(f"TLS with {host}:{port}: {exc}") from exc

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
