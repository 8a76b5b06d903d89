"""A small async driver of the official MCP Python SDK client for the truth corpus.

Unlike tests/clients/py_client.py (a list of steps in a child process), each scenario drives
`mcp.Client` itself, so it decides when and where to retry, and every tools/call carries its truth
label in ``params._meta`` (tests/truth/labels.py).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, cast

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import RequestParamsMeta

from tests.truth.labels import Label

# Sessions (initialize, Mcp-Session-Id) are what the scenarios are about: "legacy" is the SDK's
# initialize handshake; "auto" would negotiate the sessionless 2026-07-28 revision with this server.
CLIENT_MODE = "legacy"
READ_TIMEOUT_S = 10.0

Outcome = Literal["ok", "tool-error", "error"]


@dataclass(frozen=True)
class Attempt:
    """One tools/call as the client saw it."""

    label: Label
    tool: str
    arguments: dict[str, Any]
    outcome: Outcome
    error: str | None
    t_start: float
    t_end: float

    def record(self) -> dict[str, Any]:
        return {
            "label": self.label.meta()["truth"],
            "tool": self.tool,
            "arguments": self.arguments,
            "outcome": self.outcome,
            "error": self.error,
            "t_start": self.t_start,
            "t_end": self.t_end,
        }


@asynccontextmanager
async def open_session(url: str) -> AsyncIterator[Client]:
    """One client session: its own HTTP client (so its own connections), initialize, and DELETE on exit."""
    client = Client(
        streamable_http_client(url, http_client=create_mcp_http_client()),
        mode=CLIENT_MODE,
        read_timeout_seconds=READ_TIMEOUT_S,
    )
    async with client:
        yield client


async def _ignore_progress(progress: float, total: float | None, message: str | None) -> None:
    return None


async def call(
    client: Client, tool: str, arguments: dict[str, Any], label: Label, *, with_progress: bool = False
) -> Attempt:
    """Call a tool with the label in ``_meta``; never raises for a failed call, the outcome says it.

    with_progress asks for progress notifications (the SDK then sends a progressToken), so that the
    server streams events before the result and a cut can fall between them.
    """
    t_start = time.time()
    outcome: Outcome
    error: str | None = None
    try:
        result = await client.call_tool(
            tool,
            arguments,
            progress_callback=_ignore_progress if with_progress else None,
            meta=cast(RequestParamsMeta, label.meta()),  # an open map: the SDK sends extra keys as they are
        )
        outcome = "tool-error" if result.is_error else "ok"
    except Exception as exc:  # 5xx, a cut stream, a timeout: the SDK raises MCPError or a transport error
        outcome, error = "error", f"{type(exc).__name__}: {exc}"
    return Attempt(label, tool, dict(arguments), outcome, error, t_start, time.time())
