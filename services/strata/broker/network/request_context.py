"""The seam between a connection and the handlers: what a handler is told, and what it returns.

Owns ``RequestContext`` (the request's header, the peer, the broker's shared state, the
listener, the security session, the client-quota throttle time the answer carries and the
request's thread time under a request quota),
``Response`` (a pre-encoded response body in chunks, ``FileSlice`` chunks sent with
``os.sendfile``) and ``Handler`` (``async def handle(ctx, request)``). The connection
(``connection.py``) builds one ``RequestContext`` per request and writes what the handler
returns; handlers import these names from here, never the connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from strata.broker.network.security_session import SecuritySession
from strata.broker.security.authorization import AuthorizationFailed
from strata.protocol.header import RequestHeader
from strata.security import principal as principals
from strata.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from strata.storage.file_records import FileSlice

if TYPE_CHECKING:
    from strata.broker.broker_state import BrokerState
    from strata.broker.quotas.request_time import RequestTime


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about a request besides its body."""

    header: RequestHeader
    client_host: str
    client_port: int
    state: BrokerState
    listener: str = "PLAINTEXT"  # the listener name the request came in on
    session: SecuritySession | None = None
    throttle_time_ms: int = 0  # client-quota throttle the response carries (quotas)
    request_time: RequestTime | None = None  # set while a request_percentage quota is in force

    @property
    def principal(self) -> str:
        """``User:alice``, ``User:CN=...`` or ``User:ANONYMOUS`` (what ACLs check)."""
        return self.session.principal if self.session is not None else principals.ANONYMOUS

    def authorize(self, operation: AclOperation, resource_type: ResourceType,
                  name: str = CLUSTER_NAME) -> bool:
        """May this request's principal, from its host, do ``operation`` on the resource?"""
        authorizer = self.state.authorizer
        return authorizer is None or authorizer.authorize(
            self.principal, self.client_host, operation, resource_type, name)

    def require(self, operation: AclOperation, resource_type: ResourceType,
                name: str = CLUSTER_NAME) -> None:
        """``AuthorizationFailed`` (the whole request refused) unless ``authorize``."""
        if not self.authorize(operation, resource_type, name):
            raise AuthorizationFailed(resource_type, name, operation)


@dataclass(slots=True)
class Response:
    """A pre-encoded response body in chunks, written in order after the response header.

    ``FileSlice`` chunks go out with ``os.sendfile``; the connection adds size and header.
    ``error_codes``: the error codes the encoded body carries (top level and per partition),
    for the request metrics, which cannot read the bytes."""

    chunks: list[bytes | FileSlice]
    error_codes: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        return sum(c.length if isinstance(c, FileSlice) else len(c) for c in self.chunks)


Handler = Callable[[RequestContext, Any], Awaitable[Any]]
"""``async def handle(ctx, request) -> kio response body | Response | None`` (None: no answer)."""
