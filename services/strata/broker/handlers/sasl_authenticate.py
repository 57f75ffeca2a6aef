"""SaslAuthenticate (key 36, v0-2): one round of the SASL exchange chosen by SaslHandshake.

A failure answers SASL_AUTHENTICATION_FAILED with Kafka's message; the session is then FAILED
and the connection closes it after ``connection.failed.authentication.delay.ms``
(``strata.broker.network.connection``). v1's ``session_lifetime_ms`` is 0: no re-authentication is
required (``connections.max.reauth.ms`` unset).
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.broker.network.security_session import AuthenticationFailed
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response


async def handle(ctx: RequestContext, request: Any) -> Any:
    fields: dict[str, Any] = {"error_code": ErrorCode.none, "error_message": None,
                              "auth_bytes": b"", "session_lifetime": 0}
    session = ctx.session
    if session is None:
        fields.update(error_code=ErrorCode.illegal_sasl_state,
                      error_message="SaslAuthenticate on a listener without SASL")
    else:
        try:
            fields["auth_bytes"] = await session.authenticate(bytes(request.auth_bytes))
        except AuthenticationFailed as exc:
            fields.update(error_code=ErrorCode.sasl_authentication_failed,
                          error_message=str(exc))
    if ctx.header.api_version == 0:
        del fields["session_lifetime"]
    return build_response(ApiKey.SASL_AUTHENTICATE, ctx.header.api_version, fields)
