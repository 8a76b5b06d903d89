"""The OAuth flow around MCP requests: recognised as auth steps, neither calls nor failures.

Before and between MCP requests a client fetches the protected-resource and authorization-server
metadata, registers, is sent to authorize, and exchanges a code or refresh token for an access token
(docs/ARCHITECTURE.md, "Auth steps"). Those exchanges carry no JSON-RPC; without this they would be
skipped as "not MCP" and the story of a 401 followed by a retry with credentials would have a hole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from mcp_blackbox.analyzer.model.records import Exchange

# Path prefixes of the discovery documents (RFC 9728, RFC 8414, OpenID Connect Discovery).
METADATA = {
    "/.well-known/oauth-protected-resource": "protected-resource metadata",
    "/.well-known/oauth-authorization-server": "authorization-server metadata",
    "/.well-known/openid-configuration": "OpenID configuration",
}


class _OAuthRequest(NamedTuple):
    """An OAuth request: its method, how its path ends, what it must carry, and the step it is."""

    method: str
    path_end: str
    carries: Callable[[Exchange], bool]
    step: str


# The requests of the flow after discovery, told by method, path and a field only that step sends.
_OAUTH_REQUESTS: tuple[_OAuthRequest, ...] = (
    _OAuthRequest("POST", "/token", lambda e: b"grant_type=" in (e.request_body or b""), "token exchange"),
    _OAuthRequest("POST", "/register", lambda e: b"redirect_uris" in (e.request_body or b""), "client registration"),
    _OAuthRequest("GET", "/authorize", lambda e: "response_type" in e.query, "authorization request"),
)


def auth_step(exchange: Exchange) -> str | None:
    """What step of the OAuth flow this exchange is, or None."""
    path = exchange.path
    for well_known, step in METADATA.items():
        # RFC 8414 puts the well-known part before a path (/.well-known/oauth-authorization-server/mcp),
        # OpenID after it (/mcp/.well-known/openid-configuration): clients probe both.
        if well_known in path:
            return step
    for request in _OAUTH_REQUESTS:
        if exchange.method == request.method and path.endswith(request.path_end) and request.carries(exchange):
            return request.step
    return None


def auth_record(exchange: Exchange, step: str) -> dict[str, Any]:
    return {
        "flow": exchange.flow_id,
        "source": exchange.source,
        "t": exchange.t_request,
        "step": step,
        "method": exchange.method,
        "path": exchange.path,
        "status": exchange.status,
    }
