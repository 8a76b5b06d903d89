"""The truth corpus's OAuth-protected MCP server (tests/truth/peers/oauth_server.py), with one more lever: the
resource server stops accepting the access tokens its authorization server issues, new ones included, as after
a validation key rotated on one side only. A client then gets 401, refreshes, gets 401 with the new token, and
so on: an auth refresh loop (analyzer/across/patterns/clients.py).

    .venv/bin/python -m tests.support.oauth_loop_server --port PORT --public-url http://127.0.0.1:PROXY

Control endpoints (sent to PORT directly, never through the recorder): those of oauth_server.py, and
  POST /_control/reject        from now on every access token is refused (the token endpoint still issues them)
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.truth.peers.oauth_server import ControlLayer, InMemoryProvider, _json, build_mcp


class RejectingProvider(InMemoryProvider):
    """Issues tokens as usual; once ``rejecting``, the resource server finds none of them valid."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        super().__init__(events)
        self.rejecting = False

    async def load_access_token(self, token: str) -> AccessToken | None:
        if self.rejecting:
            return None
        return await super().load_access_token(token)


class RejectLever:
    """``/_control/reject``; everything else to the oauth server's own control layer and app."""

    def __init__(self, app: ASGIApp, provider: RejectingProvider) -> None:
        self.app = app
        self.provider = provider

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/_control/reject":
            self.provider.rejecting = True
            self.provider.events.append({"event": "rejecting"})
            await _json(send, 200, {"rejecting": True})
            return
        await self.app(scope, receive, send)


def build_app(public_url: str) -> ASGIApp:
    events: list[dict[str, Any]] = []
    provider = RejectingProvider(events)
    mcp = build_mcp(public_url.rstrip("/"), provider)
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)  # Host: the recorder's
    return RejectLever(ControlLayer(mcp.streamable_http_app(transport_security=security), provider, events), provider)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="oauth_loop_server.py", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--public-url", required=True, help="the recorder's base URL: issuer and resource")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    uvicorn.run(build_app(args.public_url), host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
