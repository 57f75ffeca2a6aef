"""SaslHandshake (key 17, v0-1): the client names its SASL mechanism.

Answers with the listener's ``sasl.enabled.mechanisms`` always. The connection's
``SecuritySession`` decides: NONE (proceed with SaslAuthenticate), UNSUPPORTED_SASL_MECHANISM,
or ILLEGAL_SASL_STATE (not a SASL listener, or already authenticated). v0's unframed tokens
(raw SASL bytes without SaslAuthenticate) are not served: every client in use sends v1.
"""

from __future__ import annotations

from typing import Any

from strata.broker.network.request_context import RequestContext
from strata.protocol.api_keys import ApiKey
from strata.protocol.error_codes import ErrorCode
from strata.protocol.messages import build_response


async def handle(ctx: RequestContext, request: Any) -> Any:
    session = ctx.session
    mechanisms: tuple[str, ...] = ()
    if session is None:
        error = ErrorCode.illegal_sasl_state
    else:
        error = session.handshake(str(request.mechanism).upper())
        mechanisms = session.listener.mechanisms
    return build_response(ApiKey.SASL_HANDSHAKE, ctx.header.api_version,
                          {"error_code": error, "mechanisms": list(mechanisms)})
