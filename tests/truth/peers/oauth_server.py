"""An OAuth-protected MCP server (Streamable HTTP) with its own test authorization server, for the truth corpus.

    .venv/bin/python tests/truth/peers/oauth_server.py --port PORT --public-url http://127.0.0.1:PROXY

One process is both the authorization server and the resource server, built with the official SDK's
own auth support (`mcp.server.auth`: an in-memory OAuthAuthorizationServerProvider, whose tokens the
SDK's ProviderTokenVerifier checks). It advertises --public-url (the recorder in front of it) as its
issuer and resource, so the client's discovery, registration, authorize and token requests all go
through the recorder, and the metadata's `resource` is the URL the client connected to.

/authorize approves at once (no login page): the client reads the code from the Location header.

Control endpoints, for the family only (sent to PORT directly, never through the recorder):
  POST /_control/revoke        revoke every access token (refresh tokens stay): the next request gets 401
  POST /_control/revoke?refresh=1  revoke the refresh tokens too: only a new authorization helps
  POST /_control/refuse?tool=T the next tools/call of tool T gets 403 (a policy refusal, not an auth challenge)
  GET  /_control/log           what the server did: issued tokens, revocations, refusals
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import secrets
import sys
import time
from typing import Any

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp_types import ToolAnnotations
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SCOPE = "mcp:tools"
SUBJECT = "truth-user"  # one resource owner: a refreshed token keeps the session's principal
ACCESS_TOKEN_TTL_S = 3600  # expiry is forced by /_control/revoke, so the scenario does not wait on a clock
REFRESH_TOKEN_TTL_S = 3600
CODE_TTL_S = 300


class InMemoryProvider(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    """A test authorization server: approves every authorization request, rotates refresh tokens."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.events = events

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        self.events.append({"event": "registered", "client_id": client_info.client_id})

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + CODE_TTL_S,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=SUBJECT,
        )
        self.events.append({"event": "authorized", "client_id": client.client_id})
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        if self.codes.pop(authorization_code.code, None) is None:
            raise TokenError(error="invalid_grant", error_description="authorization code already used")
        return self._issue(authorization_code.client_id, authorization_code.scopes, authorization_code.resource, "code")

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        token = self.refresh.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)  # rotation: a refresh token is good once
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource, "refresh")

    async def load_access_token(self, token: str) -> AccessToken | None:
        access = self.access.get(token)
        if access is None or (access.expires_at is not None and access.expires_at < time.time()):
            return None
        return access

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def revoke_all(self, *, refresh: bool) -> int:
        """Revoke every access token (and every refresh token too if asked); how many went."""
        count = len(self.access) + (len(self.refresh) if refresh else 0)
        self.access.clear()
        if refresh:
            self.refresh.clear()
        self.events.append({"event": "revoked", "tokens": count, "refresh": refresh})
        return count

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, grant: str) -> OAuthToken:
        access, refresh = f"at-{secrets.token_hex(16)}", f"rt-{secrets.token_hex(16)}"
        now = int(time.time())
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=now + ACCESS_TOKEN_TTL_S,
            resource=resource,
            subject=SUBJECT,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh,
            client_id=client_id,
            scopes=scopes,
            expires_at=now + REFRESH_TOKEN_TTL_S,
            resource=resource,
            subject=SUBJECT,
        )
        self.events.append({"event": "issued", "grant": grant, "access_token": access[:11]})
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=ACCESS_TOKEN_TTL_S,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )


def build_mcp(public_url: str, provider: InMemoryProvider) -> MCPServer:
    """The resource server and its authorization server in one app, both named by the recorder's URL."""
    auth = AuthSettings(
        issuer_url=public_url,  # type: ignore[arg-type]  # pydantic parses the string
        resource_server_url=f"{public_url}/mcp",  # type: ignore[arg-type]
        required_scopes=[SCOPE],
        client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=[SCOPE]),
        revocation_options=RevocationOptions(enabled=True),
        validate_token_resource=False,  # the in-memory provider issues tokens for this server only
    )
    mcp = MCPServer("mcp-blackbox-oauth-testbed", version="1.0.0", auth_server_provider=provider, auth=auth)

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def balance(account: str) -> str:
        """A read-only lookup that a policy may refuse."""
        return f"{account}: 42.00"

    return mcp


class ControlLayer:
    """The family's levers (revoke, refuse) and the 403 policy refusal, outside the MCP app."""

    def __init__(self, app: ASGIApp, provider: InMemoryProvider, events: list[dict[str, Any]]) -> None:
        self.app = app
        self.provider = provider
        self.events = events
        self.refuse: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path.startswith("/_control/"):
            await self._control(scope, send)
            return
        if scope["method"] == "POST" and path == "/mcp" and self.refuse:
            body = await _read_body(receive)
            tool = _tool_called(body)
            if tool is not None and self.refuse.get(tool, 0) > 0:
                self.refuse[tool] -= 1
                if not self.refuse[tool]:
                    del self.refuse[tool]
                self.events.append({"event": "refused", "tool": tool})
                await _json(send, 403, {"error": "forbidden", "error_description": f"policy: {tool} is paused"})
                return
            await self.app(scope, _replay(body), send)
            return
        await self.app(scope, receive, send)

    async def _control(self, scope: Scope, send: Send) -> None:
        query = dict(part.split("=", 1) for part in scope["query_string"].decode().split("&") if "=" in part)
        match scope["path"]:
            case "/_control/revoke":
                revoked = self.provider.revoke_all(refresh=query.get("refresh") == "1")
                await _json(send, 200, {"revoked": revoked})
            case "/_control/refuse":
                tool = query["tool"]
                self.refuse[tool] = self.refuse.get(tool, 0) + 1
                await _json(send, 200, {"refuse": self.refuse})
            case "/_control/log":
                await _json(send, 200, {"events": self.events})
            case _:
                await _json(send, 404, {"error": "unknown control"})


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    """A receive that hands the buffered body to the app once, then waits (as for a client that stays)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return receive


def _tool_called(body: bytes) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, dict) and message.get("method") == "tools/call":
        name = (message.get("params") or {}).get("name")
        return name if isinstance(name, str) else None
    return None


async def _json(send: Send, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def build_app(public_url: str) -> ASGIApp:
    events: list[dict[str, Any]] = []
    provider = InMemoryProvider(events)
    mcp = build_mcp(public_url.rstrip("/"), provider)
    # Requests arrive through the recorder (Host: 127.0.0.1:<proxy port>): no localhost rebinding check.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return ControlLayer(mcp.streamable_http_app(transport_security=security), provider, events)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="oauth_server.py", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--public-url", required=True, help="the recorder's base URL: issuer and resource")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    app = build_app(args.public_url)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", timeout_graceful_shutdown=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
