"""Reading JSON-RPC 2.0 messages out of MCP bodies, leniently.

Only what the recorder needs to recognise MCP and name an exchange on the console;
whether it failed is the analyzer's verdict (``analyzer.live``).
"""

from __future__ import annotations

import json
from typing import Any

JsonObject = dict[str, Any]

# Headers only MCP clients send (Streamable HTTP, 2025-03-26 and later).
MCP_REQUEST_HEADERS = ("mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name")
# The method names MCP defines (2024-11-05 to 2026-07-28): JSON-RPC with only other methods (eth_call,
# textDocument/hover) is some other protocol passing through the proxy.
MCP_METHODS = frozenset({"initialize", "ping", "server/discover"})
# The notifications the analysis reads by name: a call's progress, and the client giving up on it.
PROGRESS = "notifications/progress"
CANCELLED = "notifications/cancelled"
MCP_METHOD_PREFIXES = (
    "tools/", "resources/", "prompts/", "completion/", "logging/", "sampling/", "elicitation/", "roots/", "tasks/",
    "notifications/",
)  # fmt: skip


def is_mcp_method(name: str) -> bool:
    return name in MCP_METHODS or name.startswith(MCP_METHOD_PREFIXES)


def parse_messages(text: str | bytes) -> list[JsonObject] | None:
    """The JSON-RPC objects in a body: one object or a batch array.

    None when the text is not JSON; non-object batch members are dropped.
    """
    try:
        value = json.loads(text)
    except (ValueError, TypeError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return None
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, dict)]


def is_jsonrpc(message: JsonObject) -> bool:
    return message.get("jsonrpc") == "2.0"


def is_response(message: JsonObject) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


def tool_name(message: JsonObject) -> str | None:
    """The tool a ``tools/call`` request names."""
    params = message.get("params")
    if message.get("method") == "tools/call" and isinstance(params, dict):
        name = params.get("name")
        return name if isinstance(name, str) else None
    return None
