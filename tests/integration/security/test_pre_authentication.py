"""Before SASL authentication only ApiVersions and the SASL APIs are answered.

Kafka's rule (``SaslServerAuthenticator``): on a SASL listener a connection that sends any other
API key before it has authenticated is disconnected without an answer. Checked for every API key
the broker serves (each at every version it serves), and as a bounded property: any served key
that is not ApiVersions or SASL, at any of its versions, with any body bytes, sent first on a
fresh connection, gets no byte back and the connection closed — while ApiVersions and
SaslHandshake on the same listener are answered.
"""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strata.broker.handlers import build_registry
from strata.broker.network.security_session import PRE_AUTH_APIS
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode

from .conftest import SecureBroker
from .test_sasl_tls import _frame, _read_answer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

RANGES = build_registry().version_ranges()
REFUSED = sorted(key for key in RANGES if key not in PRE_AUTH_APIS)


def _raw_frame(api_key: int, version: int, body: bytes) -> bytes:
    # Request header v1: api_key, api_version, correlation_id, client_id (nullable string).
    payload = struct.pack(">hhih", api_key, version, 7, -1) + body
    return struct.pack(">i", len(payload)) + payload


def _refused(port: int, frame: bytes) -> bool:
    """True when the broker closes the connection without answering ``frame``."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(frame)
        try:
            return sock.recv(1) == b""
        except ConnectionResetError:
            return True


def test_every_served_api_is_refused_before_authentication(
        secure_broker: SecureBroker) -> None:
    assert len(REFUSED) >= 25  # every API the broker serves, except the pre-authentication ones
    not_refused = [(key.name, version) for key in REFUSED for version in RANGES[key].versions()
                   if not _refused(secure_broker.sasl_plaintext,
                                   _raw_frame(key, version, b""))]
    assert not_refused == []


def test_api_versions_and_sasl_are_answered_before_authentication(
        secure_broker: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", secure_broker.sasl_plaintext),
                                  timeout=10) as sock:
        sock.sendall(_frame(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                      "client_software_version": "1"}, 1))
        versions = _read_answer(sock, ApiKey.API_VERSIONS, 3)
        assert versions.error_code == ErrorCode.none
        assert {k.api_key for k in versions.api_keys} >= {ApiKey.SASL_HANDSHAKE,
                                                           ApiKey.SASL_AUTHENTICATE}
        sock.sendall(_frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"}, 2))
        handshake = _read_answer(sock, ApiKey.SASL_HANDSHAKE, 1)
        assert handshake.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(handshake.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_property_any_refused_request_closes_the_connection(
        secure_broker: SecureBroker, data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(REFUSED), label="api_key")
    version = data.draw(st.integers(RANGES[key].min_version, RANGES[key].max_version),
                        label="version")
    body = data.draw(st.binary(max_size=64), label="body")
    assert _refused(secure_broker.sasl_plaintext, _raw_frame(key, version, body))
