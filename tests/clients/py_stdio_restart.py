"""A client that restarts its stdio server when it dies mid-call and sends the call again, as desktop
agents do: the official MCP Python SDK client, two sessions one after the other.

    python -m tests.clients.py_stdio_restart --command CMD --args JSON --tool NAME --tool-args JSON

Prints one JSON object: {"attempts": [{"ok": bool, "error" | "result": ...}, ...]}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.clients.py_client import describe, dump


async def attempt(params: StdioServerParameters, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    try:
        async with Client(stdio_client(params, errlog=sys.stderr), read_timeout_seconds=20) as client:
            return {"ok": True, "result": dump(await client.call_tool(tool, arguments))}
    except Exception as exc:  # the server died: the next attempt starts it again
        return {"ok": False, "error": describe(exc)}


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    params = StdioServerParameters(command=args.command, args=json.loads(args.args), env=dict(os.environ))
    arguments = json.loads(args.tool_args)
    attempts = [await attempt(params, args.tool, arguments)]
    if not attempts[0]["ok"]:
        attempts.append(await attempt(params, args.tool, arguments))
    return attempts


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.clients.py_stdio_restart")
    for name in ("--command", "--args", "--tool", "--tool-args"):
        parser.add_argument(name, required=True)
    args = parser.parse_args()
    print(json.dumps({"attempts": anyio.run(run, args)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
