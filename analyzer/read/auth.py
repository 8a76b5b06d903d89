"""The OAuth flow around MCP requests: recognised as auth steps, neither calls nor failures.

Before and between MCP requests a client fetches the protected-resource and authorization-server
metadata, registers, is sent to authorize, and exchanges a code or refresh token for an access token
(docs/ARCHITECTURE.md, "Auth steps"). Those exchanges carry no JSON-RPC; without this they would be
skipped as "not MCP" and the story of a 401 followed by a retry with credentials would have a hole.
"""

from __future__ import annotations

from typing import Any

from mcp_blackbox.analyzer.model.records import Exchange

# Path prefixes of the discovery documents (RFC 9728, RFC 8414, OpenID Connect Discovery).
METADATA = {
    "/.well-known/oauth-protected-resource": "protected-resource metadata",
    "/.well-known/oauth-authorization-server": "authorization-server metadata",
    "/.well-known/openid-configuration": "OpenID configuration",
}


def auth_step(exchange: Exchange) -> str | None:
    """What step of the OAuth flow this exchange is, or None."""
    path = exchange.path
    for well_known, step in METADATA.items():
        # RFC 8414 puts the well-known part before a path (/.well-known/oauth-authorization-server/mcp),
        # OpenID after it (/mcp/.well-known/openid-configuration): clients probe both.
        if well_known in path:
            return step
    body = exchange.request_body or b""
    if exchange.method == "POST" and path.endswith("/token") and b"grant_type=" in body:
        return "token exchange"
    if exchange.method == "POST" and path.endswith("/register") and b"redirect_uris" in body:
        return "client registration"
    if exchange.method == "GET" and path.endswith("/authorize") and "response_type" in exchange.query:
        return "authorization request"
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
