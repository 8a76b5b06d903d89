"""The test bed's MCP server: a real server on the official Python SDK behind the fault layer.

Modes:
- stateful:   Streamable HTTP at /mcp with Mcp-Session-Id and a resumable in-memory event store.
- stateless:  Streamable HTTP at /mcp without sessions.
- legacy-sse: the 2024-11-05 HTTP+SSE transport (GET /sse, POST /messages/?session_id=...).

In both Streamable HTTP modes the SDK routes any request whose MCP-Protocol-Version header
names a modern revision (2026-07-28) to its per-request "modern" handler, so a client that
negotiates 2026-07-28 (`server/discover` probe) is served statelessly even in stateful mode;
sessions, priming events and resumption only exist for clients that do `initialize`.

CLI: python -m tests.support.mcp_server --mode stateful --port 0 --port-file PATH
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import uvicorn
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.support.event_store import InMemoryEventStore
from tests.support.fault_layer import CONTROL_PREFIX, FaultLayer, quiet_cut_logs

MODES = ("stateful", "stateless", "legacy-sse")


class AddResult(BaseModel):
    sum: int


class NameForm(BaseModel):
    name: str


async def _ask_for_name() -> Elicit[NameForm]:
    # A resolver, not ctx.elicit(): the SDK then picks the transport per negotiated version
    # (elicitation/create mid-call up to 2025-11-25, InputRequiredResult/MRTR from 2026-07-28).
    return Elicit("What is your name?", NameForm)


WRITE_LOG_PREFIX = "write_record ran: "


def build_mcp(name: str = "mcp-blackbox-testbed") -> MCPServer:
    """The MCP server with the test bed's tools. A fresh instance per app keeps counters per process."""
    mcp = MCPServer(name, version="1.0.0")
    records = itertools.count(1)

    # structured_output=False on the text tools: the SDK would otherwise wrap a `str` return
    # into {"result": ...} structured content with an outputSchema, which these tools must not have.
    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @mcp.tool()
    def add(a: int, b: int) -> AddResult:
        """Add two integers; structured output {"sum": a+b}."""
        return AddResult(sum=a + b)

    @mcp.tool(structured_output=False)
    def raise_error(message: str) -> str:
        """Raise a plain Python exception (the SDK hides its text behind a generic isError result)."""
        raise RuntimeError(message)

    @mcp.tool()
    def tool_error(message: str) -> CallToolResult:
        """Return a tool-level failure: isError=true with the message as text."""
        return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)

    @mcp.tool(structured_output=False)
    def protocol_error(message: str) -> str:
        """Fail at the protocol level: a JSON-RPC error -32602 carrying the message."""
        raise MCPError(code=INVALID_PARAMS, message=message)

    @mcp.tool(structured_output=False)
    async def progress(ctx: Context, steps: int = 3, delay_ms: int = 100) -> str:
        """Send `steps` progress notifications, sleeping delay_ms before each."""
        for i in range(1, steps + 1):
            await asyncio.sleep(delay_ms / 1000)
            await ctx.report_progress(i, steps, f"step {i}")
        return f"done {steps}"

    @mcp.tool(structured_output=False)
    async def ask_name(answer: Annotated[ElicitationResult[NameForm], Resolve(_ask_for_name)]) -> str:
        """Ask the client for a name (form elicitation)."""
        if isinstance(answer, AcceptedElicitation):
            return f"hello {answer.data.name}"
        return "no name"

    @mcp.tool(
        annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=False),
        structured_output=False,
    )
    def write_record(key: str, value: str) -> str:
        """A side effect: count every write in this process. Each execution is logged on stderr, the
        server's side of the truth for whether a write ran (tests/truth), whatever reached the client."""
        print(f"{WRITE_LOG_PREFIX}{key}", file=sys.stderr, flush=True)
        return f"written {key} #{next(records)}"

    return mcp


class BearerAuth:
    """Reject MCP requests lacking `Authorization: Bearer <token>` with 401, as an OAuth resource server would."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(CONTROL_PREFIX):
            await self.app(scope, receive, send)
            return
        if dict(scope["headers"]).get(b"authorization") == self.expected:
            await self.app(scope, receive, send)
            return
        body = b"unauthorized"
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="mcp-blackbox-testbed"'),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def build_app(
    mode: str,
    *,
    json_response: bool = False,
    retry_interval_ms: int | None = None,
    auth_token: str | None = None,
) -> ASGIApp:
    """The MCP app for `mode`, wrapped by (outermost first) the fault layer and optional bearer auth."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    mcp = build_mcp()
    # Requests arrive through a reverse proxy on another port (Host: 127.0.0.1:<proxy port>),
    # which the SDK's default localhost rebinding check would refuse.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    inner: ASGIApp
    if mode == "legacy-sse":
        inner = mcp.sse_app(transport_security=security)
    else:
        inner = mcp.streamable_http_app(
            json_response=json_response,
            stateless_http=mode == "stateless",
            # The SDK ignores the event store in stateless mode; resumability is a session feature.
            event_store=InMemoryEventStore() if mode == "stateful" else None,
            retry_interval=retry_interval_ms,
            transport_security=security,
        )
    if auth_token:
        inner = BearerAuth(inner, auth_token)
    return FaultLayer(inner)


def _write_port_file(path: Path, port: int) -> None:
    """Write atomically (temp file + rename) so a poller never reads a partial number."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(str(port))
    os.replace(tmp, path)


async def _serve(app: ASGIApp, port: int, port_file: Path | None) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    bound = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        http="h11",  # pinned: the cut action relies on h11's close-on-error behaviour
        log_level="warning",
        lifespan="on",
        # Open SSE streams (legacy GET, resumed GETs) never end on their own; don't hang on SIGTERM.
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await task  # startup failed: surface the error
            return
        await asyncio.sleep(0.01)
    if port_file is not None:
        _write_port_file(port_file, bound)
    print(f"mcp-testbed listening on 127.0.0.1:{bound}", file=sys.stderr, flush=True)
    await task


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.mcp_server", description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--json-response", action="store_true", help="answer POSTs with JSON instead of SSE")
    parser.add_argument("--retry-interval-ms", type=int, default=None, help="SSE retry: sent in priming events")
    parser.add_argument("--auth-token", default=None, help="require Authorization: Bearer TOKEN on MCP paths")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    quiet_cut_logs()
    app = build_app(
        args.mode,
        json_response=args.json_response,
        retry_interval_ms=args.retry_interval_ms,
        auth_token=args.auth_token,
    )
    # uvicorn installs its own SIGINT/SIGTERM handlers and shuts down gracefully on either.
    asyncio.run(_serve(app, args.port, args.port_file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
