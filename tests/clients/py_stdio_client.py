"""Python client runner over stdio: the official MCP Python SDK client (``stdio_client``) through a list of steps.

    python -m tests.clients.py_stdio_client --command CMD --args JSON --steps JSON [--timeout S]

Starts CMD ARGS as the server (``StdioServerParameters``, the environment passed on whole) and prints exactly
one JSON object on stdout: ``{"client": "python-mcp", "protocol_version", "steps": [{"op", "tool", "ok",
"result", "error"}], "fatal", "stderr"}``, without times, so that a run through the recorder and one without
it compare equal. ``stderr`` is what the server process wrote on its stderr (the transport's errlog).
Steps as tests/clients/py_client.py takes them, and ``{"op": "pause", "seconds": S}``: a pause between two calls.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.clients.py_client import describe, dump


async def run(args: argparse.Namespace, steps: list[dict[str, Any]], errlog: Any) -> dict[str, Any]:
    output: dict[str, Any] = {"client": "python-mcp", "protocol_version": None, "steps": [], "fatal": None}
    params = StdioServerParameters(command=args.command, args=json.loads(args.args), env=dict(os.environ))
    try:
        with anyio.fail_after(args.timeout):
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=args.timeout) as client:
                output["protocol_version"] = client.protocol_version
                for step in steps:
                    if step["op"] == "pause":  # an application's time between two calls; not a step of the output
                        await anyio.sleep(step["seconds"])
                        continue
                    record: dict[str, Any] = {"op": step["op"], "tool": step.get("tool"), "ok": False}
                    record |= {"result": None, "error": None}
                    try:
                        if step["op"] == "list_tools":
                            record["result"] = dump(await client.list_tools())
                        else:
                            record["result"] = dump(await client.call_tool(step["tool"], step.get("args") or {}))
                        record["ok"] = True
                    except Exception as exc:
                        record["error"] = describe(exc)
                    output["steps"].append(record)
    except Exception as exc:
        output["fatal"] = describe(exc)
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.clients.py_stdio_client")
    parser.add_argument("--command", required=True)
    parser.add_argument("--args", default="[]", help="the server's arguments, a JSON list")
    parser.add_argument("--steps", default="[]", help='JSON list, e.g. [{"op": "list_tools"}]')
    parser.add_argument("--timeout", type=float, default=20.0, help="overall deadline and read timeout, seconds")
    args = parser.parse_args(argv)
    # The SDK logs a line it cannot parse with its traceback: to stderr, never into the JSON document.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="backslashreplace") as errlog:
        output = anyio.run(run, args, json.loads(args.steps), errlog)
        errlog.seek(0)
        output["stderr"] = errlog.read()
    print(json.dumps(output), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
